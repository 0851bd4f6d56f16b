// Every NodeOverlay version seen, with when it became active and when it went away, indexed
// so that a decision looks at a handful of candidates instead of every overlay.
//
// Time is always an argument: the caller says when it observed what.
import { combinedOperator } from './requirements.ts';
import type { KarpenterView } from './karpenter-view.ts';
import { NodePoolHistory, type NodePoolView } from './nodepool.ts';
import { type Version, VersionHistory } from './versions.ts';
import { type OverlayPolicy, type OverlayView, outranks, unapplied } from './overlay.ts';

export interface OverlayVersion extends Version {
  readonly overlay: OverlayView;
  /** Why Karpenter does not apply it, or undefined when it does. */
  readonly ineligible: string | undefined;
  /** Picked by the watcher's overlaySelector: a record names only such an overlay. */
  readonly selected: boolean;
}

export interface Match {
  version: OverlayVersion | undefined;
  basis: 'exact' | 'approximate';
}

interface OverlayIndexOptions {
  policy: OverlayPolicy;
  /** How long closed versions are kept, so that late decisions can look back. */
  retentionMs: number;
}

function activeAt(v: OverlayVersion, t: number): boolean {
  return v.from <= t && (v.to === undefined || t < v.to);
}

export class OverlayIndex {
  /** The NodePools' template labels, which Karpenter compares beside the instance type's. */
  readonly nodePools = new NodePoolHistory();
  private readonly policy: OverlayPolicy;
  private readonly retentionMs: number;
  private readonly history = new VersionHistory<OverlayVersion>();
  /** Decisions at or after this time are exact: we were watching, and nothing was pruned. */
  private exactSince = Number.POSITIVE_INFINITY;
  /** Intervals in which the watch was broken: changes in them were timed when seen, late. */
  private gaps: [number, number][] = [];
  private dirty = true;
  /** When eligible versions began or ended to count, sorted; rebuilt after any change. */
  private changeTimes: number[] | undefined;
  private buckets = new Map<string, Map<string, OverlayVersion[]>>();
  private unanchored: OverlayVersion[] = [];

  constructor(opts: OverlayIndexOptions) {
    this.policy = opts.policy;
    this.retentionMs = opts.retentionMs;
  }

  /**
   * Overlays known only as they are now (files, a live read): each counts from its
   * creationTimestamp, and launches before `knownSince` are judged approximately.
   */
  static ofCurrent(
    overlays: readonly OverlayView[],
    policy: OverlayPolicy,
    knownSince: number,
    nodePools: readonly NodePoolView[] = [],
  ): OverlayIndex {
    const index = new OverlayIndex({ policy, retentionMs: Number.POSITIVE_INFINITY });
    index.replaceAll(overlays, knownSince);
    index.nodePools.replaceAll(nodePools, knownSince);
    index.markSynced(knownSince);
    return index;
  }

  /** Records an overlay as seen at `at` (an ADDED or MODIFIED event, or a list item). */
  observe(overlay: OverlayView, at: number): void {
    this.changeTimes = undefined;
    const versions = this.history.get(overlay.name) ?? [];
    const current = versions.at(-1);
    const open = this.history.open(overlay.name);
    if (overlay.deletingAt !== undefined) {
      if (open) open.to = Math.min(at, Math.max(open.from, overlay.deletingAt));
      else if (!current && overlay.createdAt !== undefined && overlay.createdAt < overlay.deletingAt) {
        // First seen while being deleted (a finalizer holds it): it was active until then.
        versions.push({
          overlay,
          ineligible: unapplied({ ...overlay, deletingAt: undefined }, this.policy),
          selected: this.policy.selector.matches(overlay.labels),
          from: overlay.createdAt,
          to: overlay.deletingAt,
        });
        this.history.set(overlay.name, versions);
        this.dirty = true;
      }
      return;
    }
    if (open && open.overlay.fingerprint === overlay.fingerprint) return;
    if (open) open.to = at;
    const ineligible = unapplied(overlay, this.policy);
    versions.push({
      overlay,
      ineligible,
      selected: this.policy.selector.matches(overlay.labels),
      from: this.countsFrom(overlay, ineligible, open, at),
      to: undefined,
    });
    this.history.set(overlay.name, versions);
    this.dirty = true;
  }

  /**
   * When a version seen at `at` began to count. Validated by Karpenter after it was not: when its
   * Ready condition turned True. A first sighting: at creation (or that validation), even if we
   * were not watching; whether that is exact is the business of exactSince.
   */
  private countsFrom(
    overlay: OverlayView,
    ineligible: string | undefined,
    open: OverlayVersion | undefined,
    at: number,
  ): number {
    const validatedAt = this.policy.requireOverlayReady && ineligible === undefined ? overlay.ready?.since : undefined;
    if (open) {
      return validatedAt !== undefined && open.overlay.ready?.status !== 'True'
        ? Math.min(at, Math.max(open.from, validatedAt))
        : at;
    }
    const since = validatedAt ?? overlay.createdAt;
    return since === undefined ? at : Math.min(at, since);
  }

  /** Records a deletion seen at `at`. */
  forget(name: string, at: number): void {
    this.history.end(name, at);
    this.changeTimes = undefined;
  }

  /** Replaces the live set with a full list taken at `at` (initial sync or a safety relist). */
  replaceAll(overlays: readonly OverlayView[], at: number): void {
    this.history.endAllBut(new Set(overlays.map((o) => o.name)), at);
    for (const o of overlays) this.observe(o, at);
  }

  /** The first complete list marks the start of exact knowledge. */
  markSynced(at: number): void {
    if (this.exactSince === Number.POSITIVE_INFINITY) this.exactSince = at;
  }

  /** Decisions about launches between `from` and `to` cannot be exact. */
  markGap(from: number, to: number): void {
    if (to > from) this.gaps.push([from, to]);
  }

  get synced(): boolean {
    return this.exactSince !== Number.POSITIVE_INFINITY;
  }

  /** Drops versions that ended before the retention window; decisions that far back become approximate. */
  prune(now: number): void {
    this.changeTimes = undefined;
    const horizon = now - this.retentionMs;
    this.nodePools.prune(horizon);
    this.gaps = this.gaps.filter(([, to]) => to >= horizon);
    for (const [name, versions] of this.history) {
      const kept = versions.filter((v) => v.to === undefined || v.to >= horizon);
      if (kept.length === versions.length) continue;
      for (const v of versions)
        if (v.to !== undefined && v.to < horizon) this.exactSince = Math.max(this.exactSince, v.to);
      if (kept.length === 0) this.history.delete(name);
      else this.history.set(name, kept);
      this.dirty = true;
    }
  }

  /** The overlay Karpenter would have applied to this launch at time `t`, selected or not. */
  match(view: KarpenterView, t: number): Match {
    let best: OverlayVersion | undefined;
    for (const v of this.candidates(view)) {
      if (!activeAt(v, t)) continue;
      if (best && !outranks(v.overlay, best.overlay)) continue;
      if (view.passesAll(v.overlay.requirements)) best = v;
    }
    const exact = t >= this.exactSince && !this.gaps.some(([from, to]) => t >= from && t <= to);
    return { version: best, basis: exact ? 'exact' : 'approximate' };
  }

  /** Every eligible version active at `t` that this launch meets: the winner and those it outranks. */
  matchesAt(view: KarpenterView, t: number): OverlayVersion[] {
    // A set: a version filed under several values can be found more than once.
    const out = new Set<OverlayVersion>();
    for (const v of this.candidates(view)) if (activeAt(v, t) && view.passesAll(v.overlay.requirements)) out.add(v);
    return [...out];
  }

  /** The versions this launch could match: those filed under a value Karpenter sees for it, and those with no anchor. */
  private *candidates(view: KarpenterView): Iterable<OverlayVersion> {
    if (this.dirty) this.rebuild();
    for (const [key, byValue] of this.buckets) {
      for (const value of view.valuesFor(key)) {
        const found = byValue.get(value);
        if (found) yield* found;
      }
    }
    yield* this.unanchored;
  }

  /** A new array whenever any version changes: a key for what is worked out of the versions. */
  get revision(): readonly number[] {
    this.changeTimes ??= this.eligibleBoundaries();
    return this.changeTimes;
  }

  /** When an eligible overlay began or ceased to count, after `from` and by `to`. */
  changesBetween(from: number, to: number): number[] {
    this.changeTimes ??= this.eligibleBoundaries();
    const times = this.changeTimes;
    let lo = 0;
    let hi = times.length;
    while (lo < hi) {
      const mid = (lo + hi) >>> 1;
      if ((times[mid] as number) <= from) lo = mid + 1;
      else hi = mid;
    }
    const out: number[] = [];
    for (let i = lo; i < times.length && (times[i] as number) <= to; i++) out.push(times[i] as number);
    return out;
  }

  private eligibleBoundaries(): number[] {
    const times: number[] = [];
    for (const v of this.versions()) {
      if (v.ineligible !== undefined) continue;
      times.push(v.from);
      if (v.to !== undefined) times.push(v.to);
    }
    return times.sort((a, b) => a - b);
  }

  /** Every key that an eligible overlay active at `t` names in its requirements. */
  keysNamedAt(t: number): Set<string> {
    const keys = new Set<string>();
    for (const v of this.versions()) {
      if (v.ineligible === undefined && activeAt(v, t)) for (const r of v.overlay.requirements) keys.add(r.key);
    }
    return keys;
  }

  /** The versions active at `t`, eligible or not, for explanations. */
  activeVersionsAt(t: number): OverlayVersion[] {
    return [...this.versions()].filter((v) => activeAt(v, t));
  }

  get size(): number {
    return this.history.inForce;
  }

  private *versions(): Iterable<OverlayVersion> {
    for (const versions of this.history.values()) yield* versions;
  }

  /**
   * Files each eligible version under one of its combined `In` requirements, the (key, value)
   * pair shared by the fewest versions: a node can only match a version whose anchor value it has.
   */
  private rebuild(): void {
    const eligible = [...this.versions()].filter((v) => v.ineligible === undefined);
    const frequency = new Map<string, number>();
    const pairKey = (k: string, v: string) => `${k}\u0000${v}`;
    for (const v of eligible) {
      for (const r of v.overlay.requirements) {
        if (combinedOperator(r) !== 'In') continue;
        for (const value of r.values)
          frequency.set(pairKey(r.key, value), (frequency.get(pairKey(r.key, value)) ?? 0) + 1);
      }
    }
    this.buckets = new Map();
    this.unanchored = [];
    for (const v of eligible) {
      let anchor: { key: string; values: ReadonlySet<string>; cost: number } | undefined;
      for (const r of v.overlay.requirements) {
        if (combinedOperator(r) !== 'In') continue;
        let cost = 0;
        for (const value of r.values) cost += frequency.get(pairKey(r.key, value)) ?? 0;
        if (!anchor || cost < anchor.cost) anchor = { key: r.key, values: r.values, cost };
      }
      if (!anchor) {
        this.unanchored.push(v);
        continue;
      }
      let byValue = this.buckets.get(anchor.key);
      if (!byValue) {
        byValue = new Map();
        this.buckets.set(anchor.key, byValue);
      }
      for (const value of anchor.values) {
        const list = byValue.get(value);
        if (list) list.push(v);
        else byValue.set(value, [v]);
      }
    }
    this.dirty = false;
  }
}

// veneer_nodewatcher_launches_total{overlay, effect}: each record that names an overlay, counted
// once, by the leader, when its watch of every node's metadata first shows the record written
// (whoever wrote it: the webhook inline, or the reconciler).
//
// Once per cluster: only the leader counts, and only records written (their labeled-at, to the
// second) since it became leader, so that a new leader, or the same one restarted, never counts
// what was there before it. A record counted is remembered while its labeled-at is within
// WINDOW_MS; one older than that is never counted (a relist shows every node again). Across a
// leader change, a record written in the hand-over (after the old leader stopped counting,
// before the new one started) is not counted, and one written within the second the new leader
// started in may be counted by both. Every active overlay has its series from 0 on every
// replica, so that PromQL's increase() sees the first launch of each.
import { EFFECTS, fromBasicTimestamp, recordedEffect, type NodeView, type RecordKeys } from '../../engine/index.ts';
import type { LeaderRunnable } from '../../kube/manager.ts';
import type { Metrics } from '../../metrics.ts';
import type { ControllerContext } from '../context.ts';
import { OTHER } from '../gauges/overlays.ts';

/** Records older than this are history: a relist or a label change shows them again, and they are not counted. */
export const WINDOW_MS = 60 * 60_000;

interface Launch {
  /** The record's matching-overlay value. */
  overlay: string;
  effect: string;
  /** labeled-at, epoch ms (to the second). */
  writtenAt: number;
}

/** What a record that names an overlay is counted by; undefined for a node without one. */
export function launchOf(node: NodeView, keys: RecordKeys): Launch | undefined {
  const overlay = node.labels[keys.matchingOverlay];
  if (node.labels[keys.influenced] !== 'true' || !overlay) return undefined;
  const writtenAt = fromBasicTimestamp(node.labels[keys.labeledAt]);
  if (writtenAt === undefined) return undefined;
  return { overlay, effect: recordedEffect(node.labels, keys), writtenAt };
}

/**
 * The series a counter may have: a counter's series cannot be summed into another later, so the
 * first `max - 1` (overlay, effect) pairs keep their labels for the life of the process, and
 * every later one shares the series whose labels are both `other`: at most `max` in all.
 */
export class SeriesCap {
  private readonly named = new Set<string>();
  private readonly max: number;

  constructor(max: number) {
    this.max = max;
  }

  labels(overlay: string, effect: string): { overlay: string; effect: string } {
    const key = `${overlay}\u0000${effect}`;
    if (this.named.has(key)) return { overlay, effect };
    if (this.named.size < this.max - 1) {
      this.named.add(key);
      return { overlay, effect };
    }
    return { overlay: OTHER, effect: OTHER };
  }
}

interface LaunchCounterOptions {
  metrics: Metrics;
  keys: RecordKeys;
  /** metrics.maxOverlaySeries. */
  max: number;
  /** The matching-overlay values of the active selected overlays: each has its series from 0. */
  active: () => Iterable<string>;
  now?: () => number;
}

/** The counter, fed by every node's metadata; every overlay that counts has its series from 0. */
export function launches(ctx: ControllerContext): LaunchCounter {
  const { caches, now } = ctx;
  const counter = new LaunchCounter({
    metrics: ctx.metrics,
    keys: ctx.settings.keys,
    max: ctx.options.metrics.maxOverlaySeries,
    active: () => caches.overlays.counting(now()).map((o) => o.nameLabelValue),
    now,
  });
  caches.nodes.onMetadata((node) => counter.seen(node));
  return counter;
}

export class LaunchCounter implements LeaderRunnable {
  readonly name = 'launches';
  private readonly o: LaunchCounterOptions;
  private readonly now: () => number;
  private readonly cap: SeriesCap;
  /** The second this replica became leader (epoch ms); undefined while it follows. */
  private since: number | undefined;
  /** Node key -> labeled-at of the records counted, while within WINDOW_MS. */
  private readonly counted = new Map<string, number>();

  constructor(opts: LaunchCounterOptions) {
    this.o = opts;
    this.now = opts.now ?? Date.now;
    this.cap = new SeriesCap(opts.max);
    opts.metrics.atScrape.launches = () => {
      for (const overlay of opts.active()) for (const effect of EFFECTS) this.add(overlay, effect, 0);
    };
  }

  /** A node as the metadata watch shows it now. */
  seen(node: NodeView): void {
    if (this.since === undefined) return;
    const launch = launchOf(node, this.o.keys);
    if (!launch) return;
    const key = node.uid ?? node.name;
    const now = this.now();
    if (this.counted.has(key) || launch.writtenAt < this.since || now - launch.writtenAt > WINDOW_MS) return;
    this.counted.set(key, launch.writtenAt);
    // Entries leave once their record is too old to count: seen() would refuse such a node anyway.
    for (const [k, at] of this.counted) {
      if (now - at <= WINDOW_MS) break;
      this.counted.delete(k);
    }
    this.add(launch.overlay, launch.effect, 1);
  }

  /** Leadership gained: records written from this second on are this replica's to count. */
  lead(): void {
    this.since = Math.floor(this.now() / 1000) * 1000;
  }

  /** Leadership lost: the new leader counts from when it starts. */
  follow(): void {
    this.since = undefined;
    this.counted.clear();
  }

  private add(overlay: string, effect: string, n: number): void {
    this.o.metrics.launches.inc(this.cap.labels(overlay, effect), n);
  }
}

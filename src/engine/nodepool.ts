// NodePools reduced to what Karpenter's overlay controller reads of them (the name and the
// template's labels), its consolidation policy (Balanced consolidation scores a command by its
// NodePools' costs) and its limits (a replacement's options are the types within them), kept per version so that a launch is judged with the labels its NodePool
// had then: a label removed later still counted for the nodes launched before.
import { normalizedKey, normalizedValue } from './normalize.ts';
import { toEpochMs } from './overlay.ts';
import { parseQuantity } from './quantity.ts';
import type { Labels } from './requirements.ts';
import { type Version, VersionHistory } from './versions.ts';

type Timestamp = string | Date | undefined | null;

export interface NodePoolObject {
  metadata?: { name?: string; creationTimestamp?: Timestamp; deletionTimestamp?: Timestamp };
  spec?: {
    template?: { metadata?: { labels?: Record<string, string> | null } | null } | null;
    disruption?: { consolidationPolicy?: string | null } | null;
    limits?: Record<string, string | number> | null;
  } | null;
}

export interface NodePoolView {
  readonly name: string;
  /** `spec.template.metadata.labels`, under normalized keys as Karpenter reads them. */
  readonly templateLabels: Labels;
  /** spec.disruption.consolidationPolicy; undefined: Karpenter's default, WhenEmptyOrUnderutilized. */
  readonly consolidationPolicy?: string;
  /** spec.limits by resource name, as numbers (cores, bytes, pods); NaN: a value that is not a quantity. */
  readonly limits?: Readonly<Record<string, number>>;
  readonly createdAt?: number;
  readonly deletingAt?: number;
}

export function toNodePoolView(obj: NodePoolObject): NodePoolView {
  const labels: Record<string, string> = {};
  for (const [key, value] of Object.entries(obj.spec?.template?.metadata?.labels ?? {})) {
    const k = normalizedKey(key);
    labels[k] = normalizedValue(k, value);
  }
  const createdAt = toEpochMs(obj.metadata?.creationTimestamp);
  const deletingAt = toEpochMs(obj.metadata?.deletionTimestamp);
  const policy = obj.spec?.disruption?.consolidationPolicy ?? undefined;
  const limits = Object.entries(obj.spec?.limits ?? {});
  return {
    name: obj.metadata?.name ?? '',
    templateLabels: labels,
    ...(policy !== undefined ? { consolidationPolicy: policy } : {}),
    ...(limits.length > 0
      ? { limits: Object.fromEntries(limits.map(([name, q]) => [name, parseQuantity(q) ?? Number.NaN])) }
      : {}),
    ...(createdAt !== undefined ? { createdAt } : {}),
    ...(deletingAt !== undefined ? { deletingAt } : {}),
  };
}

interface PoolVersion extends Version {
  readonly pool: NodePoolView;
  readonly versionKey: string;
}

export class NodePoolHistory {
  private readonly history = new VersionHistory<PoolVersion>();

  /** Records a NodePool as seen at `at`; only a change of its template labels, consolidation policy or limits starts a version. */
  observe(pool: NodePoolView, at: number): void {
    const versions = this.history.get(pool.name) ?? [];
    const open = this.history.open(pool.name);
    const versionKey = JSON.stringify([
      pool.consolidationPolicy ?? '',
      Object.entries(pool.limits ?? {}).sort(([a], [b]) => (a < b ? -1 : 1)),
      ...Object.entries(pool.templateLabels).sort(([a], [b]) => (a < b ? -1 : 1)),
    ]);
    if (pool.deletingAt !== undefined) {
      // Karpenter launches nothing more for a NodePool being deleted.
      if (open) open.to = Math.max(open.from, Math.min(at, pool.deletingAt));
      else if (versions.length === 0)
        this.history.set(pool.name, [
          { pool, versionKey, from: Math.min(pool.createdAt ?? pool.deletingAt, pool.deletingAt), to: pool.deletingAt },
        ]);
      return;
    }
    if (open?.versionKey === versionKey) return;
    if (open) open.to = at;
    // A first sighting starts at creation: its nodes were launched since then.
    const from = open || pool.createdAt === undefined ? at : Math.min(at, pool.createdAt);
    versions.push({ pool, versionKey, from, to: undefined });
    this.history.set(pool.name, versions);
  }

  forget(name: string, at: number): void {
    this.history.end(name, at);
  }

  /** A full list taken at `at`. */
  replaceAll(pools: readonly NodePoolView[], at: number): void {
    this.history.endAllBut(new Set(pools.map((p) => p.name)), at);
    for (const p of pools) this.observe(p, at);
  }

  /** The NodePool as it was at `t`; undefined when it is unknown (never seen, or forgotten). */
  at(name: string | undefined, t: number): NodePoolView | undefined {
    if (name === undefined) return undefined;
    for (const v of this.history.get(name) ?? []) if (v.from <= t && (v.to === undefined || t < v.to)) return v.pool;
    return undefined;
  }

  /** Every NodePool as it was at `t`, in name order. */
  allAt(t: number): NodePoolView[] {
    const out: NodePoolView[] = [];
    for (const name of [...this.history.keys()].sort()) {
      const pool = this.at(name, t);
      if (pool) out.push(pool);
    }
    return out;
  }

  /** Drops versions that ended before `horizon`. */
  prune(horizon: number): void {
    for (const [name, versions] of this.history) {
      const kept = versions.filter((v) => v.to === undefined || v.to >= horizon);
      if (kept.length === 0) this.history.delete(name);
      else if (kept.length !== versions.length) this.history.set(name, kept);
    }
  }

  get size(): number {
    return this.history.inForce;
  }
}

// Each NodePool's NodeClaims by offering, as Karpenter's ClusterCost counts them for Balanced
// consolidation's pool cost (pkg/state/cost, UpdateNodeClaim): a NodeClaim counts once it carries
// its instance type, zone, capacity type and NodePool labels, until it is gone. Kept as the
// NodeClaim cache's events come; counted per pool when a Balanced replacement asks, and that count
// kept until the pool's NodeClaims change. Their capacity too: what a consolidation's simulation
// held the pool to use against its limits (engine/disruption/limits.ts).
import {
  type Allocatable,
  CAPACITY_TYPE,
  INSTANCE_TYPE,
  NODEPOOL_LABEL,
  type NodeClaimView,
  type PoolOffering,
  ZONE,
} from '../../engine/index.ts';

interface Counted {
  readonly pool: string;
  readonly offering: string;
  readonly createdAt: number | undefined;
  readonly capacity: Allocatable | undefined;
}

export class PoolOfferings {
  private readonly byClaim = new Map<string, Counted>();
  /** The NodeClaims of each pool, and a version that changes with them. */
  private readonly pools = new Map<string, { claims: Map<string, Counted>; version: number }>();
  private readonly counts = new Map<string, { version: number; before: number; offerings: PoolOffering[] }>();
  private readonly capacities = new Map<string, { version: number; before: number; sum: Allocatable }>();

  upsert(claim: NodeClaimView): void {
    const l = claim.labels;
    const [type, zone, capacityType, pool] = [l[INSTANCE_TYPE], l[ZONE], l[CAPACITY_TYPE], l[NODEPOOL_LABEL]];
    if (type === undefined || zone === undefined || capacityType === undefined || pool === undefined) {
      this.remove(claim);
      return;
    }
    const offering = [type, zone, capacityType].join('\u0000');
    const known = this.byClaim.get(claim.name);
    if (
      known?.pool === pool &&
      known.offering === offering &&
      known.createdAt === claim.createdAt &&
      known.capacity === claim.capacity
    )
      return;
    this.remove(claim);
    const counted = { pool, offering, createdAt: claim.createdAt, capacity: claim.capacity };
    this.byClaim.set(claim.name, counted);
    const p = this.pools.get(pool) ?? { claims: new Map(), version: 0 };
    p.claims.set(claim.name, counted);
    p.version++;
    this.pools.set(pool, p);
  }

  remove(claim: Pick<NodeClaimView, 'name'>): void {
    const known = this.byClaim.get(claim.name);
    if (known === undefined) return;
    this.byClaim.delete(claim.name);
    const p = this.pools.get(known.pool)!;
    p.claims.delete(claim.name);
    p.version++;
    if (p.claims.size === 0) {
      this.pools.delete(known.pool);
      this.counts.delete(known.pool);
      this.capacities.delete(known.pool);
    }
  }

  /** The pool's NodeClaims created by `createdBefore` (or when, unknown), counted by offering; the same list until they change. */
  offerings(pool: string, createdBefore: number): readonly PoolOffering[] {
    const p = this.pools.get(pool);
    if (p === undefined) return [];
    const kept = this.counts.get(pool);
    if (kept?.version === p.version && kept.before === createdBefore) return kept.offerings;
    const byOffering = new Map<string, number>();
    for (const c of p.claims.values())
      if (c.createdAt === undefined || c.createdAt <= createdBefore)
        byOffering.set(c.offering, (byOffering.get(c.offering) ?? 0) + 1);
    const offerings = [...byOffering].map(([key, count]) => {
      const [instanceType, zone, capacityType] = key.split('\u0000') as [string, string, string];
      return { instanceType, zone, capacityType, count };
    });
    this.counts.set(pool, { version: p.version, before: createdBefore, offerings });
    return offerings;
  }

  /**
   * The capacity of the pool's NodeClaims created by `createdBefore` (or when, unknown), but those
   * named in `except`: the sum kept until the pool's NodeClaims change, less the few excepted.
   */
  capacity(pool: string, createdBefore: number, except: ReadonlySet<string>): Allocatable {
    const p = this.pools.get(pool);
    if (p === undefined) return { cpu: 0, memory: 0, pods: 0 };
    let kept = this.capacities.get(pool);
    if (kept?.version !== p.version || kept.before !== createdBefore) {
      kept = { version: p.version, before: createdBefore, sum: sumOf(p.claims.values(), createdBefore) };
      this.capacities.set(pool, kept);
    }
    const excepted = sumOf(
      [...except].flatMap((name) => p.claims.get(name) ?? []),
      createdBefore,
    );
    return {
      cpu: kept.sum.cpu - excepted.cpu,
      memory: kept.sum.memory - excepted.memory,
      pods: kept.sum.pods - excepted.pods,
    };
  }
}

function sumOf(claims: Iterable<Counted>, createdBefore: number): Allocatable {
  let [cpu, memory, pods] = [0, 0, 0];
  for (const c of claims)
    if (c.capacity !== undefined && (c.createdAt === undefined || c.createdAt <= createdBefore)) {
      cpu += c.capacity.cpu;
      memory += c.capacity.memory;
      pods += c.capacity.pods;
    }
  return { cpu, memory, pods };
}

// How the selected overlays move what Karpenter's ClusterCost sums for a NodePool
// (pkg/state/cost): each of its NodeClaims counted at its offering's price (instance type, zone,
// capacity type) from the overlay-decorated provider, priced when the offering's first NodeClaim
// came and again at each refresh of its pricing controller (hourly,
// controllers/state/informer/pricing.go). So the price it holds is that of some moment of the hour
// before the decision: the shift is bounded over the overlays in force at each such moment.
import type { NodePoolView } from '../nodepool.ts';
import type { ProviderKeys } from '../providers.ts';
import type { Labels } from '../requirements.ts';
import { CAPACITY_TYPE, INSTANCE_TYPE, NODEPOOL_LABEL, ZONE } from '../well-known.ts';
import { idOf } from './identity.ts';
import type { PriceBook } from './prices.ts';
import { type Interval, replacedPrice, type Stop, stop, type Worlds } from './replacement-prices.ts';

/** A NodePool's NodeClaims of one offering, counted. */
export interface PoolOffering {
  readonly instanceType: string;
  readonly zone: string;
  readonly capacityType: string;
  readonly count: number;
}

/** The pricing controller's period: ClusterCost's prices are at most this old. */
export const COST_REFRESH_MS = 60 * 60_000;

/** Kept per offerings list (the caches hand out a new list when the pool's NodeClaims change). */
const shifts = new WeakMap<readonly PoolOffering[], Map<string, Stop | Interval>>();
const MAX_SHIFTS_PER_LIST = 16;

/**
 * The pool's ClusterCost without the selected overlays less with them, over the moments its
 * prices may be from (`moments`: each moment's worlds).
 */
export function poolCostShift(
  offerings: readonly PoolOffering[],
  pool: NodePoolView,
  provider: ProviderKeys,
  prices: PriceBook,
  moments: readonly Worlds[],
  nodeLabelsOf: ((instanceType: string) => Labels | undefined) | undefined,
): Stop | Interval {
  const key = `${idOf(pool)}|${idOf(prices)}|${momentsKey(moments)}`;
  let kept = shifts.get(offerings);
  if (!kept) {
    kept = new Map();
    shifts.set(offerings, kept);
  }
  const known = kept.get(key);
  if (known) return known;
  const shift = computeShift(offerings, pool, provider, prices, moments, nodeLabelsOf);
  if (kept.size >= MAX_SHIFTS_PER_LIST) kept.clear();
  kept.set(key, shift);
  return shift;
}

/** Kept per moments list: every overlay's id at every moment is long to spell. */
const momentKeys = new WeakMap<readonly Worlds[], string>();

function momentsKey(moments: readonly Worlds[]): string {
  let key = momentKeys.get(moments);
  if (key === undefined) {
    const ids = (os: Worlds['with']) => os.map(idOf).join(',');
    key = moments.map((w) => `${ids(w.with)}/${ids(w.without)}`).join(';');
    momentKeys.set(moments, key);
  }
  return key;
}

function computeShift(
  offerings: readonly PoolOffering[],
  pool: NodePoolView,
  provider: ProviderKeys,
  prices: PriceBook,
  moments: readonly Worlds[],
  nodeLabelsOf: ((instanceType: string) => Labels | undefined) | undefined,
): Stop | Interval {
  let lo = 0;
  let hi = 0;
  for (const o of offerings) {
    const labels: Labels = {
      ...nodeLabelsOf?.(o.instanceType),
      [INSTANCE_TYPE]: o.instanceType,
      [ZONE]: o.zone,
      [CAPACITY_TYPE]: o.capacityType,
      [NODEPOOL_LABEL]: pool.name,
    };
    let min = Number.POSITIVE_INFINITY;
    let max = Number.NEGATIVE_INFINITY;
    for (const worlds of moments) {
      const priced = replacedPrice({ nodeClaim: '', labels, pool }, provider, prices, worlds);
      if ('stop' in priced)
        return stop(
          'balanced',
          `the price ClusterCost holds for NodePool ${pool.name}'s ${o.capacityType} ${o.instanceType} in ${o.zone} is not known here (${priced.stop.code})`,
        );
      const d = priced.without - priced.with;
      min = Math.min(min, d);
      max = Math.max(max, d);
    }
    lo += o.count * min;
    hi += o.count * max;
  }
  return { lo, hi };
}

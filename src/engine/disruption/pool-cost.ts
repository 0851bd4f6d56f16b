// How the selected overlays move what Karpenter's ClusterCost sums for a NodePool
// (pkg/state/cost): each of its NodeClaims counted at its offering's price (instance type, zone,
// capacity type) from the overlay-decorated provider, priced when the offering's first NodeClaim
// came and again at each refresh of its pricing controller (hourly,
// controllers/state/informer/pricing.go). So the price it holds is that of some moment of the hour
// before the decision: the shift is bounded over the overlays in force at each such moment.
import { Abstain, abstain } from '../effect/abstain.ts';
import { countedOf, worldsOf } from '../effect/moment.ts';
import type { PriceBook } from '../effect/prices.ts';
import type { InstanceLabels } from '../effect/types.ts';
import type { Worlds } from '../effect/worlds.ts';
import { Memo } from '../memo.ts';
import type { NodePoolView } from '../nodepool.ts';
import type { OverlayIndex } from '../overlay-index.ts';
import type { ProviderKeys } from '../providers.ts';
import type { Labels } from '../requirements.ts';
import { CAPACITY_TYPE, INSTANCE_TYPE, NODEPOOL_LABEL, ZONE } from '../well-known.ts';
import { candidatePrice } from './prices.ts';
import type { DecisionWindow, Interval, PoolOffering } from './types.ts';

/** The pricing controller's period: ClusterCost's prices are at most this old. */
const COST_REFRESH_MS = 60 * 60_000;

/** The worlds at each moment ClusterCost may have priced a pool's offerings at: the hour before the window, and the window. */
const COST_MOMENTS = new Memo<OverlayIndex, { revision: readonly number[]; from: number; to: number }, Worlds[]>(
  (index, { from, to }) =>
    [from, ...index.changesBetween(from, to)].map((t) => worldsOf(countedOf(index.activeVersionsAt(t)))),
  1,
);

/** The worlds ClusterCost may have priced with, for a command priced within `window`: one shared list per window and index revision. */
export const costMoments = (index: OverlayIndex, window: DecisionWindow): readonly Worlds[] =>
  COST_MOMENTS.of(index, { revision: index.revision, from: window.from - COST_REFRESH_MS, to: window.to });

interface ShiftInput {
  readonly pool: NodePoolView;
  readonly provider: ProviderKeys;
  readonly prices: PriceBook;
  /** Each moment's worlds. */
  readonly moments: readonly Worlds[];
  readonly instanceLabels: InstanceLabels | undefined;
}

/** Kept per offerings list: the caches hand out a new list when the pool's NodeClaims change. */
const SHIFTS = new Memo<readonly PoolOffering[], ShiftInput, Interval | Abstain>(computeShift, 16);

/** The pool's ClusterCost without the selected overlays less with them, over the moments its prices may be from. */
export const poolCostShift = (
  input: ShiftInput & { readonly offerings: readonly PoolOffering[] },
): Interval | Abstain => {
  const { offerings, ...rest } = input;
  return SHIFTS.of(offerings, rest);
};

function computeShift(offerings: readonly PoolOffering[], s: ShiftInput): Interval | Abstain {
  let lo = 0;
  let hi = 0;
  for (const o of offerings) {
    const labels: Labels = {
      ...s.instanceLabels?.get(o.instanceType),
      [INSTANCE_TYPE]: o.instanceType,
      [ZONE]: o.zone,
      [CAPACITY_TYPE]: o.capacityType,
      [NODEPOOL_LABEL]: s.pool.name,
    };
    let min = Number.POSITIVE_INFINITY;
    let max = Number.NEGATIVE_INFINITY;
    for (const worlds of s.moments) {
      const priced = candidatePrice({ nodeClaim: '', labels, pool: s.pool }, s.provider, s.prices, worlds);
      if (priced instanceof Abstain)
        return abstain(
          'balanced',
          `the price ClusterCost holds for NodePool ${s.pool.name}'s ${o.capacityType} ${o.instanceType} in ${o.zone} is not known here (${priced.code})`,
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

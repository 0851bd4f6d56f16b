// How the selected overlays move what Karpenter's ClusterCost sums for a NodePool
// (pkg/state/cost): each of its NodeClaims counted at its offering's price (instance type, zone,
// capacity type) from the overlay-decorated provider, priced when the offering's first NodeClaim
// came and again at each refresh of its pricing controller (hourly,
// controllers/state/informer/pricing.go). So the price it holds is that of some moment of the hour
// before the decision: the shift is bounded over the overlays in force at each such moment.
import { Abstain, abstain } from '../effect/abstain.ts';
import { type CatalogContext, overlaysInForce, worldsOf } from '../effect/moment.ts';
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

/**
 * The worlds at each moment ClusterCost may have priced a pool's offerings at: the hour before the
 * window, and the window; a moment whose world without the selected overlays is in doubt (a
 * Conflict the replay of Karpenter's validation cannot settle) leaves the shift unknown.
 */
const COST_MOMENTS = new Memo<
  OverlayIndex,
  CatalogContext & { revision: readonly number[]; from: number; to: number },
  readonly Worlds[] | Abstain
>((index, { from, to, revision: _, ...context }) => {
  const moments: Worlds[] = [];
  for (const t of [from, ...index.changesBetween(from, to)]) {
    const { counted, conflicted } = overlaysInForce(index, t, context);
    if (conflicted.length > 0)
      return abstain(
        'conflict',
        `Karpenter refused an overlay of ${conflicted[0]!.name}'s weight as a Conflict: without the selected overlays it would judge ${conflicted[0]!.name} again, maybe differently, and the pool's cost with it`,
      );
    moments.push(worldsOf(counted));
  }
  return moments;
}, 1);

/** The worlds ClusterCost may have priced with, for a command priced within `window`: one shared list per window, index revision and catalog. */
export const costMoments = (
  index: OverlayIndex,
  window: DecisionWindow,
  context: CatalogContext,
): readonly Worlds[] | Abstain =>
  COST_MOMENTS.of(index, { ...context, revision: index.revision, from: window.from - COST_REFRESH_MS, to: window.to });

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

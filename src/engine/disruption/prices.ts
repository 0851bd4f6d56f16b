// The prices consolidation compares, in one world: a candidate's own offering (types.go,
// resolveNodePrice) and an option's WorstLaunchPrice under the replacement's requirements
// (cloudprovider/types.go), both overlays applied. consolidation.ts runs the test in both worlds;
// cut-options.ts prices the types that are not options but could have been.
import type { FitSizing } from '../effect/allocatable.ts';
import { Abstain, abstain } from '../effect/abstain.ts';
import { internedCandidate } from '../effect/candidates.ts';
import { candidateTypes } from '../effect/effect.ts';
import type { PriceBook } from '../effect/prices.ts';
import type { ClaimForEffect, InstanceLabels } from '../effect/types.ts';
import { type PricedCandidate, priceWorld, type WorldInput, type Worlds } from '../effect/worlds.ts';
import type { NodePoolView } from '../nodepool.ts';
import type { ProviderKeys } from '../providers.ts';
import type { Labels } from '../requirements.ts';
import { CAPACITY_TYPE, INSTANCE_TYPE, ZONE } from '../well-known.ts';
import type { Candidate } from './types.ts';

const NOTHING_PINNED: Labels = Object.freeze({});

/** A candidate's price in both worlds, and the selected overlay that priced it with them, if one did. */
interface CandidatePrice {
  readonly with: number;
  readonly without: number;
  readonly steering: readonly string[];
}

/** resolveNodePrice: the candidate's own offering (its zone and capacity type), overlays applied. */
export function candidatePrice(
  c: Candidate,
  provider: ProviderKeys,
  prices: PriceBook,
  worlds: Worlds,
): CandidatePrice | Abstain {
  const name = c.labels[INSTANCE_TYPE];
  const zone = c.labels[ZONE];
  const capacityType = c.labels[CAPACITY_TYPE];
  if (name === undefined || zone === undefined || capacityType === undefined || c.pool === undefined)
    return abstain(
      'replaced-set',
      `replaced NodeClaim ${c.nodeClaim}'s instance type, zone, capacity type or NodePool is not known`,
    );
  if (capacityType === 'reserved')
    return abstain(
      'reserved',
      `replaced NodeClaim ${c.nodeClaim} ran on reserved capacity, whose price the watcher does not see`,
    );
  const list = capacityType === 'spot' ? prices.spot(name, zone) : prices.onDemand(name);
  if (list === undefined)
    return abstain(
      capacityType === 'spot' && !prices.hasSpot ? 'no-spot-prices' : 'no-prices',
      `the price source (${prices.source}) has no ${capacityType} price for ${name} in ${zone}, the offering replaced NodeClaim ${c.nodeClaim} ran on`,
    );
  const input: WorldInput = {
    offerings: 'one',
    capacityType,
    zone,
    list,
    candidates: [internedCandidate(name, NOTHING_PINNED, c.labels, provider.instanceTypeKeys)],
    pool: c.pool,
    provider,
    region: prices.region,
  };
  const withThem = priceWorld(input, worlds.with);
  if (withThem instanceof Abstain) return withThem;
  const without = priceWorld(input, worlds.without);
  if (without instanceof Abstain) return without;
  const offering = withThem[0]!.offerings[0]!;
  return {
    with: offering.price,
    without: without[0]!.offerings[0]!.price,
    steering: offering.overlay && worlds.selected.has(offering.overlay) ? [offering.overlay.name] : [],
  };
}

/** What an option is priced from: its NodeClaim's NodePool and provider, the prices, the zones it could launch in. */
export interface OptionSetting {
  readonly claim: ClaimForEffect;
  readonly pool: NodePoolView;
  readonly provider: ProviderKeys;
  readonly prices: PriceBook;
  readonly zones: ReadonlySet<string>;
  readonly instanceLabels: InstanceLabels | undefined;
  /** What the pods' fit is computed from, where known (fit.ts). */
  readonly sizing?: FitSizing | undefined;
}

/** Types by name, priced as the replacement's options are: its offerings in the zones it could launch in. */
export function optionsWorld(names: readonly string[], s: OptionSetting): WorldInput {
  return {
    offerings: 'listed',
    prices: s.prices,
    zones: s.zones,
    candidates: candidateTypes(names, s.claim.pinned, s.provider, s.instanceLabels),
    pool: s.pool,
    provider: s.provider,
    region: s.prices.region,
  };
}

/** The types in both worlds, or the abstention of the first that cannot be priced. */
export function pricedBoth(
  world: WorldInput,
  worlds: Worlds,
): { with: readonly PricedCandidate[]; without: readonly PricedCandidate[] } | Abstain {
  const withThem = priceWorld(world, worlds.with);
  if (withThem instanceof Abstain) return withThem;
  const without = priceWorld(world, worlds.without);
  if (without instanceof Abstain) return without;
  return { with: withThem, without };
}

/** The replacement's requirements as its price filter read them. */
export interface FilterRequirements {
  readonly capacityTypes: ReadonlySet<string>;
  readonly zones: ReadonlySet<string>;
}

/** Offerings.WorstLaunchPrice: the dearest compatible offering of the first capacity type that has one (spot before on-demand). */
export function worstLaunchPrice(c: PricedCandidate, reqs: FilterRequirements): number {
  for (const capacityType of ['spot', 'on-demand']) {
    if (!reqs.capacityTypes.has(capacityType)) continue;
    let worst = Number.NEGATIVE_INFINITY;
    for (const o of c.offerings)
      if (o.capacityType === capacityType && reqs.zones.has(o.zone) && o.price > worst) worst = o.price;
    if (worst > Number.NEGATIVE_INFINITY) return worst;
  }
  return Number.POSITIVE_INFINITY;
}

/** The cheapest compatible offering: what EstimatedSavings takes of the cheapest option. */
export function cheapestOffering(c: PricedCandidate, reqs: FilterRequirements): number {
  let min = Number.POSITIVE_INFINITY;
  for (const o of c.offerings)
    if (reqs.capacityTypes.has(o.capacityType) && reqs.zones.has(o.zone) && o.price < min) min = o.price;
  return min;
}

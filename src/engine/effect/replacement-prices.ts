// The prices consolidation's test compares, in one world: a replaced node's own offering
// (resolveNodePrice) and an option's WorstLaunchPrice under the replacement's requirements.
// replacement.ts runs the test in both worlds; replacement-unseen.ts prices the types that are
// not options but could have been.
import type { Allocatable } from '../node.ts';
import type { NodePoolView } from '../nodepool.ts';
import type { OverlayView } from '../overlay.ts';
import type { ProviderKeys } from '../providers.ts';
import type { Labels } from '../requirements.ts';
import { type CandidateType, internedCandidate } from './candidates.ts';
import { CAPACITY_TYPE, INSTANCE_TYPE, ZONE } from '../well-known.ts';
import { listOfferings } from './effect.ts';
import type { PriceBook } from './prices.ts';
import type { ClaimForEffect, CountedOverlay, DisruptionStory, Effect, UnknownReason } from './types.ts';
import { type PricedCandidate, priceWorld, type World, type WorldInput } from './worlds.ts';

/** A node the replacement replaced, as Karpenter saw it when it decided. */
export interface ReplacedNode {
  readonly nodeClaim: string;
  readonly node?: string;
  /** Its labels: instance type, zone and capacity type (its offering), and the instance type's keys. */
  readonly labels: Labels;
  /** Its NodePool as of the decision: an overlay can name NodePools. */
  readonly pool: NodePoolView | undefined;
  /** What Karpenter holds its instance type to hold for pods (its NodeClaim's status.allocatable). */
  readonly allocatable?: Allocatable;
}

export type Worlds = { with: readonly OverlayView[]; without: readonly OverlayView[] };

/** The overlays Karpenter applied, and those left without the selected ones. */
export const worldsOf = (counted: readonly CountedOverlay[]): Worlds => ({
  with: counted.map((c) => c.overlay),
  without: counted.filter((c) => !c.selected).map((c) => c.overlay),
});

/** Where the test stops short of a verdict: an unknown, with what was worked out by then. */
export type Stop = {
  stop: { code: UnknownReason; reason: string };
  context?: Partial<Effect>;
  story?: Partial<DisruptionStory>;
};

export const round = (n: number) => Math.round(n * 1e6) / 1e6;

/** A quantity known to lie between two bounds. */
export interface Interval {
  readonly lo: number;
  readonly hi: number;
}

export const stop = (code: UnknownReason, reason: string, extra: Omit<Stop, 'stop'> = {}): Stop => ({
  stop: { code, reason },
  ...extra,
});

/** What the test reads of the replacement beyond its NodeClaim. */
export interface OptionContext {
  readonly nodeLabelsOf?: ((instanceType: string) => Labels | undefined) | undefined;
  /** The nodes it replaced: their NodeClaims tell what their own types hold. */
  readonly replaced?: readonly ReplacedNode[];
}

/** resolveNodePrice: the replaced node's own offering (its zone and capacity type), overlays applied. */
export function replacedPrice(
  r: ReplacedNode,
  provider: ProviderKeys,
  prices: PriceBook,
  worlds: Worlds,
): Stop | { with: number; without: number; steering: string[] } {
  const name = r.labels[INSTANCE_TYPE];
  const zone = r.labels[ZONE];
  const capacityType = r.labels[CAPACITY_TYPE];
  if (name === undefined || zone === undefined || capacityType === undefined || r.pool === undefined)
    return stop(
      'replaced-set',
      `replaced NodeClaim ${r.nodeClaim}'s instance type, zone, capacity type or NodePool is not known`,
    );
  if (capacityType === 'reserved')
    return stop(
      'reserved',
      `replaced NodeClaim ${r.nodeClaim} ran on reserved capacity, whose price the watcher does not see`,
    );
  const list = capacityType === 'spot' ? prices.spot(name, zone) : prices.onDemand(name);
  if (list === undefined)
    return stop(
      capacityType === 'spot' && !prices.hasSpot ? 'no-spot-prices' : 'no-prices',
      `the price source (${prices.source}) has no ${capacityType} price for ${name} in ${zone}, the offering replaced NodeClaim ${r.nodeClaim} ran on`,
    );
  const type = internedCandidate(name, {}, '', r.labels, provider.instanceTypeKeys);
  const input: WorldInput = {
    candidates: [type],
    offeringsOf: () => [{ capacityType, zone, list }],
    offeringsKey: `replaced|${capacityType}|${zone}|${list}`,
    pool: r.pool,
    provider,
    region: prices.region,
  };
  const priced = { with: priceWorld(input, worlds.with), without: priceWorld(input, worlds.without) };
  if ('unknown' in priced.with) return stop('attributes', priced.with.unknown);
  if ('unknown' in priced.without) return stop('attributes', priced.without.unknown);
  const offering = (w: { priced: PricedCandidate[] }) => w.priced[0]!.offerings[0]!;
  const withOffering = offering(priced.with);
  return {
    with: withOffering.price,
    without: offering(priced.without).price,
    steering: withOffering.overlay && !worlds.without.includes(withOffering.overlay) ? [withOffering.overlay.name] : [],
  };
}

export function worldInputFor(
  candidates: readonly CandidateType[],
  pool: NodePoolView,
  provider: ProviderKeys,
  prices: PriceBook,
  zones: ReadonlySet<string>,
  kind: string,
): WorldInput {
  return {
    candidates,
    offeringsOf: (type) => listOfferings(type.name, prices, zones),
    offeringsKey: `${kind}|${[...zones].join(',')}|${prices.source}|${prices.asOf ?? ''}`,
    pool,
    provider,
    region: prices.region,
  };
}

export function candidatesOf(
  names: readonly string[],
  claim: ClaimForEffect,
  input: OptionContext,
  provider: ProviderKeys,
) {
  const pinnedKey = Object.entries(claim.pinned).join(';');
  return names.map((name) =>
    internedCandidate(name, claim.pinned, pinnedKey, input.nodeLabelsOf?.(name), provider.instanceTypeKeys),
  );
}

export function optionWorlds(
  input: OptionContext,
  claim: ClaimForEffect,
  pool: NodePoolView,
  provider: ProviderKeys,
  prices: PriceBook,
  zones: ReadonlySet<string>,
  worlds: Worlds,
): Stop | { with: PricedCandidate[]; without: PricedCandidate[] } {
  const wi = worldInputFor(
    candidatesOf(claim.candidates, claim, input, provider),
    pool,
    provider,
    prices,
    zones,
    'options',
  );
  const w: World = priceWorld(wi, worlds.with);
  if ('unknown' in w) return stop('attributes', w.unknown);
  const wo: World = priceWorld(wi, worlds.without);
  if ('unknown' in wo) return stop('attributes', wo.unknown);
  return { with: w.priced, without: wo.priced };
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

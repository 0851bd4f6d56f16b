// The prices consolidation's test compares, in one world: a replaced node's own offering
// (resolveNodePrice), an option's WorstLaunchPrice under the replacement's requirements, and the
// catalog's types that are not options but could have been (cut by price). replacement.ts runs
// the test in both worlds.
import type { NodePoolView } from '../nodepool.ts';
import type { OverlayView } from '../overlay.ts';
import type { ProviderKeys } from '../providers.ts';
import type { Labels } from '../requirements.ts';
import { CAPACITY_TYPE, type CandidateType, INSTANCE_TYPE, internedCandidate, ZONE } from './candidates.ts';
import { listOfferings } from './effect.ts';
import type { PriceBook } from './prices.ts';
import type { ClaimForEffect, DisruptionStory, Effect, UnknownReason } from './types.ts';
import { type PricedCandidate, priceWorld, type World, type WorldInput } from './worlds.ts';

/** A node the replacement replaced, as Karpenter saw it when it decided. */
export interface ReplacedNode {
  readonly nodeClaim: string;
  readonly node?: string;
  /** Its labels: instance type, zone and capacity type (its offering), and the instance type's keys. */
  readonly labels: Labels;
  /** Its NodePool as of the decision: an overlay can name NodePools. */
  readonly pool: NodePoolView | undefined;
}

export type Worlds = { with: readonly OverlayView[]; without: readonly OverlayView[] };

/** Where the test stops short of a verdict: an unknown, with what was worked out by then. */
export type Stop = {
  stop: { code: UnknownReason; reason: string };
  context?: Partial<Effect>;
  story?: Partial<DisruptionStory>;
};

export const stop = (code: UnknownReason, reason: string, extra: Omit<Stop, 'stop'> = {}): Stop => ({
  stop: { code, reason },
  ...extra,
});

/** What the test reads of the replacement beyond its NodeClaim. */
export interface OptionContext {
  readonly nodeLabelsOf?: ((instanceType: string) => Labels | undefined) | undefined;
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

function worldInputFor(
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

function candidatesOf(names: readonly string[], claim: ClaimForEffect, input: OptionContext, provider: ProviderKeys) {
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

/**
 * The catalog's types that are not options but could have been: allowed by the replacement's
 * requirements as far as their names tell, not cheaper than the replaced nodes with the overlays
 * (or cut from a spot-to-spot move's 15), cheaper without the selected ones.
 */
export function unseenOptions(
  input: OptionContext,
  claim: ClaimForEffect,
  pool: NodePoolView,
  provider: ProviderKeys,
  prices: PriceBook,
  reqs: FilterRequirements,
  worlds: Worlds,
  total: { with: number; without: number },
  truncated: boolean,
): Stop | string[] {
  const catalog = prices.instanceTypes?.();
  if (catalog === undefined)
    return stop(
      'unseen-options',
      `the price source (${prices.source}) does not list its instance types: the options Karpenter cut by price are not known`,
    );
  const types = unlisted(catalog, claim, input, provider);
  const wi = worldInputFor(types, pool, provider, prices, reqs.zones, 'catalog');
  const all = { with: priceWorld(wi, worlds.with), without: priceWorld(wi, worlds.without) };
  // One type an overlay may or may not price leaves the whole list unknown: then type by type.
  const w0 = 'unknown' in all.with ? undefined : all.with.priced;
  const wo0 = 'unknown' in all.without ? undefined : all.without.priced;
  const priced =
    w0 === undefined || wo0 === undefined
      ? types.map((type) => {
          const one = { ...wi, candidates: [type] };
          const w = priceWorld(one, worlds.with);
          const wo = priceWorld(one, worlds.without);
          return {
            type,
            with: 'unknown' in w ? undefined : w.priced[0],
            without: 'unknown' in wo ? undefined : wo.priced[0],
          };
        })
      : types.map((type, i) => ({ type, with: w0[i], without: wo0[i] }));
  const out: string[] = [];
  for (const p of priced) {
    // A type whose price an overlay may or may not set could be an option either way.
    if (p.with === undefined || p.without === undefined) {
      out.push(p.type.name);
      continue;
    }
    if (!(worstLaunchPrice(p.without, reqs) < total.without)) continue;
    // Cheaper with the overlays too, yet not an option: its pods do not fit it, unless a
    // spot-to-spot move's cut at 15 left it out.
    if (worstLaunchPrice(p.with, reqs) < total.with && !truncated) continue;
    out.push(p.type.name);
  }
  return out;
}

/** The catalog's types that are not the NodeClaim's options, kept per options list: a burst's NodeClaims share one. */
const unlistedOf = new WeakMap<
  readonly string[],
  { catalog: readonly string[]; key: string; types: CandidateType[] }
>();

function unlisted(
  catalog: readonly string[],
  claim: ClaimForEffect,
  input: OptionContext,
  provider: ProviderKeys,
): CandidateType[] {
  const key = `${Object.entries(claim.pinned).join(';')}|${JSON.stringify([...(claim.allowed ?? [])].map(([k, v]) => [k, [...v]]))}`;
  const known = unlistedOf.get(claim.candidates);
  if (known?.catalog === catalog && known.key === key) return known.types;
  const listed = new Set(claim.candidates);
  const types = candidatesOf(
    catalog.filter((name) => !listed.has(name)),
    claim,
    input,
    provider,
  ).filter((type) => allowedByName(type, claim));
  unlistedOf.set(claim.candidates, { catalog, key, types });
  return types;
}

/** Whether a type's labels (its name's, and a node's if one was seen) meet the replacement's requirements; keys not known pass. */
function allowedByName(type: CandidateType, claim: ClaimForEffect): boolean {
  const known = (key: string) => type.known === undefined || type.known.has(key);
  for (const [key, value] of Object.entries(claim.pinned))
    if (known(key) && key in type.labels && type.labels[key] !== value) return false;
  for (const [key, values] of claim.allowed ?? [])
    if (known(key) && key in type.labels && !values.has(type.labels[key]!)) return false;
  return true;
}

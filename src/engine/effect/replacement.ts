// What the selected overlays changed about a launch Karpenter's disruption made. Consolidation
// (Underutilized) launches a replacement only if one of its options undercuts the nodes it
// replaces, both priced with the overlays (pkg/controllers/disruption/consolidation.go,
// computeConsolidation): the replaced nodes' offerings summed (resolveNodePrice), each option's
// WorstLaunchPrice under the replacement's requirements kept only below that sum
// (RemoveInstanceTypeOptionsByPriceAndMinValues), for spot-only moves at least 15 of them for one
// node (computeSpotToSpotConsolidation). That test is replayed without the selected overlays: if
// nothing would have undercut, the node exists only because of them (`replacement`); if something
// would have, the launch replay answers as for any launch. Drift and other reasons have no price
// test: the launch replay answers.
import type { NodePoolView } from '../nodepool.ts';
import type { ProviderKeys } from '../providers.ts';
import type { Labels } from '../requirements.ts';
import {
  awsNameLabels,
  CAPACITY_TYPE,
  type CandidateType,
  INSTANCE_TYPE,
  internedCandidate,
  ZONE,
} from './candidates.ts';
import { launchEffect, listOfferings } from './effect.ts';
import type { PriceBook } from './prices.ts';
import {
  type ClaimForEffect,
  type DisruptionStory,
  type Effect,
  type EffectInput,
  MAX_REPLACED_SHOWN,
  type ReplacedStory,
} from './types.ts';
import { unknown } from './verdict.ts';
import { type PricedCandidate, priceWorld, type World, type WorldInput } from './worlds.ts';
import type { OverlayView } from '../overlay.ts';

/** A node the replacement replaced, as Karpenter saw it when it decided. */
export interface ReplacedNode {
  readonly nodeClaim: string;
  readonly node?: string;
  /** Its labels: instance type, zone and capacity type (its offering), and the instance type's keys. */
  readonly labels: Labels;
  /** Its NodePool as of the decision: an overlay can name NodePools. */
  readonly pool: NodePoolView | undefined;
}

export interface ReplacementInput extends EffectInput {
  /** Karpenter's DisruptionReason for the launch: Underutilized, Drifted, Unhealthy. */
  readonly reason: string;
  readonly replaced: readonly ReplacedNode[];
}

/** MinInstanceTypesForSpotToSpotConsolidation. */
export const SPOT_TO_SPOT_MIN_OPTIONS = 15;
const UNDERUTILIZED = 'Underutilized';

type Worlds = { with: readonly OverlayView[]; without: readonly OverlayView[] };

export function replacementEffect(input: ReplacementInput): Effect {
  const story: DisruptionStory = {
    reason: input.reason,
    replaced: input.replaced.slice(0, MAX_REPLACED_SHOWN).map(describe),
    replacedCount: input.replaced.length,
  };
  const withStory = (e: Effect, more: Partial<DisruptionStory> = {}): Effect => ({
    ...e,
    disruption: { ...story, ...more },
  });
  // Drift and health replace whatever the prices: the replacement was launched as any launch is.
  if (input.reason !== UNDERUTILIZED) return withStory(launchEffect(input));
  const test = priceTest(input);
  if ('stop' in test) return withStory(unknown(test.stop.code, test.stop.reason, test.context ?? {}), test.story);
  if (test.anyway) return withStory(launchEffect(input), test.story);
  return withStory({ verdict: 'replacement', ...test.context }, test.story);
}

function describe(r: ReplacedNode): ReplacedStory {
  return {
    nodeClaim: r.nodeClaim,
    ...(r.node !== undefined ? { node: r.node } : {}),
    ...optional('instanceType', r.labels[INSTANCE_TYPE]),
    ...optional('capacityType', r.labels[CAPACITY_TYPE]),
    ...optional('zone', r.labels[ZONE]),
  };
}

const optional = (key: string, value: string | undefined) => (value === undefined ? {} : { [key]: value });

type Stop = {
  stop: { code: Parameters<typeof unknown>[0]; reason: string };
  context?: Partial<Effect>;
  story?: Partial<DisruptionStory>;
};
type TestResult = Stop | { anyway: boolean; context: Partial<Effect>; story: Partial<DisruptionStory> };

const stop = (code: Stop['stop']['code'], reason: string, extra: Omit<Stop, 'stop'> = {}): Stop => ({
  stop: { code, reason },
  ...extra,
});

function priceTest(input: ReplacementInput): TestResult {
  const { provider, claim, pool, prices } = input;
  if (provider?.name !== 'aws')
    return stop(
      'provider',
      `consolidation's price test is replayed for the AWS provider only (${provider?.name ?? 'unknown'})`,
    );
  if (claim === undefined || pool === undefined)
    return stop('no-nodeclaim', `the replacement's ${claim === undefined ? 'NodeClaim' : 'NodePool'} is not known`);
  if (input.replaced.length === 0) return stop('replaced-set', 'the nodes it replaced are not known');
  if (prices === undefined) return stop('no-prices', 'no price source: the price test cannot be replayed');
  if (claim.capacityTypes.has('reserved'))
    return stop('reserved', 'the replacement allows reserved capacity, whose reservations the watcher does not see');
  if (claim.minValues)
    return stop('min-values', "the replacement's minValues decide whether enough options were left: not replayed");
  const zones = launchZones(claim, input.zones);
  if (zones === undefined) return stop('zones', 'the zones its EC2NodeClass launches into are not known');
  const worlds: Worlds = {
    with: input.counted.map((c) => c.overlay),
    without: input.counted.filter((c) => !c.selected).map((c) => c.overlay),
  };

  // The replaced nodes' prices: their own offering, priced for their own NodePool.
  const replaced: ReplacedStory[] = [];
  const total = { with: 0, without: 0 };
  const steering = new Set<string>();
  for (const r of input.replaced) {
    const priced = replacedPrice(r, provider, prices, worlds);
    if ('stop' in priced) return priced;
    total.with += priced.with;
    total.without += priced.without;
    for (const o of priced.steering) steering.add(o);
    if (replaced.length < MAX_REPLACED_SHOWN)
      replaced.push({ ...describe(r), price: { with: priced.with, without: priced.without } });
  }
  const options = optionWorlds(input, claim, pool, provider, prices, zones, worlds);
  if ('stop' in options) return options;
  for (const c of options.with)
    for (const o of c.overlays) if (worlds.without.includes(o) === false) steering.add(o.name);
  const context: Partial<Effect> = {
    overlays: [...steering].sort(),
    prices: { source: prices.source, ...(prices.asOf !== undefined ? { asOf: prices.asOf } : {}) },
  };
  const story: Partial<DisruptionStory> = { replaced, price: total };
  const spotOnly = input.replaced.every((r) => r.labels[CAPACITY_TYPE] === 'spot') && claim.capacityTypes.has('spot');
  // Karpenter filters by price before it narrows a replacement of on-demand nodes to spot: a
  // NodeClaim that now reads [spot] may have allowed on-demand then, which counts for a type
  // with no spot offering (WorstLaunchPrice looks at spot first).
  const narrowed = !spotOnly && claim.capacityTypes.size === 1 && claim.capacityTypes.has('spot');
  const reqs: FilterRequirements = {
    capacityTypes: narrowed ? new Set(['spot', 'on-demand']) : claim.capacityTypes,
    zones,
  };

  // With the overlays every option Karpenter kept undercut the replaced nodes: if not, its prices
  // or the nodes it replaced were other than the watcher's.
  const kept = options.with.filter((c) => worstLaunchPrice(c, reqs) < total.with);
  if (kept.length < options.with.length) {
    const odd = options.with.find((c) => !kept.includes(c))!;
    return stop(
      'replaced-prices',
      `at the prices known ${odd.type.name} does not undercut the replaced nodes ($${round(total.with)}/h), yet Karpenter kept it: its prices, or the nodes it replaced, were other than these`,
      { context, story },
    );
  }
  const cheapest = Math.min(...kept.map((c) => cheapestOffering(c, { capacityTypes: claim.capacityTypes, zones })));
  const cheaperWithout = options.without.filter((c) => worstLaunchPrice(c, reqs) < total.without).length;
  const full: Partial<DisruptionStory> = {
    ...story,
    ...(Number.isFinite(cheapest) ? { savings: round(total.with - cheapest) } : {}),
    cheaperWithout,
  };
  const needed = spotOnly && input.replaced.length === 1 ? SPOT_TO_SPOT_MIN_OPTIONS : 1;
  if (cheaperWithout >= needed) return { anyway: true, context, story: full };

  // Types not among the options may be options Karpenter cut by price: without the selected
  // overlays one of them might have undercut the replaced nodes (for a spot-to-spot move, any
  // beyond the 15 it kept).
  const unseen = unseenOptions(input, claim, pool, provider, prices, reqs, worlds, total, needed > 1);
  if ('stop' in unseen) return { ...unseen, context, story: full };
  if (cheaperWithout + unseen.length >= needed) {
    return stop(
      'unseen-options',
      `without the selected overlays ${unseen.slice(0, 3).join(', ')}${unseen.length > 3 ? ` and ${unseen.length - 3} more` : ''} would undercut the replaced nodes, and whether their pods fit it is not known`,
      { context, story: full },
    );
  }
  const launched = options.with.find((c) => c.type.name === input.launched.instanceType);
  const offer = launched?.offerings.find(
    (o) => o.capacityType === input.launched.capacityType && reqs.zones.has(o.zone),
  );
  if (!offer)
    return stop(
      'fallback',
      `${input.launched.capacityType} ${input.launched.instanceType} was launched, which is not among the replacement's options at the prices known`,
      { context, story: full },
    );
  return {
    anyway: false,
    context: { ...context, launched: { listPrice: offer.list, price: offer.price } },
    story: full,
  };
}

const round = (n: number) => Math.round(n * 1e6) / 1e6;

function launchZones(claim: ClaimForEffect, nodeClassZones: ReadonlySet<string> | undefined) {
  if (claim.zones !== undefined && nodeClassZones !== undefined)
    return new Set([...nodeClassZones].filter((z) => claim.zones!.has(z)));
  return claim.zones ?? nodeClassZones;
}

/** resolveNodePrice: the replaced node's own offering (its zone and capacity type), overlays applied. */
function replacedPrice(
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

function candidatesOf(
  names: readonly string[],
  claim: ClaimForEffect,
  input: ReplacementInput,
  provider: ProviderKeys,
) {
  const pinnedKey = Object.entries(claim.pinned).join(';');
  return names.map((name) =>
    internedCandidate(name, claim.pinned, pinnedKey, input.nodeLabelsOf?.(name), provider.instanceTypeKeys),
  );
}

function optionWorlds(
  input: ReplacementInput,
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
interface FilterRequirements {
  readonly capacityTypes: ReadonlySet<string>;
  readonly zones: ReadonlySet<string>;
}

/** Offerings.WorstLaunchPrice: the dearest compatible offering of the first capacity type that has one (spot before on-demand). */
function worstLaunchPrice(c: PricedCandidate, reqs: FilterRequirements): number {
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
function cheapestOffering(c: PricedCandidate, reqs: FilterRequirements): number {
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
function unseenOptions(
  input: ReplacementInput,
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
  const listed = new Set(claim.candidates);
  const names = catalog.filter((name) => !listed.has(name) && allowedByName(name, claim));
  const wi = worldInputFor([], pool, provider, prices, reqs.zones, 'catalog');
  const out: string[] = [];
  for (const type of candidatesOf(names, claim, input, provider)) {
    const one = { ...wi, candidates: [type] };
    const w = priceWorld(one, worlds.with);
    const wo = priceWorld(one, worlds.without);
    // A type whose price an overlay may or may not set could be an option either way.
    if ('unknown' in w || 'unknown' in wo) {
      out.push(type.name);
      continue;
    }
    if (!(worstLaunchPrice(wo.priced[0]!, reqs) < total.without)) continue;
    // Cheaper with the overlays too, yet not an option: its pods do not fit it, unless a
    // spot-to-spot move's cut at 15 left it out.
    if (worstLaunchPrice(w.priced[0]!, reqs) < total.with && !truncated) continue;
    out.push(type.name);
  }
  return out;
}

/** Whether a type's name labels meet the replacement's requirements (keys its name does not tell pass). */
function allowedByName(name: string, claim: ClaimForEffect): boolean {
  const labels = awsNameLabels(name);
  for (const [key, value] of Object.entries(claim.pinned)) if (key in labels && labels[key] !== value) return false;
  for (const [key, values] of claim.allowed ?? []) if (key in labels && !values.has(labels[key]!)) return false;
  return true;
}

// Consolidation in both worlds (consolidation.go, computeConsolidation; single-node and multi-node
// alike). Karpenter launches a replacement only if one of its options undercuts the candidates,
// both priced with the overlays: the candidates' offerings summed (resolveNodePrice), each option's
// WorstLaunchPrice under the replacement's requirements kept only below that sum, minValues of
// what is left (price-filter.ts), for a spot node moved alone to spot at least 15 options
// (computeSpotToSpotConsolidation), for several nodes filterOutSameInstanceType (multi-node.ts).
// That test is replayed without the selected overlays (standing.ts): if the command would not
// stand, the node exists only because of them (`replacement`); if it would, Balanced scoring may
// still reject it there (balanced.ts), and else the launch replay answers, over the options
// consolidation would have kept there (anyway.ts).
import { Abstain, abstain } from '../effect/abstain.ts';
import { launchZones } from '../effect/effect.ts';
import { worldsOf } from '../effect/moment.ts';
import {
  type DisruptionStory,
  type Effect,
  type EffectInput,
  MAX_REPLACED_SHOWN,
  type ReplacedStory,
} from '../effect/types.ts';
import type { CandidateType } from '../effect/candidates.ts';
import type { PricedCandidate } from '../effect/worlds.ts';
import { Memo } from '../memo.ts';
import type { Allocatable } from '../node.ts';
import type { NodePoolView } from '../nodepool.ts';
import { CAPACITY_TYPE, INSTANCE_TYPE } from '../well-known.ts';
import { anywayEffect, optionsWithout, type WithoutOptions } from './anyway.ts';
import { balancedTest, type CommandTerms, isBalanced } from './balanced.ts';
import { type CutSetting, candidateCutTypes, catalogCutTypes } from './cut-options.ts';
import { roomOf } from './limits.ts';
import { type CommandRules, minValuesRule } from './price-filter.ts';
import {
  candidatePrice,
  cheapestOffering,
  type FilterRequirements,
  optionsWorld,
  pricedBoth,
  worstLaunchPrice,
} from './prices.ts';
import { type Standing, standsWithout, type WithoutInput } from './standing.ts';
import { describe } from './story.ts';
import { type Candidate, type Command, type Judged, round } from './types.ts';

/** MinInstanceTypesForSpotToSpotConsolidation. */
const SPOT_TO_SPOT_MIN_OPTIONS = 15;

export function consolidationEffect(command: Command, replacement: EffectInput): Judged {
  const test = priceTestOf(command, replacement);
  const { context, story, outcome } = test;
  if (outcome instanceof Abstain) return { effect: outcome.effect(context), ...(story ? { story } : {}) };
  // The price test ran, so the provider and prices are known.
  const pricing = {
    provider: replacement.provider!,
    prices: replacement.prices!,
    instanceLabels: replacement.instanceLabels,
  };
  const without = (outcome.terms && balancedTest(outcome.terms, command.balanced, pricing)) ?? outcome.without;
  if (without instanceof Abstain) return { effect: without.effect(context), ...(story ? { story } : {}) };
  const told = { ...story, replacedWithout: without.stands };
  // Made anyway: launched from the options consolidation would have kept without the overlays.
  if (without.stands) return { effect: anywayEffect(replacement, outcome.anyway!, context), story: told };
  const { instanceType, capacityType } = replacement.launched;
  const offer = outcome.options
    .find((c) => c.type.name === instanceType)
    ?.offerings.find((o) => o.capacityType === capacityType && outcome.zones.has(o.zone));
  if (!offer)
    return {
      effect: abstain(
        'fallback',
        `${capacityType} ${instanceType} was launched, which is not among the replacement's options at the prices known`,
      ).effect(context),
      story: told,
    };
  return {
    effect: {
      verdict: 'replacement',
      reason: `without the selected overlays ${without.why}`,
      ...context,
      launched: { listPrice: offer.list, price: offer.price },
    },
    story: told,
  };
}

/** The price test of a command in both worlds, as far as it got. */
interface PriceTest {
  readonly context: Partial<Effect>;
  readonly story?: Partial<DisruptionStory>;
  readonly outcome: Tested | Abstain;
}

interface Tested {
  /** Whether the command stands without the selected overlays by price, and if not why. */
  readonly without: Standing;
  /** Where it stands and a candidate's NodePool is Balanced: what Balanced scoring reads of it. */
  readonly terms?: CommandTerms;
  /** Where it stands by price: its options without the selected overlays, which the launch replay reads. */
  readonly anyway?: WithoutOptions | Abstain;
  /** The options as priced with the overlays, and the zones: where the launched offering is looked up. */
  readonly options: readonly PricedCandidate[];
  readonly zones: ReadonlySet<string>;
}

/** What the price test reads: every field is in its memo's key. */
type TestInput = Omit<EffectInput, 'launched' | 'nodeClaimFound' | 'withoutCandidates'> & {
  readonly candidates: readonly Candidate[];
  readonly used: Allocatable | undefined;
};

/**
 * Tests are kept per options list and what else they read: the replacements of one command (drift
 * can launch several) and the decisions of one node (webhook, reconciler) share them.
 */
const PRICE_TESTS = new Memo<readonly string[], TestInput, PriceTest>((_, input) => priceTest(input), 16);

function priceTestOf(command: Command, r: EffectInput): PriceTest {
  const input: TestInput = {
    provider: r.provider,
    claim: r.claim,
    pool: r.pool,
    counted: r.counted,
    conflicted: r.conflicted,
    prices: r.prices,
    zones: r.zones,
    instanceLabels: r.instanceLabels,
    sizing: r.sizing,
    candidates: command.candidates,
    used: command.used,
  };
  return r.claim === undefined ? priceTest(input) : PRICE_TESTS.of(r.claim.candidates, input);
}

const stopped = (outcome: Abstain, context: Partial<Effect> = {}, story?: Partial<DisruptionStory>): PriceTest => ({
  context,
  ...(story ? { story } : {}),
  outcome,
});

/** What the test needs known before it prices anything, or why it cannot be replayed. */
function setting(input: TestInput) {
  const { provider, claim, pool, prices } = input;
  if (provider?.name !== 'aws')
    return abstain(
      'provider',
      `consolidation's price test is replayed for the AWS provider only (${provider?.name ?? 'unknown'})`,
    );
  if (claim === undefined || pool === undefined)
    return abstain('no-nodeclaim', `the replacement's ${claim === undefined ? 'NodeClaim' : 'NodePool'} is not known`);
  if (input.candidates.length === 0) return abstain('replaced-set', 'the nodes it replaced are not known');
  if (prices === undefined) return abstain('no-prices', 'no price source: the price test cannot be replayed');
  if (claim.capacityTypes.has('reserved'))
    return abstain('reserved', 'the replacement allows reserved capacity, whose reservations the watcher does not see');
  const conflicted = input.conflicted[0];
  if (conflicted)
    return abstain(
      'conflict',
      `Karpenter refused an overlay of ${conflicted.name}'s weight as a Conflict: without the selected overlays it would judge ${conflicted.name} again, maybe differently`,
    );
  const zones = launchZones(claim, input.zones);
  if (zones === undefined) return abstain('zones', 'the zones its EC2NodeClass launches into are not known');
  return {
    provider,
    claim,
    pool,
    prices,
    zones,
    instanceLabels: input.instanceLabels,
    sizing: input.sizing,
    // A type's zones are the NodeClass's subnets' among those it is offered in: known where both are.
    ...(input.zones !== undefined && prices.offeredZones
      ? { zonesOf: zonesOfType(prices.offeredZones.bind(prices), zones) }
      : {}),
  };
}

/** The candidates priced in both worlds (sumCandidatePrices), by NodePool and by type. */
interface CandidatesPriced {
  readonly total: { with: number; without: number };
  /** filterOutSameInstanceType's: each candidate type's cheapest candidate. */
  readonly own: { with: Map<string, number>; without: Map<string, number> };
  readonly byPool: Map<string, { with: number; without: number; view: NodePoolView | undefined }>;
  /** The selected overlays that priced a candidate with them. */
  readonly steering: Set<string>;
  readonly replaced: ReplacedStory[];
}

function priceCandidates(candidates: readonly Candidate[], s: CutSetting): CandidatesPriced | Abstain {
  const priced: CandidatesPriced = {
    total: { with: 0, without: 0 },
    own: { with: new Map(), without: new Map() },
    byPool: new Map(),
    steering: new Set(),
    replaced: [],
  };
  const { total, own, byPool } = priced;
  for (const c of candidates) {
    const price = candidatePrice(c, s.provider, s.prices, s.worlds);
    if (price instanceof Abstain) return price;
    total.with += price.with;
    total.without += price.without;
    const inPool = byPool.get(c.pool!.name) ?? { with: 0, without: 0, view: c.pool };
    byPool.set(c.pool!.name, { ...inPool, with: inPool.with + price.with, without: inPool.without + price.without });
    const name = c.labels[INSTANCE_TYPE]!;
    own.with.set(name, Math.min(price.with, own.with.get(name) ?? price.with));
    own.without.set(name, Math.min(price.without, own.without.get(name) ?? price.without));
    for (const o of price.steering) priced.steering.add(o);
    if (priced.replaced.length < MAX_REPLACED_SHOWN)
      priced.replaced.push({ ...describe(c), price: { with: price.with, without: price.without } });
  }
  return priced;
}

function priceTest(input: TestInput): PriceTest {
  const known = setting(input);
  if (known instanceof Abstain) return stopped(known);
  const { claim, prices, zones } = known;
  const room = roomOf({ pool: known.pool, used: input.used, prices, sizing: known.sizing });
  const s: CutSetting = {
    ...known,
    worlds: worldsOf(input.counted),
    reqs: { capacityTypes: claim.capacityTypes, zones },
    candidates: input.candidates,
    ...(room ? { room } : {}),
  };
  const candidates = priceCandidates(input.candidates, s);
  if (candidates instanceof Abstain) return stopped(candidates);
  const options = pricedBoth(optionsWorld(claim.candidates, s), s.worlds);
  if (options instanceof Abstain) return stopped(options);
  const { steering, total } = candidates;
  for (const c of options.with) for (const o of c.overlays) if (s.worlds.selected.has(o)) steering.add(o.name);
  const context: Partial<Effect> = {
    overlays: [...steering].sort(),
    prices: { source: prices.source, ...(prices.asOf !== undefined ? { asOf: prices.asOf } : {}) },
  };
  const story: Partial<DisruptionStory> = { replaced: candidates.replaced, price: total };
  const spotOnly = input.candidates.every((c) => c.labels[CAPACITY_TYPE] === 'spot') && claim.capacityTypes.has('spot');
  // Karpenter filters by price before it narrows a replacement of on-demand nodes to spot: a
  // NodeClaim that now reads [spot] may have allowed on-demand then, which counts for a type
  // with no spot offering (WorstLaunchPrice looks at spot first).
  const narrowed = !spotOnly && claim.capacityTypes.size === 1 && claim.capacityTypes.has('spot');
  const reqs: FilterRequirements = narrowed ? { capacityTypes: new Set(['spot', 'on-demand']), zones } : s.reqs;
  // With the overlays every option Karpenter kept undercut the candidates: if not, its prices or
  // the nodes it replaced were other than the watcher's.
  const odd = options.with.find((c) => !(worstLaunchPrice(c, reqs) < total.with));
  if (odd)
    return stopped(
      abstain(
        'replaced-prices',
        `at the prices known ${odd.type.name} does not undercut the replaced nodes ($${round(total.with)}/h), yet Karpenter kept it: its prices, or the nodes it replaced, were other than these`,
      ),
      context,
      story,
    );
  const cheapest = Math.min(...options.with.map((c) => cheapestOffering(c, s.reqs)));
  const full: Partial<DisruptionStory> = {
    ...story,
    ...(Number.isFinite(cheapest) ? { savings: round(total.with - cheapest) } : {}),
    cheaperWithout: options.without.filter((c) => worstLaunchPrice(c, reqs) < total.without).length,
  };
  const withoutInput = inputWithout({ ...s, reqs }, s.reqs, candidates, options, spotOnly);
  if (withoutInput instanceof Abstain) return stopped(withoutInput, context, full);
  const without = standsWithout(withoutInput);
  if (without instanceof Abstain) return stopped(without, context, full);
  const terms: CommandTerms | undefined =
    without.stands && without.cheapest
      ? { byPool: candidates.byPool, total, savingsWith: total.with - cheapest, cheapestWithout: without.cheapest }
      : undefined;
  const anyway = without.stands ? { anyway: optionsWithout(withoutInput) } : {};
  return {
    context,
    story: full,
    outcome: { without, ...(terms ? { terms } : {}), ...anyway, options: options.with, zones },
  };
}

/**
 * What the test without the selected overlays reads: the rules of each world, the candidates'
 * types that are not options (several nodes: filterOutSameInstanceType may have read them) and
 * the catalog's, found only if asked for.
 */
function inputWithout(
  s: CutSetting,
  claimReqs: FilterRequirements,
  candidates: CandidatesPriced,
  options: { with: readonly PricedCandidate[]; without: readonly PricedCandidate[] },
  spotOnly: boolean,
): WithoutInput | Abstain {
  const { total, own } = candidates;
  const multi = s.candidates.length > 1;
  const needed = spotOnly && !multi ? SPOT_TO_SPOT_MIN_OPTIONS : 1;
  const minValues = minValuesRule(s.claim, s.provider, s.reqs.capacityTypes, s.zonesOf);
  const rules = (w: 'with' | 'without'): CommandRules => ({
    total: total[w],
    reqs: s.reqs,
    needed,
    ...(multi ? { sameType: { own: own[w], reqs: claimReqs } } : {}),
    ...(minValues ? { minValues } : {}),
  });
  // Several nodes: a candidate's type not among the options may have been one that
  // filterOutSameInstanceType read; for one node its type is as any other.
  const ownTypes = new Set(multi ? own.with.keys() : []);
  const cutTypes = multi ? candidateCutTypes(ownTypes, s, total) : [];
  if (cutTypes instanceof Abstain) return cutTypes;
  let catalog: ReturnType<typeof catalogCutTypes> | undefined;
  return {
    listed: options,
    rules: { with: rules('with'), without: rules('without') },
    candidateCutTypes: cutTypes,
    catalogCutTypes: () => (catalog ??= catalogCutTypes(s, total.without, ownTypes)),
    truncated: needed > 1,
    // Balanced scoring reads the savings without the overlays, which the cheapest option sets.
    ...([...candidates.byPool.values()].some((p) => isBalanced(p.view))
      ? { cheapest: (c: PricedCandidate) => cheapestOffering(c, claimReqs) }
      : {}),
  };
}

/** computeRequirements' zones: those the type is offered in with a subnet of the NodeClass, of those the replacement allows. */
const zonesOfType =
  (offeredZones: (instanceType: string) => ReadonlySet<string> | undefined, allowed: ReadonlySet<string>) =>
  (type: CandidateType): readonly string[] | undefined => {
    const offered = offeredZones(type.name);
    return offered === undefined ? undefined : [...offered].filter((z) => allowed.has(z));
  };

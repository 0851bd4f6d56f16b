// What the selected overlays changed about a launch Karpenter's disruption made. Consolidation
// (Underutilized) launches a replacement only if one of its options undercuts the nodes it
// replaces, both priced with the overlays (pkg/controllers/disruption/consolidation.go,
// computeConsolidation): the replaced nodes' offerings summed (resolveNodePrice), each option's
// WorstLaunchPrice under the replacement's requirements kept only below that sum
// (RemoveInstanceTypeOptionsByPriceAndMinValues, which then requires minValues of what is left),
// for spot-only moves at least 15 of them for one node (computeSpotToSpotConsolidation); several
// nodes then go through filterOutSameInstanceType (replacement-filters.ts). That test is replayed
// without the selected overlays: if the command would not stand, the node exists only because of
// them (`replacement`); if it would, Balanced scoring may still reject it there (balanced.ts), and
// else the launch replay answers, without the overlays over the options consolidation would have
// kept there (replacement-without.ts). Drift and other reasons have no price test: the launch
// replay answers.
import { type BalancedEvidence, balancedTest, type CommandTerms, isBalanced } from './balanced.ts';
import { CAPACITY_TYPE, INSTANCE_TYPE, NODEPOOL_LABEL, ZONE } from '../well-known.ts';
import { launchEffect, replayKey } from './effect.ts';
import {
  type CommandRules,
  minValuesRule,
  type Standing,
  standsWithout,
  type WithoutInput,
} from './replacement-filters.ts';
import {
  cheapestOffering,
  type FilterRequirements,
  optionWorlds,
  type ReplacedNode,
  replacedPrice,
  round,
  type Stop,
  stop,
  worldsOf,
  worstLaunchPrice,
} from './replacement-prices.ts';
import { replacedTypes, unseenOptions } from './replacement-unseen.ts';
import { anywayEffect, optionsWithout, type WithoutOptions } from './replacement-without.ts';
import {
  type ChurnStory,
  type ClaimForEffect,
  type DisruptionStory,
  type Effect,
  type EffectInput,
  MAX_REPLACED_SHOWN,
  type ReplacedStory,
} from './types.ts';
import { unknown } from './verdict.ts';

import { idOf } from './identity.ts';
import type { PricedCandidate } from './worlds.ts';

export type { ReplacedNode } from './replacement-prices.ts';

export interface ReplacementInput extends EffectInput {
  /** Karpenter's DisruptionReason for the launch: Underutilized, Drifted, Unhealthy. */
  readonly reason: string;
  readonly replaced: readonly ReplacedNode[];
  /** The recorded replaced nodes whose overlay had changed or gone (engine/disruption.ts churnOf). */
  readonly churn?: readonly ChurnStory[];
  /** What Balanced consolidation's scoring read, as far as the watcher saw it. */
  readonly balanced?: BalancedEvidence;
}

/** MinInstanceTypesForSpotToSpotConsolidation. */
export const SPOT_TO_SPOT_MIN_OPTIONS = 15;
const UNDERUTILIZED = 'Underutilized';

export function replacementEffect(input: ReplacementInput): Effect {
  const story: DisruptionStory = {
    reason: input.reason,
    replaced: input.replaced.slice(0, MAX_REPLACED_SHOWN).map(describe),
    replacedCount: input.replaced.length,
    ...(input.churn !== undefined && input.churn.length > 0 ? { churn: input.churn } : {}),
  };
  const withStory = (e: Effect, more: Partial<DisruptionStory> = {}): Effect => ({
    ...e,
    disruption: { ...story, ...more },
  });
  // Drift and health replace whatever the prices: the replacement was launched as any launch is.
  if (input.reason !== UNDERUTILIZED) return withStory(launchEffect(input));
  const test = memoizedTest(input);
  if ('stop' in test) return withStory(unknown(test.stop.code, test.stop.reason, test.context ?? {}), test.story);
  // The price test ran, so the provider and prices are known.
  const pricing = { provider: input.provider!, prices: input.prices!, nodeLabelsOf: input.nodeLabelsOf };
  const without = (test.terms && balancedTest(test.terms, input.balanced, pricing)) ?? test.without;
  if ('stop' in without) return withStory(unknown(without.stop.code, without.stop.reason, test.context), test.story);
  const told = { ...test.story, replacedWithout: without.stands };
  // Made anyway: launched from the options consolidation would have kept without the overlays.
  if (without.stands) return withStory(anywayEffect(input, test.anyway!, test.context), told);
  const { instanceType, capacityType } = input.launched;
  const offer = test.options
    .find((c) => c.type.name === instanceType)
    ?.offerings.find((o) => o.capacityType === capacityType && test.zones.has(o.zone));
  if (!offer)
    return withStory(
      unknown(
        'fallback',
        `${capacityType} ${instanceType} was launched, which is not among the replacement's options at the prices known`,
        test.context,
      ),
      told,
    );
  return withStory(
    {
      verdict: 'replacement',
      reason: `without the selected overlays ${without.why}`,
      ...test.context,
      launched: { listPrice: offer.list, price: offer.price },
    },
    told,
  );
}

/**
 * Tests are kept per options list and what else they read: the replacements of one command (drift
 * can launch several) and the decisions of one node (webhook, reconciler) share them.
 */
const tests = new WeakMap<readonly string[], Map<string, TestResult>>();
const MAX_TESTS_PER_LIST = 16;

function memoizedTest(input: ReplacementInput): TestResult {
  const { claim, pool, prices } = input;
  if (claim === undefined || pool === undefined || prices === undefined) return priceTest(input);
  // What the launch replay's memo reads, and the replaced nodes and the options' other requirements.
  const key = [
    replayKey(input, claim, pool),
    claim.allowed ? idOf(claim.allowed) : '-',
    claim.minValuesByKey ? idOf(claim.minValuesByKey) : '-',
    `${claim.requests?.cpu}/${claim.requests?.memory}/${claim.requests?.other}`,
    claim.requirements ? idOf(claim.requirements) : '-',
    input.replaced.map((r) => `${r.nodeClaim}/${idOf(r.labels)}/${r.pool ? idOf(r.pool) : '-'}`).join(','),
  ].join('|');
  let byList = tests.get(claim.candidates);
  if (!byList) {
    byList = new Map();
    tests.set(claim.candidates, byList);
  }
  const kept = byList.get(key);
  if (kept) return kept;
  const tested = priceTest(input);
  if (byList.size >= MAX_TESTS_PER_LIST) byList.clear();
  byList.set(key, tested);
  return tested;
}

function describe(r: ReplacedNode): ReplacedStory {
  return {
    nodeClaim: r.nodeClaim,
    ...(r.node !== undefined ? { node: r.node } : {}),
    ...optional('instanceType', r.labels[INSTANCE_TYPE]),
    ...optional('capacityType', r.labels[CAPACITY_TYPE]),
    ...optional('zone', r.labels[ZONE]),
    ...optional('nodePool', r.labels[NODEPOOL_LABEL]),
  };
}

const optional = (key: string, value: string | undefined) => (value === undefined ? {} : { [key]: value });

type TestResult =
  | Stop
  | {
      /** Whether the command stands without the selected overlays by price, and if not why. */
      without: Standing;
      /** Where it stands and a replaced node's NodePool is Balanced: what Balanced scoring reads of it. */
      terms?: CommandTerms;
      /** Where it stands by price: its options without the selected overlays, which the launch replay reads. */
      anyway?: Stop | WithoutOptions;
      context: Partial<Effect>;
      story: Partial<DisruptionStory>;
      /** The options as priced with the overlays, and the zones: where the launched offering is looked up. */
      options: readonly PricedCandidate[];
      zones: ReadonlySet<string>;
    };

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
  const conflicted = input.conflicted[0];
  if (conflicted)
    return stop(
      'conflict',
      `Karpenter refused an overlay of ${conflicted.name}'s weight as a Conflict: without the selected overlays it would judge ${conflicted.name} again, maybe differently`,
    );
  const zones = launchZones(claim, input.zones);
  if (zones === undefined) return stop('zones', 'the zones its EC2NodeClass launches into are not known');
  const worlds = worldsOf(input.counted);

  // The replaced nodes' prices: their own offering, priced for their own NodePool.
  const replaced: ReplacedStory[] = [];
  const total = { with: 0, without: 0 };
  // filterOutSameInstanceType's: each replaced type's cheapest replaced node.
  const own = { with: new Map<string, number>(), without: new Map<string, number>() };
  const steering = new Set<string>();
  const byPool = new Map<string, { with: number; without: number; view: typeof pool | undefined }>();
  for (const r of input.replaced) {
    const priced = replacedPrice(r, provider, prices, worlds);
    if ('stop' in priced) return priced;
    total.with += priced.with;
    total.without += priced.without;
    const inPool = byPool.get(r.pool!.name) ?? { with: 0, without: 0, view: r.pool };
    byPool.set(r.pool!.name, { ...inPool, with: inPool.with + priced.with, without: inPool.without + priced.without });
    const name = r.labels[INSTANCE_TYPE]!;
    own.with.set(name, Math.min(priced.with, own.with.get(name) ?? priced.with));
    own.without.set(name, Math.min(priced.without, own.without.get(name) ?? priced.without));
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
  const claimReqs: FilterRequirements = { capacityTypes: claim.capacityTypes, zones };
  const reqs: FilterRequirements = narrowed ? { capacityTypes: new Set(['spot', 'on-demand']), zones } : claimReqs;

  // With the overlays every option Karpenter kept undercut the replaced nodes: if not, its prices
  // or the nodes it replaced were other than the watcher's.
  const odd = options.with.find((c) => !(worstLaunchPrice(c, reqs) < total.with));
  if (odd)
    return stop(
      'replaced-prices',
      `at the prices known ${odd.type.name} does not undercut the replaced nodes ($${round(total.with)}/h), yet Karpenter kept it: its prices, or the nodes it replaced, were other than these`,
      { context, story },
    );
  const cheapest = Math.min(...options.with.map((c) => cheapestOffering(c, claimReqs)));
  const full: Partial<DisruptionStory> = {
    ...story,
    ...(Number.isFinite(cheapest) ? { savings: round(total.with - cheapest) } : {}),
    cheaperWithout: options.without.filter((c) => worstLaunchPrice(c, reqs) < total.without).length,
  };
  const needed = spotOnly && input.replaced.length === 1 ? SPOT_TO_SPOT_MIN_OPTIONS : 1;
  const multi = input.replaced.length > 1;
  const minValues = minValuesRule(claim, provider);
  const rules = (w: 'with' | 'without'): CommandRules => ({
    total: total[w],
    reqs,
    needed,
    ...(multi ? { sameType: { own: own[w], reqs: claimReqs } } : {}),
    ...(minValues ? { minValues } : {}),
  });
  // Several nodes: a replaced type not among the options may have been one that
  // filterOutSameInstanceType read; for one node its type is as any other.
  const ownTypes = new Set(multi ? own.with.keys() : []);
  const sameTypes = multi ? replacedTypes(ownTypes, input, claim, pool, provider, prices, reqs, worlds, total) : [];
  if ('stop' in sameTypes) return { ...sameTypes, context, story: full };
  let unseen: ReturnType<typeof unseenOptions> | undefined;
  const withoutInput: WithoutInput = {
    listed: options,
    rules: { with: rules('with'), without: rules('without') },
    replacedTypes: sameTypes,
    unseen: () =>
      (unseen ??= unseenOptions(input, claim, pool, provider, prices, reqs, worlds, total.without, ownTypes)),
    truncated: needed > 1,
    // Balanced scoring reads the savings without the overlays, which the cheapest option sets.
    ...([...byPool.values()].some((p) => isBalanced(p.view))
      ? { cheapest: (c) => cheapestOffering(c, claimReqs) }
      : {}),
  };
  const without = standsWithout(withoutInput);
  if ('stop' in without) return { ...without, context, story: full };
  const terms: CommandTerms | undefined =
    without.stands && without.cheapest
      ? { byPool, total, savingsWith: total.with - cheapest, cheapestWithout: without.cheapest }
      : undefined;
  const anyway = without.stands ? { anyway: optionsWithout(withoutInput) } : {};
  return { without, ...(terms ? { terms } : {}), ...anyway, context, story: full, options: options.with, zones };
}

function launchZones(claim: ClaimForEffect, nodeClassZones: ReadonlySet<string> | undefined) {
  if (claim.zones !== undefined && nodeClassZones !== undefined)
    return new Set([...nodeClassZones].filter((z) => claim.zones!.has(z)));
  return claim.zones ?? nodeClassZones;
}

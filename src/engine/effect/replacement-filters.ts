// Whether consolidation's command stands in one world, past the price filter's cut: what is left
// must meet the replacement's minValues (RemoveInstanceTypeOptionsByPriceAndMinValues, then
// SatisfiesMinValues: the distinct values of each such key among the options), and a command of
// several nodes goes through MultiNodeConsolidation's filterOutSameInstanceType, which keeps only
// options below the cheapest replaced node whose type is itself an option (that node's own
// offering, overlays applied), minValues again; nothing left, no command. The options Karpenter
// cut, whose pods' fit the watcher does not see, and label values a type's name does not tell,
// are hypotheses: the answer is given only where every one consistent with what Karpenter kept
// gives it (replacement.ts runs the test, replacement-prices.ts prices it). Where Balanced scoring
// reads the savings without the overlays, a command that stands says how cheap its cheapest option
// can be, over the same hypotheses (balanced.ts).
import type { ProviderKeys } from '../providers.ts';
import type { CandidateType } from './candidates.ts';
import {
  type FilterRequirements,
  type Interval,
  round,
  type Stop,
  stop,
  worstLaunchPrice,
} from './replacement-prices.ts';
import type { BothWorlds, PricedBoth } from './replacement-unseen.ts';
import type { ClaimForEffect } from './types.ts';
import type { PricedCandidate } from './worlds.ts';

/** An option as one world prices it; `priced` undefined: an overlay may or may not price it. */
export interface WorldOption {
  readonly type: CandidateType;
  readonly priced: PricedCandidate | undefined;
}

export interface MinValuesRule {
  readonly byKey: ReadonlyMap<string, number>;
  /** A type's values of the key as its requirements hold them; undefined: not known. */
  readonly valuesOf: (type: CandidateType, key: string) => readonly string[] | undefined;
}

/** What decides a command in one world. */
export interface CommandRules {
  /** sumCandidatePrices. */
  readonly total: number;
  /** The price filter's requirements (computeConsolidation filters before it narrows to spot). */
  readonly reqs: FilterRequirements;
  /** Options that must be left: 15 for a spot node moved to spot alone. */
  readonly needed: number;
  /** Several nodes: each replaced type's cheapest replaced node's own price, and the replacement's requirements as narrowed. */
  readonly sameType?: { readonly own: ReadonlyMap<string, number>; readonly reqs: FilterRequirements };
  readonly minValues?: MinValuesRule;
}

/** What is not known counts for the command (true) or against it. */
export interface Leaning {
  readonly prices: boolean;
  readonly values: boolean;
}

/** What is not known counts against the command. */
export const SURE: Leaning = { prices: false, values: false };

/** `cheapest`: the cheapest option's cheapest offering as far as the options are known, where asked for (Balanced scoring reads the savings). */
export type Standing = { stands: true; cheapest?: Interval } | { stands: false; why: string };

/** In one world: what is left of the options, or why the command falls. */
type Kept = { stands: true; left: readonly WorldOption[] } | { stands: false; why: string };

export function minValuesRule(claim: ClaimForEffect, provider: ProviderKeys): MinValuesRule | undefined {
  const byKey = claim.minValuesByKey;
  if (byKey === undefined) return undefined;
  return {
    byKey,
    valuesOf: (type, key) => {
      // Every zone and capacity type of its offerings: not counted here.
      if (provider.offeringKeys.has(key)) return undefined;
      // The same values on every type, those the requirement allows (SatisfiesMinValues' req.Has).
      const fixed = provider.fixedValues?.get(key);
      if (fixed)
        return fixed.filter((v) => (claim.pinned[key] ?? v) === v && (claim.allowed?.get(key)?.has(v) ?? true));
      // A key no instance type defines has no values (Requirements.Get: Exists, none listed).
      if (!provider.instanceTypeKeys.has(key)) return [];
      if (type.known !== undefined && !type.known.has(key)) return undefined;
      const value = type.labels[key];
      return value === undefined ? [] : [value];
    },
  };
}

/** The first minValues the options fall short of, in words. */
function unmetMinValues(options: readonly WorldOption[], rule: MinValuesRule, leaning: boolean): string | undefined {
  for (const [key, min] of rule.byKey) {
    const seen = new Set<string>();
    let open = false;
    for (const o of options) {
      const values = rule.valuesOf(o.type, key);
      if (values === undefined) open = true;
      else for (const v of values) seen.add(v);
    }
    if (seen.size < min && !(open && leaning)) return `${key} has ${seen.size} of ${min} values`;
  }
  return undefined;
}

const below = (o: WorldOption, reqs: FilterRequirements, cap: number, leaning: Leaning) =>
  o.priced === undefined ? leaning.prices : worstLaunchPrice(o.priced, reqs) < cap;

/** filterOutSameInstanceType's cap: the cheapest replaced node whose type is among the options kept. */
function sameTypeCap(kept: readonly WorldOption[], own: ReadonlyMap<string, number>) {
  let cap = Number.POSITIVE_INFINITY;
  let capType = '';
  for (const o of kept) {
    const price = own.get(o.type.name);
    if (price !== undefined && price < cap) [cap, capType] = [price, o.type.name];
  }
  return { cap, capType };
}

/** What one world's filters leave of the options, minValues aside: the replacement's options there. */
export function optionsLeft(options: readonly WorldOption[], rules: CommandRules, leaning: Leaning): WorldOption[] {
  const kept = options.filter((o) => below(o, rules.reqs, rules.total, leaning));
  if (!rules.sameType) return kept;
  const { cap } = sameTypeCap(kept, rules.sameType.own);
  return kept.filter((o) => below(o, rules.sameType!.reqs, cap, leaning));
}

function standing(options: readonly WorldOption[], rules: CommandRules, leaning: Leaning): Kept {
  const kept = options.filter((o) => below(o, rules.reqs, rules.total, leaning));
  const short = (why: string): Kept => ({ stands: false, why });
  if (kept.length < rules.needed)
    return short(
      `${kept.length === 0 ? 'no option' : `${kept.length} options, short of ${rules.needed},`} would undercut the replaced nodes ($${round(rules.total)}/h)`,
    );
  const unmet = rules.minValues && unmetMinValues(kept, rules.minValues, leaning.values);
  if (unmet) return short(`the options that would undercut the replaced nodes fall short of minValues: ${unmet}`);
  if (!rules.sameType) return { stands: true, left: kept };
  const { cap, capType } = sameTypeCap(kept, rules.sameType.own);
  const left = kept.filter((o) => below(o, rules.sameType!.reqs, cap, leaning));
  const same = `the cheapest replaced node whose type is an option (${capType}, $${round(cap)}/h)`;
  if (left.length === 0)
    return short(`no option would undercut ${same}: Karpenter's filterOutSameInstanceType leaves none`);
  const unmetLeft = rules.minValues && unmetMinValues(left, rules.minValues, leaning.values);
  if (unmetLeft) return short(`the options that would undercut ${same} fall short of minValues: ${unmetLeft}`);
  return { stands: true, left };
}

/** filterOutSameInstanceType's cap with the overlays if Karpenter's options were `listed` and `extra`; undefined: it would have kept another. */
function capWith(listed: readonly PricedCandidate[], extra: readonly PricedBoth[], rules: CommandRules) {
  if (!rules.sameType) return Number.POSITIVE_INFINITY;
  const { own, reqs } = rules.sameType;
  const kept = extra.filter((t) => worstLaunchPrice(t.with, rules.reqs) < rules.total);
  let cap = Number.POSITIVE_INFINITY;
  for (const c of [...listed, ...kept]) cap = Math.min(cap, own.get(c.type.name) ?? cap);
  if (listed.some((c) => !(worstLaunchPrice(c, reqs) < cap))) return undefined;
  if (kept.some((t) => worstLaunchPrice(t.with, reqs) < cap)) return undefined;
  return cap;
}

export interface WithoutInput {
  /** The replacement's options in both worlds (its NodeClaim's, Karpenter's kept with the overlays). */
  readonly listed: { readonly with: readonly PricedCandidate[]; readonly without: readonly PricedCandidate[] };
  readonly rules: { readonly with: CommandRules; readonly without: CommandRules };
  /** Replaced nodes' types that are not options but could have been (several nodes: filterOutSameInstanceType reads them). */
  readonly replacedTypes: readonly PricedBoth[];
  /** Other types that could have been options, cheaper without the selected overlays or priced by an overlay that may apply. */
  readonly unseen: () => Stop | readonly BothWorlds[];
  /** With the overlays Karpenter cut the options it kept to the cheapest 15 (a spot node moved to spot). */
  readonly truncated: boolean;
  /** An option's cheapest offering under the replacement's requirements: set where the savings without the overlays are read. */
  readonly cheapest?: (c: PricedCandidate) => number;
}

/** Which replaced types not among the options fitted the pods, each subset consistent with what Karpenter kept, with filterOutSameInstanceType's cap then. */
export function hypotheses(input: WithoutInput): Stop | { fitted: readonly PricedBoth[]; cap: number }[] {
  if (input.replacedTypes.length > MAX_REPLACED_TYPES)
    return stop(
      'unseen-options',
      `${input.replacedTypes.length} of the replaced nodes' types are not among the options: whether the pods fit them, which decides filterOutSameInstanceType, is not known`,
    );
  const out: { fitted: readonly PricedBoth[]; cap: number }[] = [];
  for (let mask = 0; mask < 1 << input.replacedTypes.length; mask++) {
    if (input.replacedTypes.some((t, i) => t.fits && !(mask & (1 << i)))) continue;
    const fitted = input.replacedTypes.filter((_, i) => mask & (1 << i));
    const cap = capWith(input.listed.with, fitted, input.rules.with);
    if (cap !== undefined) out.push({ fitted, cap });
  }
  return out;
}

/** The types that may have been options: those the pods fitted only if Karpenter's filters cut them with the overlays. */
export function mayHaveBeen(unseen: readonly BothWorlds[], input: WithoutInput, cap: number): readonly BothWorlds[] {
  const { rules } = input;
  const sameReqs = rules.with.sameType?.reqs ?? rules.with.reqs;
  return unseen.filter(
    (t) =>
      input.truncated ||
      t.with === undefined ||
      !(worstLaunchPrice(t.with, rules.with.reqs) < rules.with.total && worstLaunchPrice(t.with, sameReqs) < cap),
  );
}

export const asOptions = (cs: readonly PricedCandidate[]): WorldOption[] =>
  cs.map((c) => ({ type: c.type, priced: c }));
export const asWithout = (t: BothWorlds): WorldOption => ({ type: t.type, priced: t.without });

/** Whether the command would stand without the selected overlays, for every options list consistent with what Karpenter kept. */
export function standsWithout(input: WithoutInput): Stop | Standing {
  const { listed, rules } = input;
  const mv = rules.with.minValues;
  const unmet = mv && unmetMinValues(asOptions(listed.with), mv, true);
  if (unmet)
    return stop(
      'min-values',
      `the replacement's options fall short of its minValues as the watcher counts their labels (${unmet}), yet Karpenter kept them`,
    );
  const hs = hypotheses(input);
  if ('stop' in hs) return hs;
  let unseen: Stop | readonly BothWorlds[] | undefined;
  const couldHave = (cap: number): Stop | readonly BothWorlds[] => {
    unseen ??= input.unseen();
    return 'stop' in unseen ? unseen : mayHaveBeen(unseen, input, cap);
  };
  const answers: (Standing | { code: 'unseen-options' | 'min-values'; why?: string })[] = [];
  for (const { fitted, cap } of hs) {
    const sure = [...asOptions(listed.without), ...fitted.map(asWithout)];
    let held = standing(sure, rules.without, SURE);
    // Past what is surely left, the types the pods are shown to fit are options where they undercut.
    const could = held.stands ? undefined : couldHave(cap);
    if (could !== undefined && 'stop' in could) return could;
    if (could) held = standing([...sure, ...could.filter((t) => t.fits).map(asWithout)], rules.without, SURE);
    if (held.stands) {
      const { cheapest } = input;
      answers.push({
        stands: true,
        ...(cheapest ? { cheapest: cheapestOf(held.left, could ?? couldHave(cap), cheapest) } : {}),
      });
      continue;
    }
    const widest = [...sure, ...could!.map(asWithout)];
    const high = standing(widest, rules.without, { prices: true, values: true });
    if (!high.stands) answers.push(high);
    else if (!standing(widest, rules.without, { prices: true, values: false }).stands)
      answers.push({ code: 'min-values' });
    else answers.push({ code: 'unseen-options', why: names(could!.filter((t) => !t.fits).map((t) => t.type.name)) });
  }
  if (hs.length === 0)
    return stop(
      'replaced-prices',
      'at the prices known an option Karpenter kept does not undercut the cheapest replaced node whose type is among the options (filterOutSameInstanceType): its prices, or the nodes it replaced, were other than these',
    );
  const open = answers.find((a) => 'code' in a);
  if (open?.code === 'min-values')
    return stop(
      'min-values',
      "without the selected overlays whether the options left meet the replacement's minValues depends on labels of theirs the watcher does not know",
    );
  if (open)
    return stop(
      'unseen-options',
      `without the selected overlays ${open.why} would undercut the replaced nodes, and whether their pods fit it is not known`,
    );
  const decided = answers.filter((a) => 'stands' in a);
  if (decided.every((a) => a.stands)) {
    const ranges = decided.flatMap((a) => (a.stands && a.cheapest ? [a.cheapest] : []));
    if (ranges.length === 0) return { stands: true };
    return {
      stands: true,
      cheapest: { lo: Math.min(...ranges.map((r) => r.lo)), hi: Math.max(...ranges.map((r) => r.hi)) },
    };
  }
  // Told as the hypothesis where the most replaced types fitted: small nodes packed into one.
  const falls = decided.findLast((a) => !a.stands);
  if (falls && decided.every((a) => !a.stands)) return falls;
  return stop(
    'unseen-options',
    `whether the pods fit ${names(input.replacedTypes.map((t) => t.type.name))}, replaced nodes' types that are not among the options, decides filterOutSameInstanceType without the selected overlays, and is not known`,
  );
}

/**
 * The cheapest option's cheapest offering in one hypothesis: no dearer than what is surely left,
 * no cheaper than the types the pods might have fit too (0 where their prices are not known).
 */
function cheapestOf(
  left: readonly WorldOption[],
  could: Stop | readonly BothWorlds[],
  cheapest: (c: PricedCandidate) => number,
): Interval {
  const hi = Math.min(...left.flatMap((o) => (o.priced ? [cheapest(o.priced)] : [])));
  if ('stop' in could) return { lo: 0, hi };
  return { lo: Math.min(hi, ...could.map((t) => (t.without ? cheapest(t.without) : 0))), hi };
}

/** Hypotheses are the subsets of these: beyond, the test abstains. */
const MAX_REPLACED_TYPES = 5;

export const names = (all: readonly string[]) =>
  `${all.slice(0, 3).join(', ')}${all.length > 3 ? ` and ${all.length - 3} more` : ''}`;

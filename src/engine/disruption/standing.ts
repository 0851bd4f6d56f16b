// Whether consolidation's command stands in one world (consolidation.go computeConsolidation: the
// price filter, minValues, for a spot node moved alone to spot the 15 options; then for several
// nodes multinodeconsolidation.go filterOutSameInstanceType, minValues again), and whether it
// would stand without the selected overlays, for every options list consistent with what
// Karpenter kept with them: the answer is given only where every hypothesis gives it. Where
// Balanced scoring reads the savings without the overlays, a command that stands says how cheap
// its cheapest option can be, over the same hypotheses (balanced.ts).
import { Abstain, abstain } from '../effect/abstain.ts';
import type { PricedCandidate } from '../effect/worlds.ts';
import type { CutType, PricedCutType } from './cut-options.ts';
import { hypotheses, sameTypeFiltered } from './multi-node.ts';
import {
  asOptions,
  type CommandRules,
  type Leaning,
  type PricedOption,
  priceFiltered,
  SURE,
  unmetMinValues,
} from './price-filter.ts';
import { worstLaunchPrice } from './prices.ts';
import { names } from './story.ts';
import { type Interval, round } from './types.ts';

/** `cheapest`: the cheapest option's cheapest offering as far as the options are known, where asked for (Balanced scoring reads the savings). */
export type Standing = { stands: true; cheapest?: Interval } | { stands: false; why: string };

/** In one world: what is left of the options, or why the command falls. */
type Kept = { stands: true; left: readonly PricedOption[] } | { stands: false; why: string };

export const asWithout = (t: CutType): PricedOption => ({ type: t.type, priced: t.without });

/** What one world's filters leave of the options, minValues aside: the replacement's options there. */
export function optionsLeft(options: readonly PricedOption[], rules: CommandRules, leaning: Leaning): PricedOption[] {
  const kept = priceFiltered(options, rules, leaning);
  return rules.sameType ? sameTypeFiltered(kept, rules.sameType, leaning).left : kept;
}

function standing(options: readonly PricedOption[], rules: CommandRules, leaning: Leaning): Kept {
  const kept = priceFiltered(options, rules, leaning);
  const short = (why: string): Kept => ({ stands: false, why });
  if (kept.length < rules.needed)
    return short(
      `${kept.length === 0 ? 'no option' : `${kept.length} options, short of ${rules.needed},`} would undercut the replaced nodes ($${round(rules.total)}/h)`,
    );
  const unmet = rules.minValues && unmetMinValues(kept, rules.minValues, leaning.values);
  if (unmet) return short(`the options that would undercut the replaced nodes fall short of minValues: ${unmet}`);
  if (!rules.sameType) return { stands: true, left: kept };
  const { left, cap, capType } = sameTypeFiltered(kept, rules.sameType, leaning);
  const same = `the cheapest replaced node whose type is an option (${capType}, $${round(cap)}/h)`;
  if (left.length === 0)
    return short(`no option would undercut ${same}: Karpenter's filterOutSameInstanceType leaves none`);
  const unmetLeft = rules.minValues && unmetMinValues(left, rules.minValues, leaning.values);
  if (unmetLeft) return short(`the options that would undercut ${same} fall short of minValues: ${unmetLeft}`);
  return { stands: true, left };
}

export interface WithoutInput {
  /** The replacement's options in both worlds (its NodeClaim's, Karpenter's kept with the overlays). */
  readonly listed: { readonly with: readonly PricedCandidate[]; readonly without: readonly PricedCandidate[] };
  readonly rules: { readonly with: CommandRules; readonly without: CommandRules };
  /** Candidates' types that are not options but could have been (several nodes: filterOutSameInstanceType reads them). */
  readonly candidateCutTypes: readonly PricedCutType[];
  /** Other types that could have been options, cheaper without the selected overlays or priced by an overlay that may apply. */
  readonly catalogCutTypes: () => readonly CutType[] | Abstain;
  /** With the overlays Karpenter cut the options it kept to the cheapest 15 (a spot node moved to spot). */
  readonly truncated: boolean;
  /** An option's cheapest offering under the replacement's requirements: set where the savings without the overlays are read. */
  readonly cheapest?: (c: PricedCandidate) => number;
}

/** The types that may have been options: those the pods fitted only if Karpenter's filters cut them with the overlays. */
export function mayHaveBeen(cut: readonly CutType[], input: WithoutInput, cap: number): readonly CutType[] {
  const { rules } = input;
  const sameReqs = rules.with.sameType?.reqs ?? rules.with.reqs;
  return cut.filter(
    (t) =>
      input.truncated ||
      t.with === undefined ||
      !(worstLaunchPrice(t.with, rules.with.reqs) < rules.with.total && worstLaunchPrice(t.with, sameReqs) < cap),
  );
}

/** Whether the command would stand without the selected overlays, for every options list consistent with what Karpenter kept. */
export function standsWithout(input: WithoutInput): Standing | Abstain {
  const { listed, rules } = input;
  const mv = rules.with.minValues;
  const unmet = mv && unmetMinValues(asOptions(listed.with), mv, true);
  if (unmet)
    return abstain(
      'min-values',
      `the replacement's options fall short of its minValues as the watcher counts their labels (${unmet}), yet Karpenter kept them`,
    );
  const hs = hypotheses(input.candidateCutTypes, listed.with, rules.with);
  if (hs instanceof Abstain) return hs;
  if (hs.length === 0)
    return abstain(
      'replaced-prices',
      'at the prices known an option Karpenter kept does not undercut the cheapest replaced node whose type is among the options (filterOutSameInstanceType): its prices, or the nodes it replaced, were other than these',
    );
  let cut: readonly CutType[] | Abstain | undefined;
  const couldHave = (cap: number): readonly CutType[] | Abstain => {
    cut ??= input.catalogCutTypes();
    return cut instanceof Abstain ? cut : mayHaveBeen(cut, input, cap);
  };
  const answers = hs.map(({ fitted, cap }) =>
    standsIn([...asOptions(listed.without), ...fitted.map(asWithout)], () => couldHave(cap), input),
  );
  return agreed(answers, input);
}

/**
 * One hypothesis: `sure` surely left without the overlays, `couldHave` the cut types that may have
 * been options. Past what is surely left, the types the pods are shown to fit are options where
 * they undercut; the others leave the answer open unless it is the same whether they are or not.
 */
function standsIn(
  sure: readonly PricedOption[],
  couldHave: () => readonly CutType[] | Abstain,
  input: WithoutInput,
): Standing | Abstain {
  const { rules } = input;
  let held = standing(sure, rules.without, SURE);
  const could = held.stands ? undefined : couldHave();
  if (could instanceof Abstain) return could;
  if (could) held = standing([...sure, ...could.filter((t) => t.fits).map(asWithout)], rules.without, SURE);
  if (held.stands) {
    const { cheapest } = input;
    if (!cheapest) return { stands: true };
    const cut = could ?? couldHave();
    // The cut types the pods are shown to fit are options too (only the price filter cut them with the overlays).
    const all =
      could || cut instanceof Abstain
        ? held
        : standing([...sure, ...cut.filter((t) => t.fits).map(asWithout)], rules.without, SURE);
    return { stands: true, cheapest: cheapestOf(all.stands ? all.left : held.left, cut, cheapest) };
  }
  const widest = [...sure, ...could!.map(asWithout)];
  const high = standing(widest, rules.without, { prices: true, values: true });
  if (!high.stands) return high;
  if (!standing(widest, rules.without, { prices: true, values: false }).stands)
    return abstain(
      'min-values',
      "without the selected overlays whether the options left meet the replacement's minValues depends on labels of theirs the watcher does not know",
    );
  const unfit = could!.filter((t) => !t.fits);
  return abstain(
    'unseen-options',
    `without the selected overlays ${names(unfit.map((t) => t.type.name))} would undercut the replaced nodes, and whether their pods fit it${unfit.some((t) => t.roomUnsure) ? " and the NodePool's limits left room for it" : ''} is not known`,
  );
}

/** The answer every hypothesis gives; else the first hypothesis's abstention, or one for the fit that decides between them. */
function agreed(answers: readonly (Standing | Abstain)[], input: WithoutInput): Standing | Abstain {
  const open = answers.find((a) => a instanceof Abstain);
  if (open) return open;
  const decided = answers as readonly Standing[];
  if (decided.every((a) => a.stands)) {
    const ranges = decided.flatMap((a) => (a.stands && a.cheapest ? [a.cheapest] : []));
    if (ranges.length === 0) return { stands: true };
    return {
      stands: true,
      cheapest: { lo: Math.min(...ranges.map((r) => r.lo)), hi: Math.max(...ranges.map((r) => r.hi)) },
    };
  }
  // Told as the hypothesis where the most candidates' types fitted: small nodes packed into one.
  const falls = decided.findLast((a) => !a.stands);
  if (falls && decided.every((a) => !a.stands)) return falls;
  return abstain(
    'unseen-options',
    `whether the pods fit ${names(input.candidateCutTypes.map((t) => t.type.name))}, replaced nodes' types that are not among the options, decides filterOutSameInstanceType without the selected overlays, and is not known`,
  );
}

/**
 * The cheapest option's cheapest offering in one hypothesis: no dearer than what is surely left
 * (the types the pods are shown to fit among it), no cheaper than the types they might fit too (0
 * where their prices are not known).
 */
function cheapestOf(
  left: readonly PricedOption[],
  could: readonly CutType[] | Abstain,
  cheapest: (c: PricedCandidate) => number,
): Interval {
  const hi = Math.min(...left.flatMap((o) => (o.priced ? [cheapest(o.priced)] : [])));
  if (could instanceof Abstain) return { lo: 0, hi };
  const unsure = could.filter((t) => !t.fits);
  return { lo: Math.min(hi, ...unsure.map((t) => (t.without ? cheapest(t.without) : 0))), hi };
}

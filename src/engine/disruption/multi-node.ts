// Multi-node consolidation's own filter (multinodeconsolidation.go, filterOutSameInstanceType): a
// command of several nodes keeps only options that undercut the cheapest candidate whose type is
// itself an option (that candidate's own offering, overlays applied); with nothing left there is no
// command. Which candidates' types were options depends on whether the pods fit them, which the
// watcher does not always see: each consistent subset is a hypothesis (standing.ts asks them all).
import { type Abstain, abstain } from '../effect/abstain.ts';
import type { PricedCandidate } from '../effect/worlds.ts';
import type { PricedCutType } from './cut-options.ts';
import { type CommandRules, type Leaning, type PricedOption, undercuts } from './price-filter.ts';
import { worstLaunchPrice } from './prices.ts';

/** filterOutSameInstanceType's cap: the cheapest candidate whose type is among the options kept. */
function sameTypeCap(kept: readonly PricedOption[], own: ReadonlyMap<string, number>) {
  let cap = Number.POSITIVE_INFINITY;
  let capType = '';
  for (const o of kept) {
    const price = own.get(o.type.name);
    if (price !== undefined && price < cap) [cap, capType] = [price, o.type.name];
  }
  return { cap, capType };
}

/** What filterOutSameInstanceType leaves of the options the price filter kept. */
export function sameTypeFiltered(
  kept: readonly PricedOption[],
  sameType: NonNullable<CommandRules['sameType']>,
  leaning: Leaning,
): { left: PricedOption[]; cap: number; capType: string } {
  const { cap, capType } = sameTypeCap(kept, sameType.own);
  return { left: kept.filter((o) => undercuts(o, sameType.reqs, cap, leaning)), cap, capType };
}

/** filterOutSameInstanceType's cap with the overlays if Karpenter's options were `listed` and `extra`; undefined: it would have kept another. */
function capWith(listed: readonly PricedCandidate[], extra: readonly PricedCutType[], rules: CommandRules) {
  if (!rules.sameType) return Number.POSITIVE_INFINITY;
  const { own, reqs } = rules.sameType;
  const kept = extra.filter((t) => worstLaunchPrice(t.with, rules.reqs) < rules.total);
  let cap = Number.POSITIVE_INFINITY;
  for (const c of [...listed, ...kept]) cap = Math.min(cap, own.get(c.type.name) ?? cap);
  if (listed.some((c) => !(worstLaunchPrice(c, reqs) < cap))) return undefined;
  if (kept.some((t) => worstLaunchPrice(t.with, reqs) < cap)) return undefined;
  return cap;
}

/** Hypotheses are the subsets of the candidates' cut types: beyond this many, the test abstains. */
const MAX_CANDIDATE_CUT_TYPES = 5;

/** Which candidates' types not among the options fitted the pods, and filterOutSameInstanceType's cap with the overlays then. */
interface Hypothesis {
  readonly fitted: readonly PricedCutType[];
  readonly cap: number;
}

/** Each subset of the candidates' cut types consistent with what Karpenter kept (`listed`, with the overlays). */
export function hypotheses(
  cutTypes: readonly PricedCutType[],
  listed: readonly PricedCandidate[],
  rules: CommandRules,
): Hypothesis[] | Abstain {
  if (cutTypes.length > MAX_CANDIDATE_CUT_TYPES)
    return abstain(
      'unseen-options',
      `${cutTypes.length} of the replaced nodes' types are not among the options: whether the pods fit them, which decides filterOutSameInstanceType, is not known`,
    );
  const out: Hypothesis[] = [];
  for (let mask = 0; mask < 1 << cutTypes.length; mask++) {
    if (cutTypes.some((t, i) => t.fits && !(mask & (1 << i)))) continue;
    const fitted = cutTypes.filter((_, i) => mask & (1 << i));
    const cap = capWith(listed, fitted, rules);
    if (cap !== undefined) out.push({ fitted, cap });
  }
  return out;
}

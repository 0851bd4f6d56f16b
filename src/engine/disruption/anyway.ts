// "Anyway": the launch of a replacement consolidation would have made without the selected overlays
// too.
// Its NodeClaim lists the options Karpenter kept with the overlays: those under the replaced
// nodes' overlaid price. Without them consolidation would have written another list, the types
// the pods fit that undercut the replaced nodes there (and, for several nodes, pass
// filterOutSameInstanceType there): listed types that undercut only thanks to a selected overlay
// drop out, and types cut by the overlaid price (a selected overlay that discounts the replaced
// node itself cuts every type between its two prices) come in if the pods fit them. So the launch
// with the overlays is replayed over the NodeClaim's list, and the one without them over that
// other list (../effect/effect.ts, `withoutCandidates`).
//
// Whether the pods fit a type cut by price the watcher cannot always tell (fit.ts).
// The list without the overlays is then known only between two bounds: the types surely there,
// and those with every type that may be. An on-demand launch is monotone between them: the
// CreateFleet strategy turns on an overlaid offering among the candidates, and the types EC2 may
// launch are those ranked lowest (Karpenter's cut at 60 keeps the cheapest, by the same prices).
// So if both bounds give the same launch, every list between gives it; if not, whether the pods
// fit those types decides the effect, and it is unknown.
import { Abstain, abstain } from '../effect/abstain.ts';
import { launchEffect } from '../effect/effect.ts';
import type { Effect, EffectInput } from '../effect/types.ts';
import { hypotheses } from './multi-node.ts';
import { asOptions, SURE } from './price-filter.ts';
import { asWithout, mayHaveBeen, optionsLeft, type WithoutInput } from './standing.ts';
import { names } from './story.ts';

/** The replacement's options without the selected overlays, as far as they are known: by name, each list one array kept with the price test. */
export interface WithoutOptions {
  /** The types surely among them. */
  readonly known: readonly string[];
  /** Those that may be among them, if the pods fit them. */
  readonly maybe: readonly string[];
  /** `known` and `maybe`: `known` itself where none may be. */
  readonly widest: readonly string[];
}

/** Where the command stands without the selected overlays: its options there, over every hypothesis consistent with what Karpenter kept. */
export function optionsWithout(input: WithoutInput): WithoutOptions | Abstain {
  const hs = hypotheses(input.candidateCutTypes, input.listed.with, input.rules.with);
  if (hs instanceof Abstain) return hs;
  const unseen = input.catalogCutTypes();
  if (unseen instanceof Abstain) return unseen;
  let known: Set<string> | undefined;
  const widest = new Set<string>();
  for (const { fitted, cap } of hs) {
    const could = mayHaveBeen(unseen, input, cap);
    const sure = [
      ...asOptions(input.listed.without),
      ...fitted.map(asWithout),
      ...could.filter((t) => t.fits).map(asWithout),
    ];
    const left = new Set(optionsLeft(sure, input.rules.without, SURE).map((o) => o.type.name));
    known = known === undefined ? left : new Set([...known].filter((name) => left.has(name)));
    const all = [...sure, ...could.filter((t) => !t.fits).map(asWithout)];
    for (const o of optionsLeft(all, input.rules.without, { prices: true, values: true })) widest.add(o.type.name);
  }
  const sure = [...(known ?? [])];
  // A spot node moved to spot: Karpenter cuts its options to the cheapest 15, in its sort's order.
  if (input.truncated && widest.size > input.rules.without.needed)
    return abstain(
      'truncation',
      `without the selected overlays Karpenter would cut the replacement's ${widest.size} options to the cheapest ${input.rules.without.needed}, in an order the watcher cannot replay`,
    );
  const maybe = [...widest].filter((name) => !known?.has(name));
  return { known: sure, maybe, widest: maybe.length === 0 ? sure : [...sure, ...maybe] };
}

/** The effect of a replacement made anyway: the launch with the overlays against the launch on the options without them. */
export function anywayEffect(input: EffectInput, options: WithoutOptions | Abstain, context: Partial<Effect>): Effect {
  if (options instanceof Abstain) return options.effect(context);
  const known = launchEffect({ ...input, withoutCandidates: options.known });
  if (options.maybe.length === 0) return known;
  const why = `without the selected overlays ${names(options.maybe)} would be among the replacement's options if its pods fit it, which the watcher cannot tell`;
  const { overlays, prices, launched, with: predicted } = known;
  const told = { ...(overlays ? { overlays } : {}), ...(prices ? { prices } : {}), ...(launched ? { launched } : {}) };
  // A launch that may be spot is not monotone in its candidates (the spot offering filter reads the cheapest on-demand one).
  if (input.claim?.capacityTypes.has('spot')) return abstain('unseen-options', why).effect(told);
  const widest = launchEffect({ ...input, withoutCandidates: options.widest });
  if (sameLaunch(known, widest)) return known;
  return abstain('unseen-options', `${why}, and that changes its launch`).effect({
    ...told,
    ...(predicted ? { with: predicted } : {}),
  });
}

const sameLaunch = (a: Effect, b: Effect) =>
  a.verdict === b.verdict && a.reasonCode === b.reasonCode && JSON.stringify(a.without) === JSON.stringify(b.without);

// The disruption replay: what the selected overlays changed about a launch Karpenter's disruption
// made. Its files are named for the parts of Karpenter's pkg/controllers/disruption they replay:
// the method table here (controller.go), which command launched a NodeClaim (queue.ts), when a
// consolidation was priced (validation.ts), consolidation in both worlds (consolidation.ts; its
// filters price-filter.ts and multi-node.ts; standing.ts, whether it stands without the selected
// overlays; cut-options.ts and fit.ts, the options Karpenter cut and whether the pods fit them;
// anyway.ts, the launch it would have made anyway), Balanced scoring and the pool's cost
// (balanced.ts, pool-cost.ts), drift (drift.ts), the churn an overlay caused (churn.ts).
//
// The words, in the order a decision goes through them:
// - moment: an instant whose overlays Karpenter priced with: a launch's; for a consolidation, one
//   within its decision's window, before its marks (validation.ts).
// - counted overlays: those in force at the moment that Karpenter applied (validated, not
//   deleted), each selected by the watcher or not (../effect/moment.ts).
// - worlds: `with` the counted overlays, `without` them less the selected ones. A priced world:
//   candidate offerings priced with one world's overlays (../effect/worlds.ts).
// - command: Karpenter's disruption command: its reason (reasons.ts), the nodes it disrupted
//   (its candidates) and the replacement it launched (types.ts).
// - launch: what the AWS provider launches from a priced world (../effect/aws-launch.ts).
// - verdict: what the selected overlays changed: the two worlds' launches compared
//   (../effect/verdict.ts), or for a consolidation first whether the command stands without
//   them: `replacement` where it would not.
// - abstention: no answer, a code and the reason (../effect/abstain.ts): the record reads `unknown`.
// moment -> counted overlays -> worlds -> priced world -> command -> launch -> verdict.
import type { Effect, EffectInput } from '../effect/types.ts';
import { Interned } from '../interned.ts';
import { idOf, Memo } from '../memo.ts';
import type { Allocatable } from '../node.ts';
import type { NodePoolView } from '../nodepool.ts';
import type { OverlayIndex } from '../overlay-index.ts';
import { NODEPOOL_LABEL } from '../well-known.ts';
import { abstain } from '../effect/abstain.ts';
import { annotatedWith } from '../effect/effect.ts';
import { balancedEvidence } from './balanced.ts';
import { churnOf } from './churn.ts';
import { consolidationEffect } from './consolidation.ts';
import { driftEffect } from './drift.ts';
import type { DisruptionEvidence, DisruptionMark } from './evidence.ts';
import type { LaunchOrigin } from './queue.ts';
import { type Method, reasonOf } from './reasons.ts';
import { commandStory } from './story.ts';
import type { Candidate, Command, DecisionWindow, Judged, PoolOffering } from './types.ts';
import { decisionWindow, effectAtDecision, momentsWithin } from './validation.ts';

/** How a replacement is judged, by its command's method (controller.go, NewMethods). */
const METHODS: Readonly<Record<Method, (command: Command, replacement: EffectInput) => Judged>> = {
  // SingleNodeConsolidation and MultiNodeConsolidation: the price test in both worlds, Balanced
  // scoring, and the launch it would have made anyway.
  consolidation: consolidationEffect,
  // Drift, StaticDrift and health: no price test, the replacement's launch.
  launch: driftEffect,
};

/** What the replay reads of a disruption launch besides its command. */
interface DisruptionSetting {
  readonly index: OverlayIndex;
  /** When the replacement was launched (its NodeClaim's creation). */
  readonly at: number;
  readonly evidence: DisruptionEvidence | undefined;
  readonly poolOfferings: ((pool: string, createdBefore: number) => readonly PoolOffering[] | undefined) | undefined;
  /** The capacity of a NodePool's NodeClaims created by then, but some: what counted against its limits. */
  readonly poolCapacity:
    | ((pool: string, createdBefore: number, except: ReadonlySet<string>) => Allocatable | undefined)
    | undefined;
  /** The replacement's NodePool. */
  readonly pool: string | undefined;
  /** The replacement's launch as the replay takes it at a moment. */
  readonly inputAt: (moment: number) => EffectInput;
  /** Whether the launch can be replayed (its provider's code is known, its NodeClaim names its candidates): else one moment is as good as any. */
  readonly replayable: boolean;
  /** Its NodeClaim's karpenter.sh/price-overlay-applied. */
  readonly annotated: boolean;
}

type Disruption = Exclude<LaunchOrigin, { kind: 'provisioned' } | { kind: 'awaiting' }>;

/** The replacement judged by its command's method, with the command's story. */
export function replacementEffect(command: Command, replacement: EffectInput): Effect {
  const { effect, story } = METHODS[command.reason.method](command, replacement);
  return {
    ...effect,
    disruption: {
      ...commandStory(command),
      ...story,
      ...(command.candidatesUnclear !== undefined ? { replacedUnclear: command.candidatesUnclear } : {}),
    },
  };
}

export function disruptionEffect(origin: Disruption, s: DisruptionSetting): Effect {
  if (origin.kind === 'unclear') return abstain('replaced-set', origin.reason).effect();
  const command = commandOf(origin, s);
  const judge = (replacement: EffectInput) => replacementEffect(command, replacement);
  const window = s.replayable ? command.window : undefined;
  if (window === undefined) return judge(s.inputAt(s.at));
  // Each moment's input once: the annotation test and the judgement read the same overlays in force.
  const inputs = new Map<number, EffectInput>();
  const inputAt = (t: number) => inputs.get(t) ?? inputs.set(t, s.inputAt(t)).get(t)!;
  return effectAtDecision(
    window,
    momentsWithin(s.index, window, (t) => annotationFits(t, inputAt(t), s)).map((t) => ({
      at: t,
      effect: judge(inputAt(t)),
    })),
  );
}

/**
 * Whether the overlays of moment `t` would annotate the replacement's NodeClaim as it is. Where the
 * replay cannot tell: an annotated one was at least priced while an eligible overlay was in force.
 */
function annotationFits(t: number, input: EffectInput, s: DisruptionSetting): boolean {
  const expected = annotatedWith(input);
  if (expected !== undefined) return expected === s.annotated;
  return !s.annotated || s.index.activeVersionsAt(t).some((v) => v.ineligible === undefined);
}

function commandOf(origin: Extract<Disruption, { kind: 'replacement' }>, s: DisruptionSetting): Command {
  const reason = reasonOf(origin.reason);
  const marks = origin.replaced;
  const window =
    reason.method === 'consolidation' ? decisionWindow(marks, s.evidence?.candidateAt?.bind(s.evidence)) : undefined;
  return {
    reason,
    candidates: candidatesOf(marks, s.index),
    ...(origin.replacedUnclear !== undefined ? { candidatesUnclear: origin.replacedUnclear } : {}),
    ...(window !== undefined
      ? { window, balanced: balancedEvidence(window, marks, s.evidence, s.index, s.poolOfferings) }
      : {}),
    ...optionalUsed(window, marks, s),
    churn: churnOf(
      marks.map((m) => m.record),
      s.index,
      s.at,
    ),
  };
}

/**
 * The capacity of the replacement's NodePool besides the candidates at the decision's end, where it
 * has limits (else nothing is summed), one object per figure: the price test's memo keys on it.
 */
function optionalUsed(
  window: DecisionWindow | undefined,
  marks: readonly DisruptionMark[],
  s: DisruptionSetting,
): { used?: Allocatable } {
  if (window === undefined || s.pool === undefined || s.index.nodePools.at(s.pool, window.to)?.limits === undefined)
    return {};
  const used = s.poolCapacity?.(s.pool, window.to, new Set(marks.map((m) => m.nodeClaim)));
  return used ? { used: SHARED_USED.of(`${used.cpu}/${used.memory}/${used.pods}`, () => Object.freeze(used)) } : {};
}
const SHARED_USED = new Interned<Allocatable>(256);

/** A candidate as Karpenter priced it: its NodeClaim's labels, its NodePool as of the mark; one object per mark and NodePool. */
const CANDIDATES = new Memo<DisruptionMark, { pool: NodePoolView | undefined }, Candidate>(
  (m, { pool }) => ({
    nodeClaim: m.nodeClaim,
    ...(m.node !== undefined ? { node: m.node } : {}),
    labels: m.labels,
    pool,
    ...(m.allocatable !== undefined ? { allocatable: m.allocatable } : {}),
  }),
  2,
);
const SHARED_CANDIDATES = new Interned<readonly Candidate[]>(256);

function candidatesOf(marks: readonly DisruptionMark[], index: OverlayIndex): readonly Candidate[] {
  const candidates = marks.map((m) =>
    CANDIDATES.of(m, { pool: index.nodePools.at(m.labels[NODEPOOL_LABEL], m.markedAt) }),
  );
  return SHARED_CANDIDATES.of(candidates.map(idOf).join(','), () => Object.freeze(candidates));
}

// A command of Karpenter's disruption as the replay carries it (Karpenter's types.go, Command and
// Candidate): its reason, the nodes it disrupted as Karpenter priced them, and what the watcher saw
// of its decision. The replacement the command launched is the launch's own input (EffectInput),
// at each moment the decision may have been priced at.
import type { Abstain } from '../effect/abstain.ts';
import type { CatalogContext } from '../effect/moment.ts';
import type { ChurnStory, DisruptionStory, Effect } from '../effect/types.ts';
import type { Worlds } from '../effect/worlds.ts';
import type { Allocatable } from '../node.ts';
import type { NodePoolView } from '../nodepool.ts';
import type { Labels } from '../requirements.ts';
import type { ApprovalFigures } from './events.ts';
import type { Reason } from './reasons.ts';

/** A node the command disrupted, as Karpenter saw it when it decided. */
export interface Candidate {
  readonly nodeClaim: string;
  readonly node?: string;
  /** Its labels: instance type, zone and capacity type (its offering), and the instance type's keys. */
  readonly labels: Labels;
  /** Its NodePool as of the decision: an overlay can name NodePools. */
  readonly pool: NodePoolView | undefined;
  /** What Karpenter holds its instance type to hold for pods (its NodeClaim's status.allocatable). */
  readonly allocatable?: Allocatable;
}

export interface Command {
  readonly reason: Reason;
  /** The nodes it disrupted: one shared array per distinct set, which the price test's memo keys on. */
  readonly candidates: readonly Candidate[];
  /** Why no candidate is named: several commands' marks within seconds of the replacement's creation. */
  readonly candidatesUnclear?: string;
  /** When a consolidation priced it (validation.ts); undefined for drift, or with no candidate known. */
  readonly window?: DecisionWindow;
  /** What Balanced scoring read of it, as far as the watcher saw it. */
  readonly balanced?: BalancedEvidence;
  /** The capacity of the replacement's NodePool besides the candidates when it was computed: what its limits left (limits.ts). */
  readonly used?: Allocatable;
  /** Of its candidates, the recorded ones whose overlay had changed or gone (churn.ts). */
  readonly churn: readonly ChurnStory[];
}

/** Between when and when a consolidation's command was priced (validation.ts). */
export interface DecisionWindow {
  readonly from: number;
  readonly to: number;
  /** Whether a ConsolidationCandidate Event dates its start (else the computation's timeout does). */
  readonly told: boolean;
}

/** A NodePool's NodeClaims of one offering, counted: what its ClusterCost sums (pool-cost.ts). */
export interface PoolOffering {
  readonly instanceType: string;
  readonly zone: string;
  readonly capacityType: string;
  readonly count: number;
}

/** What the watcher saw around a consolidation's decision that Balanced scoring reads (balanced.ts). */
export interface BalancedEvidence {
  /** The figures of the ConsolidationApproved Events of this command's part in the pool, dated within its decision's window. */
  approvals(pool: string): readonly ApprovalFigures[];
  /** The pool's NodeClaims by offering when the command was computed; undefined: not known. */
  offeringsOf(pool: string): readonly PoolOffering[] | undefined;
  /** The worlds at each moment ClusterCost may have priced those offerings at: one shared list per window. */
  costMoments(context: CatalogContext): readonly Worlds[] | Abstain;
  /** The decision's window, in words. */
  readonly window: string;
}

/** A quantity known to lie between two bounds. */
export interface Interval {
  readonly lo: number;
  readonly hi: number;
}

/** Dollars an hour as the story tells them: Karpenter's sums are floats. */
export const round = (n: number): number => Math.round(n * 1e6) / 1e6;

/** A replacement judged by its command's method: its effect, and what its story adds to the command's. */
export interface Judged {
  readonly effect: Effect;
  readonly story?: Partial<DisruptionStory>;
}

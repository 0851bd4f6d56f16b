// Karpenter's disruption reasons, spelled once, with what each tells the watcher. Karpenter writes
// the reason on every node a command disrupts (condition DisruptionReason, queue.go) and on each
// replacement's DisruptionLaunching Event ("Launching NodeClaim: <reason>"); its methods
// (controller.go NewMethods: Emptiness, StaticDrift, Drift, MultiNodeConsolidation,
// SingleNodeConsolidation; v1.15 adds health) decide which commands a reason's nodes can be in.

/** How many replacements a command of the reason launches, and for how many of its nodes. */
type Launches =
  /** Consolidation: one replacement at most, for all of the command's nodes. */
  | 'one-for-all'
  /** Emptiness: deletes empty nodes, launches nothing. */
  | 'none'
  /** Drift and health: one node a command, whose pods the provisioner schedules anew; commands follow each other without a pause. */
  | 'one-node-a-command'
  /** A reason the watcher does not know: whatever its command launched is taken as it comes. */
  | 'unknown';

/**
 * How the watcher judges a replacement launched for the reason (controller.ts): `consolidation`,
 * by its price test in both worlds; `launch`, as the launch it is (drift and health have no price
 * test: the replacement is launched for the candidate's pods as any launch is).
 */
export type Method = 'consolidation' | 'launch';

export interface Reason {
  /** As Karpenter titles it. */
  readonly name: string;
  /** The bounded value of a metric's `reason` label. */
  readonly label: ReasonLabel;
  readonly launches: Launches;
  readonly method: Method;
}

// biome-ignore format: a table, one reason a line
const KNOWN: readonly Reason[] = [
  { name: 'Underutilized', label: 'underutilized', launches: 'one-for-all',        method: 'consolidation' },
  { name: 'Empty',         label: 'empty',         launches: 'none',               method: 'launch' },
  { name: 'Drifted',       label: 'drifted',       launches: 'one-node-a-command', method: 'launch' },
  { name: 'Unhealthy',     label: 'unhealthy',     launches: 'one-node-a-command', method: 'launch' },
];

/** The values of the metrics' `reason` label: Karpenter's reasons lower-cased, any other `other`. */
export const DISRUPTION_REASONS = ['underutilized', 'empty', 'drifted', 'unhealthy', 'other'] as const;
type ReasonLabel = (typeof DISRUPTION_REASONS)[number];

const BY_LABEL = new Map(KNOWN.map((r) => [r.label as string, r]));

/** A reason as Karpenter wrote it (any casing): its entry, or an unknown one named as written. */
export function reasonOf(name: string): Reason {
  return BY_LABEL.get(name.toLowerCase()) ?? { name, label: 'other', launches: 'unknown', method: 'launch' };
}

/** Two spellings of one reason. */
export const sameReason = (a: string, b: string): boolean => a.toLowerCase() === b.toLowerCase();

// The Events Karpenter's disruption publishes that the watcher reads (pkg/controllers/disruption
// events.go): DisruptionLaunching on each replacement, naming the command's reason, and
// ConsolidationApproved, Balanced consolidation's score of a command it approves.

/** `Launching NodeClaim: Underutilized` -> `Underutilized` (Karpenter titles the reason). */
export function launchingReason(message: string | undefined): string | undefined {
  const m = /^Launching NodeClaim: (.+)$/.exec(message ?? '');
  return m?.[1]?.trim();
}

/** A ConsolidationApproved Event's figures (events.go, consolidationScoreMessage), as printed. */
export interface ApprovalFigures {
  readonly score: number;
  readonly threshold: number;
  readonly k: number;
  /** savings / pool cost, in percent, to 0.1. */
  readonly savingsPct: number;
  /** disruption / pool disruption, in percent, to 0.1. */
  readonly disruptionPct: number;
}

/** A ConsolidationApproved Event: when it last happened, and what it says. */
export interface ConsolidationApproval {
  readonly at: number;
  readonly figures: ApprovalFigures;
}

// client-go's EventCorrelator prefixes the message once it aggregates similar Events of an object.
const APPROVED =
  /^(?:\(combined from similar events\): )?score (\S+) >= threshold (\S+) \(k: (\d+), savings (\S+)%, disruption (\S+)%\)$/;

export function parseApproval(message: string | undefined): ApprovalFigures | undefined {
  const m = APPROVED.exec(message ?? '');
  if (!m) return undefined;
  const [score, threshold, k, savingsPct, disruptionPct] = m.slice(1).map(Number) as [
    number,
    number,
    number,
    number,
    number,
  ];
  if (![score, threshold, k, savingsPct, disruptionPct].every(Number.isFinite) || k <= 0) return undefined;
  return { score, threshold, k, savingsPct, disruptionPct };
}

// Whether Karpenter's provisioning or its disruption launched a NodeClaim, and which nodes a
// disruption launch replaced. Karpenter marks none of it on the new NodeClaim
// (pkg/controllers/disruption/queue.go, StartCommand): it first marks each node it disrupts
// (condition DisruptionReason=True, reason Underutilized, Drifted, ...), then creates the
// replacements, and its queue's first reconcile, a second or two later, publishes
// `DisruptionLaunching` ("Launching NodeClaim: <reason>") on each replacement (waitOrTerminate).
// So a replacement is a NodeClaim with that Event, and what it replaced the nodes its command
// marked just before it was created. Marks of `Empty` and of delete-only commands launch nothing:
// a NodeClaim created beside them with no Event after a short wait is a provisioning launch.
import type { Allocatable, NodeClaimView } from './node.ts';
import type { DecisionStory } from './record.ts';
import type { Labels } from './requirements.ts';
import { CAPACITY_TYPE, INSTANCE_TYPE, NODEPOOL_LABEL, ZONE } from './well-known.ts';
import type { RecordAtMark } from './disruption.ts';
import type { ConsolidationApproval } from './effect/balanced.ts';

/** A NodeClaim Karpenter's disruption marked, as it was when marked (it is gone once replaced). */
export interface DisruptionMark {
  readonly nodeClaim: string;
  readonly node?: string;
  readonly reason: string;
  readonly markedAt: number;
  /** The NodeClaim's labels: its offering (instance type, zone, capacity type), NodePool and instance-type keys. */
  readonly labels: Labels;
  /** Its node's record when it was marked, if the node was known. */
  readonly record?: RecordAtMark;
  /** Its status.allocatable: whether a replacement's pods fit its instance type. */
  readonly allocatable?: Allocatable;
}

/** What the watcher has seen of Karpenter's disruption. */
export interface DisruptionEvidence {
  /** The reason of the DisruptionLaunching Event Karpenter published on this NodeClaim, if one was seen. */
  launching(nodeClaim: string): string | undefined;
  /** The marks made between `from` and `to` (inclusive). */
  marksBetween(from: number, to: number): readonly DisruptionMark[];
  /** Other NodeClaims with a DisruptionLaunching Event of `reason`, created between `from` and `to`. */
  replacementsCreatedBetween(from: number, to: number, reason: string): readonly string[];
  /** The latest ConsolidationCandidate Event on this NodeClaim no later than `notAfter`: when a consolidation computed a command with it. */
  candidateAt?(nodeClaim: string, notAfter: number): number | undefined;
  /**
   * Karpenter's ConsolidationApproved Events (Balanced consolidation) dated between `from` and
   * `to`: on the candidate's NodeClaim for a command of one node, on each NodePool for several.
   */
  approvalsBetween?(
    kind: 'NodeClaim' | 'NodePool',
    name: string,
    from: number,
    to: number,
  ): readonly ConsolidationApproval[];
}

/**
 * Timestamps are whole seconds, and Karpenter marks the nodes and then creates the replacement
 * in one go (a status patch per node, then a create): a replacement is created within this of
 * its nodes' marks.
 */
export const MARK_WINDOW_MS = 5_000;
/**
 * How long a NodeClaim created among marks waits for its DisruptionLaunching Event before it is
 * taken for a provisioning launch. Karpenter's queue publishes the Event on its first reconcile
 * of the command (at once, or a second later when its cache has not seen the NodeClaim yet); the
 * wait leaves room for a slow apiserver and Event broadcaster, and stays below the time an
 * instance takes to boot and register its Node, so the webhook still records the node inline.
 */
export const LAUNCHING_EVENT_WAIT_MS = 15_000;

/** Reasons whose command launches one replacement at most (consolidation): another in the same window makes the replaced set ambiguous. */
const SINGLE_REPLACEMENT = new Set(['underutilized']);
/** Reasons whose commands never launch (Emptiness deletes empty nodes): their marks say nothing of a new NodeClaim. */
const NEVER_LAUNCH = new Set(['empty']);
/** Reasons whose commands disrupt one node each (drift, health): several commands can follow each other within a window. */
const ONE_CANDIDATE = new Set(['drifted', 'unhealthy']);

const canLaunch = (m: DisruptionMark) => !NEVER_LAUNCH.has(m.reason.toLowerCase());

/** Consolidation's reason: its replacements are priced (computeConsolidation), drift's and health's are not. */
export const isConsolidation = (reason: string) => SINGLE_REPLACEMENT.has(reason.toLowerCase());

export type LaunchOrigin =
  | { readonly kind: 'provisioned' }
  | {
      readonly kind: 'replacement';
      readonly reason: string;
      readonly replaced: readonly DisruptionMark[];
      /** Why the replaced nodes are not named, where several commands' marks share the window. */
      readonly replacedUnclear?: string;
    }
  | { readonly kind: 'awaiting'; readonly reason: string; readonly until: number }
  | { readonly kind: 'unclear'; readonly reason: string };

export function launchOrigin(claim: NodeClaimView, evidence: DisruptionEvidence, now: number): LaunchOrigin {
  const createdAt = claim.createdAt;
  const reason = evidence.launching(claim.name);
  if (createdAt === undefined)
    return reason === undefined
      ? { kind: 'provisioned' }
      : { kind: 'unclear', reason: `its NodeClaim has no creation time to find the nodes it replaced by` };
  // Marks of a second later than the creation count too: clocks of the apiserver's writes.
  const marks = evidence.marksBetween(createdAt - MARK_WINDOW_MS, createdAt + 1_000).filter(canLaunch);
  if (reason === undefined) {
    const until = createdAt + LAUNCHING_EVENT_WAIT_MS;
    if (marks.length === 0 || now >= until) return { kind: 'provisioned' };
    return {
      kind: 'awaiting',
      reason: `${marks.length} node(s) were marked for disruption as its NodeClaim was created: waiting for a DisruptionLaunching Event on it`,
      until,
    };
  }
  const lower = reason.toLowerCase();
  const ofReason = marks.filter((m) => m.reason.toLowerCase() === lower && m.nodeClaim !== claim.name);
  if (ofReason.length === 0)
    return {
      kind: 'unclear',
      reason: `Karpenter launched it to replace nodes (${reason}), and the watcher did not see which were marked`,
    };
  const others = () =>
    evidence
      .replacementsCreatedBetween(createdAt - MARK_WINDOW_MS, createdAt + MARK_WINDOW_MS, reason)
      .filter((n) => n !== claim.name);
  if (SINGLE_REPLACEMENT.has(lower)) {
    const twins = others();
    if (twins.length > 0)
      return {
        kind: 'unclear',
        reason: `replacements ${[claim.name, ...twins].sort().join(', ')} were created in the same seconds: which nodes each replaced is not known`,
      };
  }
  if (ONE_CANDIDATE.has(lower) && ofReason.length > 1)
    return ownCommand(claim.name, createdAt, reason, ofReason, others());
  return { kind: 'replacement', reason, replaced: ofReason };
}

/**
 * Drift and health commands disrupt one node each and follow each other without a pause, so the
 * window may hold several commands' marks. Each command marks its node, then creates its
 * replacements, so a replacement's node is the last mark made before its creation, and a mark of
 * a later second is a later command's. Timestamps are whole seconds: a mark of the creation's own
 * second may be this command's or the next one's. The node is named only where that leaves no
 * doubt.
 */
function ownCommand(
  name: string,
  createdAt: number,
  reason: string,
  marks: readonly DisruptionMark[],
  otherReplacements: readonly string[],
): LaunchOrigin {
  const near = marks.filter((m) => m.markedAt === createdAt);
  const before = marks.filter((m) => m.markedAt < createdAt);
  const latest = Math.max(...before.map((m) => m.markedAt));
  const own = near.length === 0 ? before.filter((m) => m.markedAt === latest) : before.length === 0 ? near : [];
  if (own.length === 1) return { kind: 'replacement', reason, replaced: own };
  return {
    kind: 'replacement',
    reason,
    replaced: [],
    replacedUnclear: `${marks.length} nodes were marked ${reason} within seconds of ${name}'s creation${
      otherReplacements.length > 0 ? `, beside ${otherReplacements.length} other replacement(s)` : ''
    }: which of them its command replaced is not known`,
  };
}

/** `Launching NodeClaim: Underutilized` -> `Underutilized` (Karpenter titles the reason). */
export function launchingReason(message: string | undefined): string | undefined {
  const m = /^Launching NodeClaim: (.+)$/.exec(message ?? '');
  return m?.[1]?.trim();
}

/**
 * The evidence of one reading of the cluster (explain, report): the marks on the NodeClaims there
 * now, the DisruptionLaunching Events read with them, and, for what is gone since (the nodes a
 * replacement replaced are deleted once it is up), what the records tell: a record of a
 * replacement names its reason and the nodes it replaced, as the watcher saw them then.
 */
export function evidenceOfReading(reading: {
  claims: readonly NodeClaimView[];
  /** The records' stories with the NodeClaim each node's record names. */
  records: readonly { nodeClaim: NodeClaimView | undefined; story: DecisionStory | undefined }[];
  /** DisruptionLaunching Events by NodeClaim: their reason. */
  launching?: ReadonlyMap<string, string>;
}): DisruptionEvidence {
  const reasonOf = new Map(reading.launching ?? []);
  const marks = new Map<string, DisruptionMark>();
  const createdAt = new Map<string, number>();
  for (const c of reading.claims) {
    if (c.createdAt !== undefined) createdAt.set(c.name, c.createdAt);
    if (c.disruptionReason !== undefined && c.disruptionMarkedAt !== undefined)
      marks.set(c.name, {
        nodeClaim: c.name,
        ...(c.nodeName !== undefined ? { node: c.nodeName } : {}),
        reason: c.disruptionReason,
        markedAt: c.disruptionMarkedAt,
        labels: c.labels,
      });
  }
  for (const { nodeClaim, story } of reading.records) {
    const told = story?.effect?.disruption;
    if (told === undefined || nodeClaim?.createdAt === undefined) continue;
    if (!reasonOf.has(nodeClaim.name)) reasonOf.set(nodeClaim.name, told.reason);
    for (const r of told.replaced) {
      if (marks.has(r.nodeClaim)) continue;
      const labels: Record<string, string> = {};
      if (r.instanceType !== undefined) labels[INSTANCE_TYPE] = r.instanceType;
      if (r.zone !== undefined) labels[ZONE] = r.zone;
      if (r.capacityType !== undefined) labels[CAPACITY_TYPE] = r.capacityType;
      if (r.nodePool !== undefined) labels[NODEPOOL_LABEL] = r.nodePool;
      // Marked just before the replacement was created: where the record's own replacement finds it.
      marks.set(r.nodeClaim, {
        nodeClaim: r.nodeClaim,
        ...(r.node !== undefined ? { node: r.node } : {}),
        reason: told.reason,
        markedAt: nodeClaim.createdAt,
        labels,
      });
    }
  }
  return {
    launching: (name) => reasonOf.get(name),
    marksBetween: (from, to) => [...marks.values()].filter((m) => m.markedAt >= from && m.markedAt <= to),
    replacementsCreatedBetween: (from, to, reason) =>
      [...reasonOf]
        .filter(([name, r]) => {
          const at = createdAt.get(name);
          return r.toLowerCase() === reason.toLowerCase() && at !== undefined && at >= from && at <= to;
        })
        .map(([name]) => name),
  };
}

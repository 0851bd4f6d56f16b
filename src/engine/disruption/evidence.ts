// What the watcher sees of Karpenter's disruption, as the engine reads it: the port the caches
// fill live (state/disruption/watch.ts) and a reading of the cluster fills for `explain` and
// `report` (evidenceOfReading). Karpenter marks nothing on a replacement that links it to what it
// replaced (queue.go, StartCommand): it marks each node it disrupts (condition
// DisruptionReason=True, with its reason), then creates the replacements, and publishes
// DisruptionLaunching on each; the marks outlive the nodes here, for an hour.
import type { Allocatable, NodeClaimView } from '../node.ts';
import type { DecisionStory } from '../record.ts';
import type { Labels } from '../requirements.ts';
import { CAPACITY_TYPE, INSTANCE_TYPE, NODEPOOL_LABEL, ZONE } from '../well-known.ts';
import type { RecordAtMark } from './churn.ts';
import type { ConsolidationApproval } from './events.ts';
import { sameReason } from './reasons.ts';

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
  /**
   * Where the watcher saw the mark made on its NodeClaim watch: that event's order, comparable with
   * `createdOrder` of NodeClaims (one watch delivers changes in the order they were written).
   */
  readonly order?: number;
}

/** What the watcher has seen of Karpenter's disruption. */
export interface DisruptionEvidence {
  /** The reason of the DisruptionLaunching Event Karpenter published on this NodeClaim, if one was seen. */
  launching(nodeClaim: string): string | undefined;
  /** The marks made between `from` and `to` (inclusive). */
  marksBetween(from: number, to: number): readonly DisruptionMark[];
  /** Other NodeClaims with a DisruptionLaunching Event of `reason`, created between `from` and `to`. */
  replacementsCreatedBetween(from: number, to: number, reason: string): readonly string[];
  /** Where the watcher saw the NodeClaim created on its watch: that event's order (DisruptionMark.order). */
  createdOrder?(nodeClaim: string): number | undefined;
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

/** A ConsolidationCandidate Event read: the NodeClaim it is on and when it last happened. */
export interface CandidateSeen {
  readonly nodeClaim: string;
  readonly at: number;
}

/** A ConsolidationApproved Event read: the object it is on (`NodeClaim/x`, `NodePool/y`), when, and its figures. */
export interface ApprovalSeen extends ConsolidationApproval {
  readonly object: string;
}

/**
 * The evidence of one reading of the cluster (explain, report): the marks on the NodeClaims there
 * now, the DisruptionLaunching, ConsolidationCandidate and ConsolidationApproved Events read with
 * them (as the watcher's caches hold them live: the decision's window and Balanced's score are
 * read alike), and, for what is gone since (the nodes a replacement replaced are deleted once it
 * is up), what the records tell: a record of a replacement names its reason and the nodes it
 * replaced, as the watcher saw them then. Without the candidate Events (files, or no right to
 * read Events) the decision's window is the one the marks alone give.
 */
export function evidenceOfReading(reading: {
  claims: readonly NodeClaimView[];
  /** The records' stories with the NodeClaim each node's record names. */
  records: readonly { nodeClaim: NodeClaimView | undefined; story: DecisionStory | undefined }[];
  /** DisruptionLaunching Events by NodeClaim: their reason. */
  launching?: ReadonlyMap<string, string>;
  candidates?: readonly CandidateSeen[];
  approvals?: readonly ApprovalSeen[];
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
  const { candidates, approvals } = reading;
  return {
    ...(candidates
      ? {
          candidateAt: (nodeClaim: string, notAfter: number) => {
            let latest: number | undefined;
            for (const c of candidates)
              if (c.nodeClaim === nodeClaim && c.at <= notAfter && (latest === undefined || c.at > latest))
                latest = c.at;
            return latest;
          },
        }
      : {}),
    ...(approvals
      ? {
          approvalsBetween: (kind: 'NodeClaim' | 'NodePool', name: string, from: number, to: number) =>
            approvals
              .filter((a) => a.object === `${kind}/${name}` && a.at >= from && a.at <= to)
              .map(({ at, figures }) => ({ at, figures })),
        }
      : {}),
    launching: (name) => reasonOf.get(name),
    marksBetween: (from, to) => [...marks.values()].filter((m) => m.markedAt >= from && m.markedAt <= to),
    replacementsCreatedBetween: (from, to, reason) =>
      [...reasonOf]
        .filter(([name, r]) => {
          const at = createdAt.get(name);
          return sameReason(r, reason) && at !== undefined && at >= from && at <= to;
        })
        .map(([name]) => name),
  };
}

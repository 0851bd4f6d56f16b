// Whether Karpenter's provisioning or its disruption launched a NodeClaim, and which nodes a
// disruption launch replaced. Karpenter marks none of it on the new NodeClaim
// (pkg/controllers/disruption/queue.go, StartCommand): it first marks each node it disrupts
// (condition DisruptionReason=True, reason Underutilized, Drifted, ...), then creates the
// replacements, and later publishes `DisruptionLaunching` ("Launching NodeClaim: <reason>") on
// each replacement once it has been launched (waitOrTerminate). So a replacement is a NodeClaim
// with that Event, and what it replaced the nodes marked with its reason just before it was
// created. Without the Event a NodeClaim created while nodes were being marked is waited for a
// while, then left unclear: a provisioning launch in the same second looks the same.
import type { NodeClaimView } from './node.ts';
import type { DecisionStory } from './record.ts';
import type { Labels } from './requirements.ts';
import type { RecordAtMark } from './disruption.ts';

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
}

/** What the watcher has seen of Karpenter's disruption. */
export interface DisruptionEvidence {
  /** The reason of the DisruptionLaunching Event Karpenter published on this NodeClaim, if one was seen. */
  launching(nodeClaim: string): string | undefined;
  /** The marks made between `from` and `to` (inclusive). */
  marksBetween(from: number, to: number): readonly DisruptionMark[];
  /** Other NodeClaims with a DisruptionLaunching Event of `reason`, created between `from` and `to`. */
  replacementsCreatedBetween(from: number, to: number, reason: string): readonly string[];
}

/**
 * Timestamps are whole seconds, and Karpenter marks the nodes and then creates the replacement
 * in one go (a status patch per node, then a create): a replacement is created within this of
 * its nodes' marks.
 */
export const MARK_WINDOW_MS = 5_000;
/** How long a NodeClaim created among marks waits for its DisruptionLaunching Event: Karpenter publishes it once the instance is launched. */
export const LAUNCHING_EVENT_WAIT_MS = 90_000;

/** Reasons whose command launches one replacement at most (consolidation): another in the same window makes the replaced set ambiguous. */
const SINGLE_REPLACEMENT = new Set(['Underutilized']);

export type LaunchOrigin =
  | { readonly kind: 'provisioned' }
  | { readonly kind: 'replacement'; readonly reason: string; readonly replaced: readonly DisruptionMark[] }
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
  const marks = evidence.marksBetween(createdAt - MARK_WINDOW_MS, createdAt + 1_000);
  if (reason === undefined) {
    if (marks.length === 0) return { kind: 'provisioned' };
    const until = createdAt + LAUNCHING_EVENT_WAIT_MS;
    const marked = `${marks.length} node(s) were marked for disruption as its NodeClaim was created`;
    if (now < until)
      return { kind: 'awaiting', reason: `${marked}: waiting for a DisruptionLaunching Event on it`, until };
    return {
      kind: 'unclear',
      reason: `${marked}, and no DisruptionLaunching Event names it: a replacement, or a launch of provisioning in the same seconds`,
    };
  }
  const replaced = marks.filter((m) => m.reason.toLowerCase() === reason.toLowerCase() && m.nodeClaim !== claim.name);
  if (replaced.length === 0)
    return {
      kind: 'unclear',
      reason: `Karpenter launched it to replace nodes (${reason}), and the watcher did not see which were marked`,
    };
  if (SINGLE_REPLACEMENT.has(reason)) {
    const others = evidence
      .replacementsCreatedBetween(createdAt - MARK_WINDOW_MS, createdAt + MARK_WINDOW_MS, reason)
      .filter((n) => n !== claim.name);
    if (others.length > 0)
      return {
        kind: 'unclear',
        reason: `replacements ${[claim.name, ...others].sort().join(', ')} were created in the same seconds: which nodes each replaced is not known`,
      };
  }
  return { kind: 'replacement', reason, replaced };
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
      if (r.instanceType !== undefined) labels['node.kubernetes.io/instance-type'] = r.instanceType;
      if (r.zone !== undefined) labels['topology.kubernetes.io/zone'] = r.zone;
      if (r.capacityType !== undefined) labels['karpenter.sh/capacity-type'] = r.capacityType;
      if (r.nodePool !== undefined) labels['karpenter.sh/nodepool'] = r.nodePool;
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

// Which command of Karpenter's disruption launched a NodeClaim, if any, and which nodes it replaced
// (pkg/controllers/disruption/orchestration/queue.go). Karpenter marks none of it on the new
// NodeClaim (StartCommand): it first marks each node it disrupts (condition DisruptionReason=True,
// with its reason), then creates the replacements, and its queue's first reconcile, a second or two
// later, publishes `DisruptionLaunching` ("Launching NodeClaim: <reason>") on each replacement
// (waitOrTerminate). So a replacement is a NodeClaim with that Event, and what it replaced the nodes
// its command marked just before it was created. Marks of `Empty` and of delete-only commands
// launch nothing: a NodeClaim created beside them with no Event after a short wait is a
// provisioning launch.
import type { NodeClaimView } from '../node.ts';
import type { DisruptionEvidence, DisruptionMark } from './evidence.ts';
import { reasonOf, sameReason } from './reasons.ts';

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

/** Marks of commands that launch nothing (Emptiness deletes empty nodes) say nothing of a new NodeClaim. */
const canLaunch = (m: DisruptionMark) => reasonOf(m.reason).launches !== 'none';

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
  const ofReason = marks.filter((m) => sameReason(m.reason, reason) && m.nodeClaim !== claim.name);
  if (ofReason.length === 0)
    return {
      kind: 'unclear',
      reason: `Karpenter launched it to replace nodes (${reason}), and the watcher did not see which were marked`,
    };
  const others = () =>
    evidence
      .replacementsCreatedBetween(createdAt - MARK_WINDOW_MS, createdAt + MARK_WINDOW_MS, reason)
      .filter((n) => n !== claim.name);
  const { launches } = reasonOf(reason);
  // One replacement at most a command: another in the same window makes the replaced set ambiguous.
  if (launches === 'one-for-all') {
    const twins = others();
    if (twins.length > 0)
      return {
        kind: 'unclear',
        reason: `replacements ${[claim.name, ...twins].sort().join(', ')} were created in the same seconds: which nodes each replaced is not known`,
      };
  }
  // One node a command, and commands that follow each other within the window.
  if (launches === 'one-node-a-command' && ofReason.length > 1)
    return ownCommand(claim.name, createdAt, reason, ofReason, others(), evidence.createdOrder?.(claim.name));
  return { kind: 'replacement', reason, replaced: ofReason };
}

/**
 * Drift and health commands disrupt one node each and follow each other without a pause (the
 * disruption controller requeues at once after a command), so the window may hold several
 * commands' marks. Each command marks its node, then creates its replacements, so a replacement's
 * node is the last mark made before its creation. Where the watcher saw the marks and the creation
 * on its NodeClaim watch, that is their order there (one watch delivers changes in the order they
 * were written). Else by timestamps, whole seconds: a mark of a later second is a later command's,
 * and a mark of the creation's own second may be this command's or the next one's. The node is
 * named only where that leaves no doubt.
 */
function ownCommand(
  name: string,
  createdAt: number,
  reason: string,
  marks: readonly DisruptionMark[],
  otherReplacements: readonly string[],
  createdOrder: number | undefined,
): LaunchOrigin {
  if (createdOrder !== undefined && marks.every((m) => m.order !== undefined)) {
    const before = marks.filter((m) => m.order! < createdOrder);
    const last = before.reduce<DisruptionMark | undefined>(
      (a, m) => (a === undefined || m.order! > a.order! ? m : a),
      undefined,
    );
    if (last !== undefined) return { kind: 'replacement', reason, replaced: [last] };
  }
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

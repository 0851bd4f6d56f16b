// What the watcher sees of Karpenter's disruption, for the engine to tell a replacement from a
// provisioning launch (engine/disruption/queue.ts): the NodeClaims Karpenter marked for disruption,
// kept after they are gone (a replaced node is deleted once its replacement is initialized), and
// the DisruptionLaunching Events it publishes on replacements, and the ConsolidationCandidate and
// ConsolidationApproved Events that date and score a consolidation's decision. The Events are read
// from the `default` namespace, where Events of cluster-scoped objects such as NodeClaims are
// written, and only those: the server filters them by kind and reason.
import {
  type ApprovalFigures,
  type ConsolidationApproval,
  type DisruptionEvidence,
  type DisruptionMark,
  launchingReason,
  type NodeClaimView,
  parseApproval,
  type RecordAtMark,
} from '../../engine/index.ts';
import { type CacheDeps, cacheReflector } from '../../kube/cache-reflector.ts';
import type { Reflector } from '../../kube/reflector.ts';
import type { WatchSeen } from '../node-claims.ts';
import { type Timed, TimedEvents } from './timed-events.ts';

export const LAUNCHING_EVENTS_PATH = '/api/v1/namespaces/default/events';
export const LAUNCHING_EVENTS_SELECTOR = 'involvedObject.kind=NodeClaim,reason=DisruptionLaunching';
export const CANDIDATE_EVENTS_SELECTOR = 'involvedObject.kind=NodeClaim,reason=ConsolidationCandidate';
/** Balanced consolidation's approvals: on the candidate's NodeClaim (and Node, not read) for one node, on the NodePool for several. */
export const APPROVAL_EVENTS_SELECTOR = 'involvedObject.kind!=Node,reason=ConsolidationApproved';

export interface EventObject {
  metadata?: { name?: string; creationTimestamp?: string };
  involvedObject?: { kind?: string; name?: string };
  reason?: string;
  message?: string;
  lastTimestamp?: string;
  eventTime?: string;
}

/** One ConsolidationCandidate Event: the NodeClaim a consolidation computed a command with, and when it last said so. */
interface CandidateEvent {
  readonly nodeClaim: string;
  readonly at: number | undefined;
}

/** One ConsolidationApproved Event: the object it is on (`NodeClaim/x`, `NodePool/y`), when, and its figures. */
interface ApprovalEvent {
  readonly object: string;
  readonly at: number | undefined;
  readonly figures: ApprovalFigures | undefined;
}

/** Events kept per object: the command that marks a NodeClaim was computed (and approved) at one of its latest. */
const EVENTS_KEPT = 8;

/** When an Event last happened: Karpenter's recorder writes core/v1 Events (lastTimestamp), a series its eventTime. */
function eventTime(e: EventObject): number | undefined {
  const t = Date.parse(e.lastTimestamp ?? e.eventTime ?? e.metadata?.creationTimestamp ?? '');
  return Number.isNaN(t) ? undefined : t;
}

/** A ConsolidationCandidate Event as the watcher keeps it (and `explain` reads it live). */
export const candidateEvent = (e: EventObject): CandidateEvent => ({
  nodeClaim: e.involvedObject?.name ?? '',
  at: eventTime(e),
});

/** A ConsolidationApproved Event as the watcher keeps it (and `explain` reads it live). */
export const approvalEvent = (e: EventObject): ApprovalEvent => ({
  object: `${e.involvedObject?.kind ?? ''}/${e.involvedObject?.name ?? ''}`,
  at: eventTime(e),
  figures: parseApproval(e.message),
});

/** One DisruptionLaunching Event, reduced to the NodeClaim it names and Karpenter's reason. */
export interface LaunchingEvent {
  readonly nodeClaim: string;
  readonly reason: string | undefined;
}

/** How long marks are kept: a replacement is decided long before (its node registers within 15 minutes). */
export const MARK_RETENTION_MS = 60 * 60_000;
/** Marks kept at most, the oldest dropped first: a consolidation of a whole cluster marks each node once. */
export const MAX_MARKS = 20_000;

export interface ClaimSource {
  /** Every new or changed NodeClaim, with the order of the watch event it came in (none from a list). */
  subscribe(listener: (claim: NodeClaimView, seen: WatchSeen | undefined) => void): void;
  byName(name: string): NodeClaimView | undefined;
}

/** A node's record as the caches hold it now, kept with the node's mark (the churn it tells). */
export type RecordSource = (node: string) => RecordAtMark | undefined;

/**
 * A watch of Karpenter's Events in `default` of one reason, filtered by the server, each reduced
 * by `slim`. Optional: where the watcher may not read Events it warns once and goes on. An Event
 * that expires (an hour by default) leaves what was kept of it unless `remove` says otherwise: the
 * kept times are pruned with the marks.
 */
function eventsReflector<T>(
  deps: CacheDeps,
  resource: string,
  fieldSelector: string,
  o: { slim: (e: EventObject) => T; upsert: (event: T) => void; remove?: (event: T) => void },
): Reflector<T> {
  return cacheReflector(deps, LAUNCHING_EVENTS_PATH, {
    resource,
    fieldSelector,
    keyOf: (obj) => (obj as EventObject).metadata?.name ?? '',
    slim: (obj) => o.slim(obj as EventObject),
    handlers: { upsert: o.upsert, remove: o.remove ?? (() => {}) },
    optional: true,
  });
}

export class DisruptionWatch implements DisruptionEvidence {
  readonly reflector: Reflector<LaunchingEvent>;
  /** ConsolidationCandidate Events: when consolidation decided, so with which overlays (engine/disruption/validation.ts). */
  readonly candidates: Reflector<CandidateEvent>;
  /** ConsolidationApproved Events: Balanced consolidation's score of a command (engine/disruption/balanced.ts). */
  readonly approvals: Reflector<ApprovalEvent>;
  private readonly reasonOf = new Map<string, string>();
  /** By NodeClaim; pruned with the marks' retention. */
  private readonly candidateTimes = new TimedEvents<Timed>(EVENTS_KEPT, (a, b) => a.at === b.at);
  /** By object (`NodeClaim/x`, `NodePool/y`); pruned with the marks' retention. */
  private readonly approved = new TimedEvents<ConsolidationApproval>(
    EVENTS_KEPT,
    (a, b) => a.at === b.at && JSON.stringify(a.figures) === JSON.stringify(b.figures),
  );
  /** By NodeClaim, in the order they were marked (a Map keeps insertion order): pruned from the front. */
  private readonly marks = new Map<string, DisruptionMark>();
  /** The watch order of each NodeClaim's creation, where its ADDED event was seen; pruned as the marks. */
  private readonly created = new Map<string, { order: number; at: number }>();
  private readonly now: () => number;
  private readonly claims: ClaimSource;
  private readonly listeners: ((nodeClaim: string) => void)[] = [];

  private readonly recordOf: RecordSource | undefined;

  constructor(deps: CacheDeps, claims: ClaimSource, recordOf?: RecordSource) {
    this.now = deps.now;
    this.claims = claims;
    this.recordOf = recordOf;
    // Where the watcher may not read Events, every launch reads as before (no replacement is told).
    this.reflector = eventsReflector(deps, 'disruption-events', LAUNCHING_EVENTS_SELECTOR, {
      slim: (e) => ({ nodeClaim: e.involvedObject?.name ?? '', reason: launchingReason(e.message) }),
      upsert: (event) => {
        if (event.nodeClaim === '' || event.reason === undefined) return;
        const known = this.reasonOf.get(event.nodeClaim);
        this.reasonOf.set(event.nodeClaim, event.reason);
        if (known === undefined) for (const l of this.listeners) l(event.nodeClaim);
      },
      // Events expire (an hour by default): the replacement was decided long before.
      remove: (event) => this.reasonOf.delete(event.nodeClaim),
    });
    this.candidates = eventsReflector(deps, 'consolidation-events', CANDIDATE_EVENTS_SELECTOR, {
      slim: candidateEvent,
      upsert: (event) => this.candidateSeen(event),
    });
    this.approvals = eventsReflector(deps, 'approval-events', APPROVAL_EVENTS_SELECTOR, {
      slim: approvalEvent,
      upsert: (event) => {
        if (event.at === undefined || event.figures === undefined) return;
        this.approved.add(event.object, { at: event.at, figures: event.figures });
        this.prune();
      },
    });
    claims.subscribe((claim, seen) => this.observe(claim, seen));
  }

  private candidateSeen(event: CandidateEvent): void {
    if (event.nodeClaim === '' || event.at === undefined) return;
    this.candidateTimes.add(event.nodeClaim, { at: event.at });
    this.prune();
  }

  candidateAt(nodeClaim: string, notAfter: number): number | undefined {
    return this.candidateTimes.latest(nodeClaim, notAfter)?.at;
  }

  approvalsBetween(kind: 'NodeClaim' | 'NodePool', name: string, from: number, to: number): ConsolidationApproval[] {
    return this.approved.between(`${kind}/${name}`, from, to);
  }

  /** Called when a NodeClaim is first known to be a replacement: its node may be decidable now. */
  onReplacement(listener: (nodeClaim: string) => void): void {
    this.listeners.push(listener);
  }

  private observe(claim: NodeClaimView, seen: WatchSeen | undefined): void {
    // Its creation, seen on the watch in the order of the marks' changes.
    if (seen?.added) {
      this.created.set(claim.name, { order: seen.order, at: claim.createdAt ?? this.now() });
      this.prune();
    }
    if (claim.disruptionReason === undefined || claim.disruptionMarkedAt === undefined) return;
    const known = this.marks.get(claim.name);
    if (known?.markedAt === claim.disruptionMarkedAt && known.reason === claim.disruptionReason) return;
    this.marks.delete(claim.name);
    const record = claim.nodeName === undefined ? undefined : this.recordOf?.(claim.nodeName);
    this.marks.set(claim.name, {
      nodeClaim: claim.name,
      ...(claim.nodeName !== undefined ? { node: claim.nodeName } : {}),
      reason: claim.disruptionReason,
      markedAt: claim.disruptionMarkedAt,
      labels: claim.labels,
      // Seen as it was made, on the watch (a list gives no order).
      ...(seen !== undefined ? { order: seen.order } : {}),
      ...(record !== undefined ? { record } : {}),
      ...(claim.allocatable !== undefined ? { allocatable: claim.allocatable } : {}),
    });
    this.prune();
  }

  private prune(): void {
    const horizon = this.now() - MARK_RETENTION_MS;
    for (const [name, mark] of this.marks) {
      if (mark.markedAt >= horizon && this.marks.size <= MAX_MARKS) break;
      this.marks.delete(name);
    }
    for (const [name, c] of this.created) {
      if (c.at >= horizon && this.created.size <= MAX_MARKS) break;
      this.created.delete(name);
    }
    this.candidateTimes.prune(horizon, MAX_MARKS);
    this.approved.prune(horizon, MAX_MARKS);
  }

  launching(nodeClaim: string): string | undefined {
    return this.reasonOf.get(nodeClaim);
  }

  createdOrder(nodeClaim: string): number | undefined {
    return this.created.get(nodeClaim)?.order;
  }

  marksBetween(from: number, to: number): readonly DisruptionMark[] {
    const out: DisruptionMark[] = [];
    for (const mark of this.marks.values()) if (mark.markedAt >= from && mark.markedAt <= to) out.push(mark);
    return out;
  }

  replacementsCreatedBetween(from: number, to: number, reason: string): readonly string[] {
    const out: string[] = [];
    for (const [name, r] of this.reasonOf) {
      if (r.toLowerCase() !== reason.toLowerCase()) continue;
      const createdAt = this.claims.byName(name)?.createdAt;
      if (createdAt !== undefined && createdAt >= from && createdAt <= to) out.push(name);
    }
    return out;
  }

  /** How many marks are kept (a gauge of memory). */
  get markCount(): number {
    return this.marks.size;
  }
}

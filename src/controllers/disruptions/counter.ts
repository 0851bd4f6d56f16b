// veneer_nodewatcher_recorded_disruptions_total{reason, overlay_state}: a recorded node that
// Karpenter's disruption removed, counted when the node goes, by the reason on its NodeClaim and
// by what has become of the overlay its record names (engine/disruption/churn.ts).
//
// Karpenter marks the candidates (the NodeClaim's DisruptionReason condition) before it launches
// their replacement, and deletes the Node before the NodeClaim; the two watches may deliver those
// in either order, so the reason is kept by node name from the mark, and for a while after the
// NodeClaim goes. A mark Karpenter clears (a command it abandoned) is forgotten. Only the leader
// counts; every replica keeps the marks, so a new leader counts the removals it sees.
import {
  DISRUPTION_REASONS,
  OVERLAY_STATES_AT_DISRUPTION,
  overlayStateAtDisruption,
  reasonOf,
  type NodeClaimView,
  type NodeView,
  type OverlayView,
  type RecordKeys,
} from '../../engine/index.ts';
import type { LeaderRunnable } from '../../kube/manager.ts';
import type { Metrics } from '../../metrics.ts';
import type { ControllerContext } from '../context.ts';

/** How long a mark outlives its NodeClaim, for a Node removal the watch delivers late. */
export const MARK_GRACE_MS = 10 * 60_000;

interface DisruptionCounterOptions {
  metrics: Metrics;
  keys: RecordKeys;
  /** The overlay a record names (by its label value), as the cluster has it now. */
  overlay: (nameLabelValue: string) => OverlayView | undefined;
  /** Whether that overlay is selected and active now. */
  counts: (overlay: OverlayView) => boolean;
  /** A recorded node disrupted after the overlay its record names changed or went (the NodeOverlay's Event). */
  churned?: (
    node: NodeView,
    overlay: OverlayView | { name: string },
    state: 'changed' | 'gone',
    reason: string,
  ) => void;
  now?: () => number;
}

/** The counter, fed by the caches' NodeClaim and node watches; a churn is told by the NodeOverlay's Event. */
export function disruptions(ctx: ControllerContext): DisruptionCounter {
  const { caches, events, now } = ctx;
  const counter = new DisruptionCounter({
    metrics: ctx.metrics,
    keys: ctx.settings.keys,
    overlay: (value) => caches.overlays.byLabelValue(value),
    counts: (ov) => caches.overlays.counting(now()).some((a) => a.name === ov.name),
    churned: (node, overlay, state, reason) => events.churned(node, overlay, state, reason),
    now,
  });
  caches.nodeClaims.subscribe((claim) => counter.claimSeen(claim));
  caches.nodeClaims.onRemoved((claim) => counter.claimGone(claim));
  caches.nodes.onRemoved((node) => counter.nodeGone(node));
  return counter;
}

export class DisruptionCounter implements LeaderRunnable {
  readonly name = 'disruptions';
  private readonly o: DisruptionCounterOptions;
  private readonly now: () => number;
  private leading = false;
  /** Node name -> the reason its NodeClaim was marked with, and when that NodeClaim went (if it did). */
  private readonly marks = new Map<string, { reason: string; claimGoneAt?: number }>();

  constructor(opts: DisruptionCounterOptions) {
    this.o = opts;
    this.now = opts.now ?? Date.now;
    for (const reason of DISRUPTION_REASONS)
      for (const state of OVERLAY_STATES_AT_DISRUPTION)
        opts.metrics.recordedDisruptions.inc({ reason, overlay_state: state }, 0);
  }

  /** A NodeClaim as its watch shows it now. */
  claimSeen(claim: NodeClaimView): void {
    if (claim.nodeName === undefined) return;
    if (claim.disruptionReason !== undefined) this.marks.set(claim.nodeName, { reason: claim.disruptionReason });
    else this.marks.delete(claim.nodeName);
  }

  claimGone(claim: NodeClaimView): void {
    const mark = claim.nodeName === undefined ? undefined : this.marks.get(claim.nodeName);
    if (mark) mark.claimGoneAt = this.now();
    this.prune();
  }

  /** A Node the watch shows removed. */
  nodeGone(node: NodeView): void {
    const mark = this.marks.get(node.name);
    this.marks.delete(node.name);
    const overlay = node.labels[this.o.keys.matchingOverlay];
    if (!this.leading || !mark || node.labels[this.o.keys.influenced] !== 'true' || !overlay) return;
    const current = this.o.overlay(overlay);
    const state = overlayStateAtDisruption(current, current !== undefined && this.o.counts(current), node.told);
    this.o.metrics.recordedDisruptions.inc({ reason: reasonOf(mark.reason).label, overlay_state: state });
    if (state !== 'counting')
      this.o.churned?.(node, current ?? { name: node.told?.overlay ?? overlay }, state, mark.reason);
  }

  lead(): void {
    this.leading = true;
  }

  follow(): void {
    this.leading = false;
  }

  private prune(): void {
    const now = this.now();
    for (const [node, mark] of this.marks)
      if (mark.claimGoneAt !== undefined && now - mark.claimGoneAt > MARK_GRACE_MS) this.marks.delete(node);
  }
}

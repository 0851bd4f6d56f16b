// A recorded node that Karpenter's disruption removed, told by Karpenter's reason and by what has
// become of the overlay its record names: still counting on the same terms, changed (its weight,
// price or price adjustment, or it no longer counts: unselected, invalid, not ready), or gone
// (deleted or being deleted). An overlay that changes or goes makes Karpenter reconsider
// consolidation at once, so `changed` and `gone` show the churn an overlay caused.
import type { DecisionStory } from './record.ts';
import type { OverlayView } from './overlay.ts';

/** Karpenter's DisruptionReason values (v1.14: Underutilized, Empty, Drifted; v1.15 adds Unhealthy), lower-cased; any other is `other`. */
export const DISRUPTION_REASONS = ['underutilized', 'empty', 'drifted', 'unhealthy', 'other'] as const;
export type DisruptionReasonLabel = (typeof DISRUPTION_REASONS)[number];

export const OVERLAY_STATES_AT_DISRUPTION = ['counting', 'changed', 'gone'] as const;
export type OverlayStateAtDisruption = (typeof OVERLAY_STATES_AT_DISRUPTION)[number];

export function disruptionReasonLabel(reason: string): DisruptionReasonLabel {
  const lower = reason.toLowerCase();
  return (DISRUPTION_REASONS as readonly string[]).includes(lower) ? (lower as DisruptionReasonLabel) : 'other';
}

/**
 * The state of the overlay a record names, now: `current` is that overlay as the cluster has it
 * (undefined when there is none), `counts` whether it is selected and active, `story` the record's
 * decision annotation (its terms at the launch), when known.
 */
export function overlayStateAtDisruption(
  current: OverlayView | undefined,
  counts: boolean,
  story: DecisionStory | undefined,
): OverlayStateAtDisruption {
  if (current === undefined || current.deletingAt !== undefined) return 'gone';
  if (!counts) return 'changed';
  if (story === undefined || story.overlay !== current.name) return 'counting';
  const sameTerms =
    (story.weight === undefined || story.weight === current.weight) &&
    story.price === current.price &&
    story.priceAdjustment === current.priceAdjustment;
  return sameTerms ? 'counting' : 'changed';
}

// Churn: a recorded node that Karpenter's disruption removed, told by what has become of the
// overlay its record names: still counting on the same terms, changed (its weight, price or price
// adjustment, or it no longer counts: unselected, invalid, not ready), or gone (deleted or being
// deleted). An overlay that changes or goes makes Karpenter reconsider consolidation at once
// (nodeoverlay/controller.go, MarkUnconsolidated), so `changed` and `gone` show the churn an
// overlay caused: counted by the leader (controllers/disruptions/), and kept in a replacement's
// record once the nodes it replaced are gone.
import type { ChurnStory } from '../effect/types.ts';
import type { OverlayIndex } from '../overlay-index.ts';
import type { OverlayView } from '../overlay.ts';
import type { DecisionStory, RecordKeys, RecordTold } from '../record.ts';
import type { Labels } from '../requirements.ts';

export const OVERLAY_STATES_AT_DISRUPTION = ['counting', 'changed', 'gone'] as const;
type OverlayStateAtDisruption = (typeof OVERLAY_STATES_AT_DISRUPTION)[number];

/**
 * The state of the overlay a record names, now: `current` is that overlay as the cluster has it
 * (undefined when there is none), `counts` whether it is selected and active, `story` the record's
 * decision annotation (its terms at the launch), when known.
 */
export function overlayStateAtDisruption(
  current: OverlayView | undefined,
  counts: boolean,
  story: OverlayTerms | undefined,
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

/** What a record's story says of the overlay it names: its name and terms at the launch. */
type OverlayTerms = Pick<DecisionStory, 'overlay' | 'weight' | 'price' | 'priceAdjustment'>;

/**
 * A replaced node's record as the watcher saw it when Karpenter marked the node, reduced to what
 * the churn needs: marks outlive their nodes for an hour, so they keep no labels or story.
 */
export interface RecordAtMark {
  /** The matching-overlay label's value (a long name shortened). */
  readonly overlayLabel: string;
  readonly terms?: OverlayTerms;
}

/** The record of an influenced node, as a mark keeps it; undefined for a node no overlay influenced. */
export function recordAtMark(
  labels: Labels,
  told: RecordTold | undefined,
  keys: Pick<RecordKeys, 'influenced' | 'matchingOverlay'>,
): RecordAtMark | undefined {
  const overlayLabel = labels[keys.matchingOverlay];
  if (overlayLabel === undefined || labels[keys.influenced] !== 'true') return undefined;
  if (told === undefined) return { overlayLabel };
  const { overlay, weight, price, priceAdjustment } = told;
  return {
    overlayLabel,
    terms: {
      overlay,
      ...(weight !== undefined ? { weight } : {}),
      ...(price !== undefined ? { price } : {}),
      ...(priceAdjustment !== undefined ? { priceAdjustment } : {}),
    },
  };
}

/**
 * Of the replaced nodes, those whose record says an overlay influenced them, by that overlay and
 * its state at `at` (the replacement's launch), the `counting` ones left out: the churn the
 * overlay's change or removal caused, as the replacement's record keeps it after the replaced
 * nodes are gone.
 */
export function churnOf(records: readonly (RecordAtMark | undefined)[], index: OverlayIndex, at: number): ChurnStory[] {
  const byOverlay = new Map<string, ChurnStory>();
  let active: ReturnType<OverlayIndex['activeVersionsAt']> | undefined;
  for (const record of records) {
    if (record === undefined) continue;
    active ??= index.activeVersionsAt(at);
    const version = active.find((v) => v.overlay.nameLabelValue === record.overlayLabel);
    const state = overlayStateAtDisruption(
      version?.overlay,
      version?.selected === true && version.ineligible === undefined,
      record.terms,
    );
    if (state === 'counting') continue;
    const overlay = record.terms?.overlay ?? version?.overlay.name ?? record.overlayLabel;
    const key = `${overlay}\u0000${state}`;
    const known = byOverlay.get(key);
    byOverlay.set(key, { overlay, state, nodes: (known?.nodes ?? 0) + 1 });
  }
  return [...byOverlay.values()];
}

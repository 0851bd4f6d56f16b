// The overlays Karpenter applied at a moment, and the two worlds they make. At a moment (a launch's,
// or one a consolidation may have priced its command at: ../disruption/validation.ts) the overlays
// in force are those the index holds then; Karpenter applies those it validated and has not deleted
// (the counted overlays). The world with them prices as Karpenter did; the world without them drops
// the selected ones and keeps every other. Each list is one shared array per distinct set, so that
// the replay's memos, which key on identity (memo.ts), find what was worked out at another moment
// or for another node with the same overlays.
import { Interned } from '../interned.ts';
import { idOf, Memo, UNANCHORED } from '../memo.ts';
import type { OverlayIndex, OverlayVersion } from '../overlay-index.ts';
import type { OverlayView } from '../overlay.ts';
import { Abstain } from './abstain.ts';
import { type Revalidated, revalidatedWithout } from './conflicts.ts';
import type { ValidationSetting } from './offerings-met.ts';
import type { CountedOverlay } from './types.ts';
import type { Worlds } from './worlds.ts';

const NONE: readonly never[] = Object.freeze([]);
const SHARED_LISTS = new Interned<readonly CountedOverlay[]>(256);
const SHARED_DOUBTS = new Interned<readonly OverlayView[]>(256);
/**
 * Of the overlays in force, those Karpenter applied, selected or not; with `revalidated`, those
 * whose verdict Karpenter's validation gives differently without the selected ones (conflicts.ts)
 * count in one world only.
 */
export function countedOf(active: readonly OverlayVersion[], revalidated?: Revalidated): readonly CountedOverlay[] {
  const counted: CountedOverlay[] = [];
  // Keyed by each overlay's identity, whether it is selected and in which world it counts; the list is made only when new.
  let key = '';
  for (const v of active) {
    const change = revalidated?.get(v.overlay);
    if (v.ineligible === undefined) {
      const only = change === 'refused' ? ('with' as const) : undefined;
      key += `${idOf(v.overlay)}${v.selected ? 's' : ''}${only ? 'w' : ''},`;
      counted.push({ overlay: v.overlay, selected: v.selected, ...(only ? { only } : {}) });
    } else if (change === 'accepted' && pricesOfferings(v.overlay)) {
      key += `${idOf(v.overlay)}o,`;
      counted.push({ overlay: v.overlay, selected: false, only: 'without' });
    }
  }
  if (key === '') return NONE;
  return SHARED_LISTS.of(key, () => Object.freeze(counted.map((c) => Object.freeze(c))));
}

/** Accepted, it would price the offerings it meets: it changes a price and every requirement is valid. */
const pricesOfferings = (o: OverlayView) =>
  (o.price !== undefined || o.priceAdjustment !== undefined) && o.requirements.every((r) => r.invalid === undefined);

const WORLDS = new Memo<readonly CountedOverlay[], object, Worlds>(
  (counted) => ({
    with: Object.freeze(counted.filter((c) => c.only !== 'without').map((c) => c.overlay)),
    without: Object.freeze(counted.filter((c) => !c.selected && c.only !== 'with').map((c) => c.overlay)),
    selected: new Set(counted.filter((c) => c.selected).map((c) => c.overlay)),
  }),
  1,
);

/** The overlays of both worlds, one object per counted list. */
export const worldsOf = (counted: readonly CountedOverlay[]): Worlds => WORLDS.of(counted, UNANCHORED);

const ALONE = new Memo<OverlayView, object, readonly OverlayView[]>((overlay) => Object.freeze([overlay]), 1);

/** A world of one overlay: what it would price on its own. */
export const alone = (overlay: OverlayView): readonly OverlayView[] => ALONE.of(overlay, UNANCHORED);

/** What Karpenter's validation is replayed with, besides the overlays and NodePools at the moment. */
export type CatalogContext = Omit<ValidationSetting, 'pools'>;

/**
 * The overlays in force at a moment as both worlds count them. Where a selected overlay shares a
 * weight with one Karpenter refused as a Conflict, Karpenter's validation is replayed without the
 * selected ones (conflicts.ts); where that replay abstains, or nothing is known to replay it with,
 * the overlays in doubt are handed on and a replay they could touch abstains.
 */
export function overlaysInForce(
  index: OverlayIndex,
  t: number,
  context: CatalogContext | undefined,
): { counted: readonly CountedOverlay[]; conflicted: readonly OverlayView[] } {
  const active = index.activeVersionsAt(t);
  const doubted = verdictsInDoubt(active);
  const setting = context && { ...context, pools: index.nodePools.allAt(t) };
  if (doubted.length === 0 || setting === undefined) return { counted: countedOf(active), conflicted: doubted };
  const revalidated = revalidatedWithout(active, setting);
  if (revalidated instanceof Abstain) return { counted: countedOf(active), conflicted: doubted };
  return { counted: countedOf(active, revalidated), conflicted: NONE };
}

/**
 * The overlays not selected whose verdict Karpenter could give differently without the selected
 * ones. Its NodeOverlay controller validates overlays one by one in its order (weight, then the
 * name that sorts later) against those it accepted before, refusing one that prices an offering
 * differently from an accepted one of its weight. So where a selected overlay shares a weight
 * with a refused one, that one may be accepted without the selected overlays, and then refuse any
 * overlay of that weight that comes after it.
 */
export function verdictsInDoubt(active: readonly OverlayVersion[]): readonly OverlayView[] {
  const doubt: OverlayView[] = [];
  for (const weight of new Set(active.filter((v) => v.selected).map((v) => v.overlay.weight))) {
    const atWeight = active.filter((v) => !v.selected && v.overlay.weight === weight);
    const refused = atWeight.filter((v) => v.overlay.validation?.reason === 'Conflict').map((v) => v.overlay.name);
    if (refused.length === 0) continue;
    // biome-ignore lint/complexity/useMathMinMax: names, compared as strings; Math.max would make them NaN.
    const first = refused.reduce((a, b) => (a > b ? a : b));
    for (const v of atWeight) if (v.overlay.name <= first) doubt.push(v.overlay);
  }
  return doubt.length === 0 ? NONE : SHARED_DOUBTS.of(doubt.map(idOf).join(','), () => Object.freeze(doubt));
}

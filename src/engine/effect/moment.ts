// The overlays Karpenter applied at a moment, and the two worlds they make. At a moment (a launch's,
// or one a consolidation may have priced its command at: ../disruption/validation.ts) the overlays
// in force are those the index holds then; Karpenter applies those it validated and has not deleted
// (the counted overlays). The world with them prices as Karpenter did; the world without them drops
// the selected ones and keeps every other. Each list is one shared array per distinct set, so that
// the replay's memos, which key on identity (memo.ts), find what was worked out at another moment
// or for another node with the same overlays.
import { Interned } from '../interned.ts';
import { idOf, Memo, UNANCHORED } from '../memo.ts';
import type { OverlayVersion } from '../overlay-index.ts';
import type { OverlayView } from '../overlay.ts';
import type { CountedOverlay } from './types.ts';
import type { Worlds } from './worlds.ts';

const NONE: readonly never[] = Object.freeze([]);
const SHARED_LISTS = new Interned<readonly CountedOverlay[]>(256);
const SHARED_DOUBTS = new Interned<readonly OverlayView[]>(256);
/** Of the overlays in force, those Karpenter applied, selected or not. */
export function countedOf(active: readonly OverlayVersion[]): readonly CountedOverlay[] {
  // Keyed by each overlay's identity and whether it is selected; the list is made only when new.
  let key = '';
  for (const v of active) if (v.ineligible === undefined) key += `${idOf(v.overlay)}${v.selected ? 's' : ''},`;
  if (key === '') return NONE;
  return SHARED_LISTS.of(key, () =>
    Object.freeze(
      active
        .filter((v) => v.ineligible === undefined)
        .map((v) => Object.freeze({ overlay: v.overlay, selected: v.selected })),
    ),
  );
}

const WORLDS = new Memo<readonly CountedOverlay[], object, Worlds>(
  (counted) => ({
    with: Object.freeze(counted.map((c) => c.overlay)),
    without: Object.freeze(counted.filter((c) => !c.selected).map((c) => c.overlay)),
  }),
  1,
);

/** The overlays of both worlds, one object per counted list. */
export const worldsOf = (counted: readonly CountedOverlay[]): Worlds => WORLDS.of(counted, UNANCHORED);

const ALONE = new Memo<OverlayView, object, readonly OverlayView[]>((overlay) => Object.freeze([overlay]), 1);

/** A world of one overlay: what it would price on its own. */
export const alone = (overlay: OverlayView): readonly OverlayView[] => ALONE.of(overlay, UNANCHORED);

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

// Karpenter's NodeOverlay validation replayed for the world without the selected overlays
// (pkg/controllers/nodeoverlay, v1.14.3 and v1.15.0 alike: controller.go Reconcile and
// validateAndUpdateInstanceTypeOverrides, store.go isOfferingUpdateConflicting and
// isCapacityUpdateConflicting). Karpenter validates the overlays in its order (weight, then the
// name that sorts later) into a store per NodePool, instance type and offering: an overlay that
// prices an offering an accepted overlay of its weight already prices, or sets a resource the last
// accepted capacity overlay of its weight on that type set, is a Conflict and applies nowhere.
// An overlay's verdict thus turns only on the overlays of its weight. Where a selected overlay
// shares a weight with one Karpenter refused as a Conflict, the same loop over that weight's
// overlays without the selected ones says what would apply there: one refused may be accepted,
// and then refuse one accepted after it.
//
// The loop is first run with the selected overlays: it must give the verdicts Karpenter wrote,
// or what it was given (NodePools, the catalog, what is known of each type) is not what Karpenter
// saw, and the replay abstains. It abstains too where an answer would turn on what the watcher
// does not see: a zone-id, where an overlay meets offerings (offerings-met.ts: a type's value of a
// key an overlay names), or which capacity types a type is offered as (a reserved offering exists
// only with a capacity reservation).
import { Interned } from '../interned.ts';
import { idOf, Memo } from '../memo.ts';
import type { NodePoolView } from '../nodepool.ts';
import type { OverlayVersion } from '../overlay-index.ts';
import { outranks, type OverlayView } from '../overlay.ts';
import { ZONE_ID } from '../well-known.ts';
import { Abstain, abstain } from './abstain.ts';
import { offeringsMet, pricing, type Touch, type ValidationSetting } from './offerings-met.ts';
import type { PriceBook } from './prices.ts';

/** The overlays not selected whose verdict differs without the selected ones. */
export type Revalidated = ReadonlyMap<OverlayView, 'accepted' | 'refused'>;

type Verdict = 'accepted' | 'conflict';
const NO_NAMES: ReadonlySet<string> = new Set();

/**
 * The verdicts that change without the selected overlays, at every weight where a selected one
 * shares a weight with an overlay Karpenter refused as a Conflict; an empty map where none does.
 */
export function revalidatedWithout(
  active: readonly OverlayVersion[],
  setting: ValidationSetting,
): Revalidated | Abstain {
  const changed = new Map<OverlayView, 'accepted' | 'refused'>();
  for (const weight of weightsInDoubt(active)) {
    const group = active
      .filter((v) => v.overlay.weight === weight)
      .sort((a, b) => (outranks(a.overlay, b.overlay) ? -1 : 1));
    const pools = SHARED_POOLS.of(setting.pools.map(idOf).join(','), () => Object.freeze([...setting.pools]));
    const verdicts = GROUPS.of(setting.prices, { ...groupInput(group), ...setting, pools });
    if (!(verdicts instanceof Map)) return verdicts;
    for (const [overlay, verdict] of verdicts) changed.set(overlay, verdict);
  }
  return changed;
}

/** Weights where a selected overlay Karpenter accepted (or may have) meets one not selected that it refused as a Conflict. */
function weightsInDoubt(active: readonly OverlayVersion[]): Set<number> {
  const selected = new Set<number>();
  const refused = new Set<number>();
  for (const v of active) {
    const verdict = verdictOf(v.overlay);
    if (v.selected && verdict !== 'conflict' && verdict !== 'skipped') selected.add(v.overlay.weight);
    if (!v.selected && verdict === 'conflict') refused.add(v.overlay.weight);
  }
  return new Set([...selected].filter((w) => refused.has(w)));
}

/** Karpenter's verdict in the overlay's generation; 'skipped': refused before the loop (RuntimeValidation); undefined: not known. */
function verdictOf(o: OverlayView): Verdict | 'skipped' | undefined {
  const v = o.validation;
  if (v === undefined || o.deletingAt !== undefined) return undefined;
  if (o.generation !== undefined && (v.observedGeneration === undefined || v.observedGeneration < o.generation))
    return undefined;
  if (v.status === 'True') return 'accepted';
  if (v.status !== 'False') return undefined;
  return v.reason === 'Conflict' ? 'conflict' : 'skipped';
}

/** One weight's overlays in Karpenter's order, each with whether it is selected. */
interface GroupInput {
  readonly overlays: readonly OverlayView[];
  /** The names of the selected ones. */
  readonly selected: ReadonlySet<string>;
}

function groupInput(group: readonly OverlayVersion[]): GroupInput {
  const names = group.filter((v) => v.selected).map((v) => v.overlay.name);
  const overlays = SHARED_OVERLAYS.of(group.map((v) => idOf(v.overlay)).join(','), () =>
    Object.freeze(group.map((v) => v.overlay)),
  );
  return { overlays, selected: names.length === 0 ? NO_NAMES : new Set(names) };
}

/**
 * Kept per price book (the catalog's) and every other input, each list one shared array per
 * distinct value so that the memo's key finds it again: decisions at one moment share the work.
 */
const GROUPS = new Memo<PriceBook, GroupInput & ValidationSetting, Map<OverlayView, 'accepted' | 'refused'> | Abstain>(
  (_, input) => replayGroup(input),
  32,
);
const SHARED_OVERLAYS = new Interned<readonly OverlayView[]>(256);
const SHARED_POOLS = new Interned<readonly NodePoolView[]>(64);

/** What a type may be offered as: on-demand always; spot for almost every type; reserved only with a reservation. */
const OFFERED = [['on-demand'], ['on-demand', 'spot'], ['on-demand', 'spot', 'reserved']] as const;

function replayGroup(input: GroupInput & ValidationSetting): Map<OverlayView, 'accepted' | 'refused'> | Abstain {
  const { overlays, selected } = input;
  const written = new Map<OverlayView, Verdict>();
  for (const o of overlays) {
    const verdict = verdictOf(o);
    if (verdict === undefined)
      return abstain(
        'conflict',
        `Karpenter has not validated overlay ${o.name} in its generation, and its verdict decides those of its weight`,
      );
    if (verdict !== 'skipped') written.set(o, verdict);
    const byZoneId = o.requirements.find((r) => r.key === ZONE_ID);
    if (byZoneId)
      return abstain(
        'conflict',
        `overlay ${o.name} names ${ZONE_ID}, which an offering carries only where its NodeClass has a subnet: which overlays of its weight meet on one is not replayed`,
      );
  }
  const inLoop = [...written.keys()];
  const touches = offeringsMet(inLoop, input);
  if (touches instanceof Abstain) return touches;
  // Of what each type may be offered as, what is consistent with the verdicts Karpenter wrote.
  const consistent = OFFERED.filter((offered) => {
    const replayed = validate(inLoop, touches, offered);
    return [...written].every(([o, verdict]) => replayed.get(o) === verdict);
  });
  if (consistent.length === 0)
    return abstain(
      'conflict',
      `Karpenter's validation replayed with every overlay of weight ${overlays[0]!.weight} does not give the verdicts Karpenter wrote: it saw NodePools or instance types other than these`,
    );
  const remaining = inLoop.filter((o) => !selected.has(o.name));
  const answers = consistent.map((offered) => validate(remaining, touches, offered));
  const changed = new Map<OverlayView, 'accepted' | 'refused'>();
  for (const o of remaining) {
    const without = new Set(answers.map((a) => a.get(o)));
    if (without.size > 1)
      return abstain(
        'conflict',
        `without the selected overlays, whether overlay ${o.name} is a Conflict turns on which capacity types its types are offered as`,
      );
    const [after] = without;
    if (after !== written.get(o)) changed.set(o, after === 'accepted' ? 'accepted' : 'refused');
  }
  return changed;
}

/** controller.go's loop over one weight's overlays, each type offered as `offered`. */
function validate(
  overlays: readonly OverlayView[],
  touches: ReadonlyMap<OverlayView, Touch[]>,
  offered: readonly string[],
): Map<OverlayView, Verdict> {
  const priced = new Set<string>();
  const lastCapacity = new Map<string, readonly string[]>();
  const verdicts = new Map<OverlayView, Verdict>();
  for (const o of overlays) {
    const places = touches
      .get(o)!
      .map((t) => ({ at: t.at, offerings: t.offerings.filter((of) => offered.includes(of.capacityType)) }))
      .filter((t) => t.offerings.length > 0);
    const priceConflict =
      pricing(o) && places.some((t) => t.offerings.some((of) => priced.has(`${t.at}|${of.capacityType}|${of.zone}`)));
    const capacity = o.capacity ?? [];
    const capacityConflict =
      capacity.length > 0 && places.some((t) => lastCapacity.get(t.at)?.some((r) => capacity.includes(r)));
    if (priceConflict || capacityConflict) {
      verdicts.set(o, 'conflict');
      continue;
    }
    verdicts.set(o, 'accepted');
    for (const t of places) {
      if (pricing(o)) for (const of of t.offerings) priced.add(`${t.at}|${of.capacityType}|${of.zone}`);
      if (capacity.length > 0) lastCapacity.set(t.at, capacity);
    }
  }
  return verdicts;
}

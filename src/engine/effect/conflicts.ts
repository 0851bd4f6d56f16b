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
// does not see: a type's value of a key an overlay names, zones, or which capacity types a type is
// offered as (a reserved offering exists only with a capacity reservation).
import { KarpenterView } from '../karpenter-view.ts';
import { Interned } from '../interned.ts';
import { idOf, Memo } from '../memo.ts';
import type { NodePoolView } from '../nodepool.ts';
import type { OverlayVersion } from '../overlay-index.ts';
import { outranks, type OverlayView } from '../overlay.ts';
import type { ProviderKeys } from '../providers.ts';
import { combinedOperator, type Requirement, requirementPasses } from '../requirements.ts';
import { CAPACITY_TYPE, REGION, ZONE, ZONE_ID } from '../well-known.ts';
import { Abstain, abstain } from './abstain.ts';
import { type CandidateType, internedCandidate } from './candidates.ts';
import type { PriceBook } from './prices.ts';
import type { InstanceLabels } from './types.ts';

/** What Karpenter's loop reads besides the overlays: every NodePool, and each instance type of the region. */
export interface ValidationSetting {
  readonly pools: readonly NodePoolView[];
  /** The region's catalog is the price book's: Karpenter's AWS provider lists every type it prices. */
  readonly prices: PriceBook;
  readonly provider: ProviderKeys;
  readonly instanceLabels: InstanceLabels | undefined;
}

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

/** Where an overlay prices or sets capacity: per NodePool and type, the offerings it meets (capacity type, zone). */
interface Touch {
  readonly at: string;
  readonly offerings: readonly { readonly capacityType: string; readonly zone: string }[];
  /** Whether it meets them turns on a value of the type's that is not known. */
  readonly unsure: boolean;
}

const inLoopOf = (written: ReadonlyMap<OverlayView, Verdict>) => [...written.keys()];

/** Every zone of the region, as the AWS provider finds them (every zone any type is offered in), where an overlay names zones. */
function zonesOf(
  overlays: readonly OverlayView[],
  catalog: readonly string[],
  prices: PriceBook,
): readonly string[] | Abstain {
  const zonal = overlays.find((o) => o.requirements.some((r) => r.key === ZONE));
  if (!zonal) return ANY_ZONE;
  if (prices.offeredZones === undefined)
    return abstain(
      'conflict',
      `overlay ${zonal.name} names zones, and the price source (${prices.source}) does not say which zones each type is offered in`,
    );
  const zones = new Set<string>();
  for (const name of catalog) for (const z of prices.offeredZones(name) ?? []) zones.add(z);
  return [...zones].sort();
}

/** Zones left out: no overlay of the weight names one, so every zone's offering is met alike. */
const ANY_ZONE: readonly string[] = Object.freeze(['']);

const CAPACITY_TYPES = ['on-demand', 'spot', 'reserved'] as const;
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
  const catalog = input.prices.instanceTypes?.();
  if (catalog === undefined)
    return abstain(
      'conflict',
      `the price source (${input.prices.source}) does not list its instance types: Karpenter's validation of the overlays of one weight cannot be replayed`,
    );
  const types = catalog.map((name) =>
    internedCandidate(name, NO_LABELS, input.instanceLabels?.get(name), input.provider.instanceTypeKeys),
  );
  const zones = zonesOf(inLoopOf(written), catalog, input.prices);
  if (zones instanceof Abstain) return zones;
  const touches = new Map<OverlayView, Touch[]>();
  for (const o of written.keys()) touches.set(o, touchesOf(o, types, { ...input, zones }));
  const unsure = unsureMeeting(touches);
  if (unsure)
    return abstain(
      'conflict',
      `whether overlay ${unsure.overlay.name} meets another of its weight on ${unsure.at} turns on a value of that type the watcher does not know`,
    );
  const inLoop = inLoopOf(written);
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

const NO_LABELS = Object.freeze({});

function touchesOf(
  o: OverlayView,
  types: readonly CandidateType[],
  input: ValidationSetting & { readonly zones: readonly string[] },
): Touch[] {
  const out: Touch[] = [];
  const byZone = o.requirements.find((r) => r.key === ZONE);
  const others = byZone ? o.requirements.filter((r) => r !== byZone) : o.requirements;
  for (const type of types) {
    // getOverlaidOfferings: the type's requirements (its zones are those it is offered in) must be
    // compatible with the overlay's, then each offering (every zone of the region) must be.
    const offeredIn = byZone ? [...(input.prices.offeredZones?.(type.name) ?? [])] : [];
    if (byZone && !offeredIn.some((z) => requirementPasses(byZone, z))) continue;
    const zones = byZone ? input.zones.filter((z) => requirementPasses(byZone, z)) : input.zones;
    for (const pool of input.pools) {
      const labels: Record<string, string> = { ...type.labels };
      if (input.prices.region !== undefined) labels[REGION] = input.prices.region;
      const view = new KarpenterView(labels, pool, input.provider);
      const clash = clashes(pool, type, input.provider);
      const offerings: { capacityType: string; zone: string }[] = [];
      let unsure = false;
      for (const capacityType of CAPACITY_TYPES) {
        labels[CAPACITY_TYPE] = capacityType;
        const meets = meeting(others, type, view, clash);
        if (meets === 'no') continue;
        for (const zone of zones) offerings.push({ capacityType, zone });
        if (meets === 'unsure') unsure = true;
      }
      if (offerings.length > 0) out.push({ at: `${pool.name}/${type.name}`, offerings, unsure });
    }
  }
  return out;
}

/**
 * The keys a NodePool's template labels give a value the type does not have (a pool of one family
 * and a type of another). Karpenter validates every NodePool against every type, launchable or
 * not: adding the type's requirements to the template's intersects them to no value, which reads
 * as DoesNotExist, so there an overlay's NotIn or DoesNotExist is compatible and any other
 * operator is not (scheduling.Requirements Add and Intersects). Unknown: the type's value is not known.
 */
function clashes(pool: NodePoolView, type: CandidateType, provider: ProviderKeys): Map<string, boolean> {
  const out = new Map<string, boolean>();
  for (const [key, value] of Object.entries(pool.templateLabels)) {
    if (!provider.instanceTypeKeys.has(key) || provider.fixedValues?.has(key)) continue;
    if (type.known !== undefined && !type.known.has(key)) out.set(key, false);
    else if (type.labels[key] !== value) out.set(key, true);
  }
  return out;
}

/** As the pricing of a world reads it (worlds.ts): a key of the type's whose value is not known leaves the answer open. */
function meeting(
  requirements: readonly Requirement[],
  type: CandidateType,
  view: KarpenterView,
  clash: ReadonlyMap<string, boolean>,
): 'yes' | 'no' | 'unsure' {
  let unsure = false;
  for (const req of requirements) {
    const clashing = clash.get(req.key);
    if (clashing === true) {
      const op = combinedOperator(req);
      if (op !== 'NotIn' && op !== 'DoesNotExist') return 'no';
    } else if (
      clashing === false ||
      (type.known !== undefined &&
        !type.known.has(req.key) &&
        req.key !== CAPACITY_TYPE &&
        view.role(req.key) === 'instance-type')
    )
      unsure = true;
    else if (!view.passes(req)) return 'no';
  }
  return unsure ? 'unsure' : 'yes';
}

/** A place where an overlay may meet another of its weight, and whether it does turns on an unknown value. */
function unsureMeeting(touches: ReadonlyMap<OverlayView, Touch[]>): { overlay: OverlayView; at: string } | undefined {
  const byPlace = new Map<string, { overlay: OverlayView; unsure: boolean }[]>();
  for (const [overlay, list] of touches)
    for (const t of list) {
      const here = byPlace.get(t.at) ?? [];
      here.push({ overlay, unsure: t.unsure });
      byPlace.set(t.at, here);
    }
  for (const [at, here] of byPlace) {
    const doubt = here.find((h) => h.unsure);
    if (doubt && here.some((h) => h.overlay !== doubt.overlay && mayCollide(h.overlay, doubt.overlay)))
      return { overlay: doubt.overlay, at };
  }
  return undefined;
}

const pricing = (o: OverlayView) => o.price !== undefined || o.priceAdjustment !== undefined;
const mayCollide = (a: OverlayView, b: OverlayView) =>
  (pricing(a) && pricing(b)) || (a.capacity ?? []).some((r) => (b.capacity ?? []).includes(r));

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

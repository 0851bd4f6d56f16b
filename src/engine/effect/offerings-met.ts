// Where an overlay meets offerings as Karpenter's NodeOverlay validation reads it
// (controller.go getOverlaidOfferings): for every NodePool and every type of the region's catalog,
// the NodePool's name and template labels with the type's requirements must be compatible with the
// overlay's, then each offering (capacity type, zone: every zone of the region, as the AWS
// provider makes them) must be. What the conflict replay (conflicts.ts) runs its loop over. A type
// whose value of a key an overlay names is not known leaves the meeting unsure; where an unsure
// meeting could decide a Conflict, no answer is given.
import { KarpenterView } from '../karpenter-view.ts';
import type { NodePoolView } from '../nodepool.ts';
import type { OverlayView } from '../overlay.ts';
import type { ProviderKeys } from '../providers.ts';
import { combinedOperator, type Requirement, requirementPasses } from '../requirements.ts';
import { CAPACITY_TYPE, REGION, ZONE } from '../well-known.ts';
import { Abstain, abstain } from './abstain.ts';
import { type CandidateType, internedCandidate } from './candidates.ts';
import type { InstanceLabels } from './types.ts';
import type { PriceBook } from './prices.ts';

/** What Karpenter's loop reads besides the overlays: every NodePool, and each instance type of the region. */
export interface ValidationSetting {
  readonly pools: readonly NodePoolView[];
  /** The region's catalog is the price book's: Karpenter's AWS provider lists every type it prices. */
  readonly prices: PriceBook;
  readonly provider: ProviderKeys;
  readonly instanceLabels: InstanceLabels | undefined;
}

/** Where each of `overlays` meets offerings; an abstention where the catalog, zones or a type's values leave it unsure. */
export function offeringsMet(
  overlays: readonly OverlayView[],
  input: ValidationSetting,
): ReadonlyMap<OverlayView, Touch[]> | Abstain {
  const catalog = input.prices.instanceTypes?.();
  if (catalog === undefined)
    return abstain(
      'conflict',
      `the price source (${input.prices.source}) does not list its instance types: Karpenter's validation of the overlays of one weight cannot be replayed`,
    );
  const types = catalog.map((name) =>
    internedCandidate(name, NO_LABELS, input.instanceLabels?.get(name), input.provider.instanceTypeKeys),
  );
  const zones = zonesOf(overlays, catalog, input.prices);
  if (zones instanceof Abstain) return zones;
  const touches = new Map<OverlayView, Touch[]>();
  for (const o of overlays) touches.set(o, touchesOf(o, types, { ...input, zones }));
  const unsure = unsureMeeting(touches);
  if (unsure)
    return abstain(
      'conflict',
      `whether overlay ${unsure.overlay.name} meets another of its weight on ${unsure.at} turns on a value of that type the watcher does not know`,
    );
  return touches;
}

/** Where an overlay prices or sets capacity: per NodePool and type, the offerings it meets (capacity type, zone). */
export interface Touch {
  readonly at: string;
  readonly offerings: readonly { readonly capacityType: string; readonly zone: string }[];
  /** Whether it meets them turns on a value of the type's that is not known. */
  readonly unsure: boolean;
}

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

export const pricing = (o: OverlayView) => o.price !== undefined || o.priceAdjustment !== undefined;
const mayCollide = (a: OverlayView, b: OverlayView) =>
  (pricing(a) && pricing(b)) || (a.capacity ?? []).some((r) => (b.capacity ?? []).includes(r));

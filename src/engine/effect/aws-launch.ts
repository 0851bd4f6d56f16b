// What Karpenter's AWS provider launches for a NodeClaim, given each candidate offering's price in
// one world: its launch path (karpenter-provider-aws v1.14.3, pkg/providers/instance: Create,
// filterInstanceTypes, getCapacityType, getOverrides, CreateFleetInputBuilder), then EC2's
// documented choice among the overrides. Its judge (test/judges/launch-differential.test.ts) runs
// that very code.
import { type Abstain, abstain } from './abstain.ts';
import type { ClaimLaunchFacts } from './types.ts';
import type { PricedCandidate, PricedOffering } from './worlds.ts';

/** `maxInstanceTypes`: a CreateFleet request names at most this many instance types. */
export const MAX_LAUNCH_TYPES = 60;

interface Override {
  readonly instanceType: string;
  readonly zone: string;
  readonly priority: number;
  /** The offering's price before overlays: what EC2 ranks `lowest-price` by. */
  readonly list: number;
}

export interface Launch {
  readonly capacityType: 'spot' | 'on-demand';
  /** The CreateFleet allocation strategy (on-demand or spot options). */
  readonly strategy: 'prioritized' | 'lowest-price' | 'capacity-optimized-prioritized' | 'price-capacity-optimized';
  /** The candidates the request names, after the filters and the cut: its overrides are theirs (overridesOf). */
  readonly types: readonly PricedCandidate[];
  /**
   * The instance types EC2 may launch by its documented rule: on-demand `prioritized`, those with
   * the lowest Priority; `lowest-price`, the lowest price; spot, any (EC2 picks the pool by its
   * capacity). More than one on-demand type is a tie EC2 breaks.
   */
  readonly picks: readonly string[];
}

/**
 * `cutStraddled`: candidates priced alike straddle the cut at 60, so which of them the request
 * lists is Go's unstable sort's choice (its tail may differ from world to world); `cutAmbiguous`:
 * and that choice changes the launch. `launch` is then the launch with all of them.
 */
export interface LaunchChosen {
  readonly launch: Launch;
  readonly cutStraddled?: true;
  readonly cutAmbiguous?: string;
}

const compatible = (o: PricedOffering, claim: ClaimLaunchFacts, capacityType?: string) =>
  (capacityType === undefined ? claim.capacityTypes.has(o.capacityType) : o.capacityType === capacityType) &&
  (claim.zones === undefined || claim.zones.has(o.zone));

/** The cheapest compatible offering's price (OrderByPrice's key), +Infinity without one. */
const cheapest = (c: PricedCandidate, claim: ClaimLaunchFacts) => {
  let min = Number.POSITIVE_INFINITY;
  for (const o of c.offerings) if (compatible(o, claim) && o.price < min) min = o.price;
  return min;
};

/**
 * `priceOverlayApplied`: the NodeClaim's karpenter.sh/price-overlay-applied annotation, which
 * switches CreateFleet to the strategies that follow Karpenter's priorities.
 */
export function awsLaunch(
  candidates: readonly PricedCandidate[],
  claim: ClaimLaunchFacts,
  priceOverlayApplied: boolean,
): LaunchChosen | Abstain {
  // Capacity reservations are not modelled: a NodeClaim that lists `reserved` had one available.
  if (claim.capacityTypes.has('reserved'))
    return abstain('reserved', 'the NodeClaim allows reserved capacity, whose reservations the watcher does not see');
  let types = candidates.filter((c) => c.offerings.some((o) => compatible(o, claim)));
  if (types.length === 0)
    return abstain('no-offering', 'no candidate has an offering the NodeClaim allows, at the prices known');

  if (!claim.minValues) {
    // ExoticInstanceTypeFilter: GPUs, accelerators and metal only if nothing else is left.
    if (types.some((c) => c.type.exotic === undefined) && !types.every((c) => c.type.exotic === undefined)) {
      return abstain(
        'exotic',
        `whether ${types
          .filter((c) => c.type.exotic === undefined)
          .map((c) => c.type.name)
          .slice(0, 3)
          .join(', ')} has GPUs or accelerators is not known`,
      );
    }
    const generic = types.filter((c) => c.type.exotic === false);
    if (generic.length > 0) types = generic;

    // SpotOfferingFilter: with both capacity types allowed, every spot offering priced above the
    // cheapest on-demand one goes, and a type left with no offering goes with it.
    if (claim.capacityTypes.has('on-demand') && claim.capacityTypes.has('spot')) {
      let cheapestOnDemand = Number.POSITIVE_INFINITY;
      let hasSpot = false;
      let hasOnDemand = false;
      for (const c of types) {
        for (const o of c.offerings) {
          if (!compatible(o, claim)) continue;
          if (o.capacityType === 'on-demand') {
            hasOnDemand = true;
            if (o.price < cheapestOnDemand) cheapestOnDemand = o.price;
          } else if (o.capacityType === 'spot') hasSpot = true;
        }
      }
      if (hasOnDemand && hasSpot) {
        const kept: PricedCandidate[] = [];
        for (const c of types) {
          const dropped = (o: PricedOffering) => o.capacityType === 'spot' && o.price > cheapestOnDemand;
          if (!c.offerings.some(dropped)) kept.push(c);
          else {
            const offerings = c.offerings.filter((o) => !dropped(o));
            if (offerings.length > 0) kept.push({ ...c, offerings });
          }
        }
        types = kept;
      }
    }
  }

  // Truncate: the 60 cheapest by their cheapest compatible offering. Go's sort.Slice is not
  // stable, so which of equally priced types at the cut survive is the sort's business: the
  // launch is decided only if it is the same whichever do.
  const keyed = types.map((c) => ({ c, key: cheapest(c, claim) })).sort((a, b) => a.key - b.key);
  if (keyed.length <= MAX_LAUNCH_TYPES)
    return {
      launch: fleet(
        keyed.map((k) => k.c),
        claim,
        priceOverlayApplied,
      ),
    };
  const cut = keyed[MAX_LAUNCH_TYPES - 1]!.key;
  if (keyed[MAX_LAUNCH_TYPES]!.key !== cut)
    return {
      launch: fleet(
        keyed.slice(0, MAX_LAUNCH_TYPES).map((k) => k.c),
        claim,
        priceOverlayApplied,
      ),
    };
  const below = keyed.filter((k) => k.key < cut).map((k) => k.c);
  const tied = keyed.filter((k) => k.key === cut).map((k) => k.c);
  const fewest = fleet(below, claim, priceOverlayApplied);
  const most = fleet([...below, ...tied], claim, priceOverlayApplied);
  if (sameLaunch(fewest, most)) return { launch: most, cutStraddled: true };
  return {
    launch: most,
    cutStraddled: true,
    cutAmbiguous: `${tied.length} candidates priced alike straddle Karpenter's cut at ${MAX_LAUNCH_TYPES} types, and which survive changes the launch`,
  };
}

function sameLaunch(a: Launch, b: Launch): boolean {
  if (a.capacityType !== b.capacityType || a.strategy !== b.strategy || a.picks.length !== b.picks.length) return false;
  const picks = new Set(b.picks);
  return a.picks.every((p) => picks.has(p));
}

/**
 * The CreateFleet overrides: one per instance type and zone (getOverrides de-duplicates
 * partitions), each at Priority = its price. Built only when two requests are compared: a
 * launch of hundreds of types is otherwise decided from its offerings directly.
 */
function overridesOf(l: Launch, claim: ClaimLaunchFacts): Override[] {
  const overrides: Override[] = [];
  for (const c of l.types)
    eachOverride(c, claim, l.capacityType, (o) =>
      overrides.push({ instanceType: c.type.name, zone: o.zone, priority: o.price, list: o.list }),
    );
  return overrides;
}

/** The offerings that become a type's overrides: the first compatible one in each zone. */
function eachOverride(
  c: PricedCandidate,
  claim: ClaimLaunchFacts,
  capacityType: string,
  visit: (o: PricedOffering) => void,
): void {
  const zones: string[] = [];
  for (const o of c.offerings) {
    if (!compatible(o, claim, capacityType) || zones.includes(o.zone)) continue;
    zones.push(o.zone);
    visit(o);
  }
}

/** The same CreateFleet request: capacity type, strategy, and every override at the same priority. */
export function sameRequest(a: Launch, b: Launch, claim: ClaimLaunchFacts): boolean {
  if (a.capacityType !== b.capacityType || a.strategy !== b.strategy) return false;
  const left = overridesOf(a, claim);
  const right = overridesOf(b, claim);
  if (left.length !== right.length) return false;
  const priorities = new Map(left.map((o) => [`${o.instanceType}/${o.zone}`, o.priority]));
  return right.every((o) => priorities.get(`${o.instanceType}/${o.zone}`) === o.priority);
}

/** getCapacityType (reserved, spot, on-demand: the first with an offering left), and EC2's pick. */
function fleet(types: readonly PricedCandidate[], claim: ClaimLaunchFacts, priceOverlayApplied: boolean): Launch {
  const hasSpot = (c: PricedCandidate) => c.offerings.some((o) => compatible(o, claim, 'spot'));
  if (claim.capacityTypes.has('spot') && types.some(hasSpot)) {
    return {
      capacityType: 'spot',
      strategy: priceOverlayApplied ? 'capacity-optimized-prioritized' : 'price-capacity-optimized',
      types,
      picks: types.filter(hasSpot).map((c) => c.type.name),
    };
  }
  const rank = (o: PricedOffering) => (priceOverlayApplied ? o.price : o.list);
  let best = Number.POSITIVE_INFINITY;
  const lowest = new Map<PricedCandidate, number>();
  for (const c of types) {
    let low = Number.POSITIVE_INFINITY;
    eachOverride(c, claim, 'on-demand', (o) => (low = Math.min(low, rank(o))));
    if (low === Number.POSITIVE_INFINITY) continue;
    lowest.set(c, low);
    best = Math.min(best, low);
  }
  return {
    capacityType: 'on-demand',
    strategy: priceOverlayApplied ? 'prioritized' : 'lowest-price',
    types,
    picks: [...lowest].filter(([, low]) => low === best).map(([c]) => c.type.name),
  };
}

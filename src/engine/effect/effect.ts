// What the selected overlays changed about a launch: Karpenter's launch replayed in two worlds,
// the overlays as they were and the same without those the watcher's selector picks (any other
// overlay stays in both), and the two launches compared. Pure: the caller passes the NodeClaim,
// the overlays in force at the launch, the prices and what is known of the candidates.
import type { NodePoolView } from '../nodepool.ts';
import type { ProviderKeys } from '../providers.ts';
import { awsLaunch, sameRequest } from './aws-launch.ts';
import { type CandidateType, internedCandidate } from './candidates.ts';
import { ZONE, ZONE_ID } from '../well-known.ts';
import type { PriceBook } from './prices.ts';
import { idOf } from './identity.ts';
import { type Offering, priceWorld, type PricedCandidate, type World } from './worlds.ts';
import { type ClaimForEffect, type Effect, type EffectInput, MAX_CANDIDATES } from './types.ts';
import { type Replay, unknown, verdictFor, worldLaunch } from './verdict.ts';

/**
 * A candidate's offerings at list prices: on-demand and spot in every zone the NodeClass launches
 * into and EC2 offers the type in (a spot offering only where it has a spot price).
 */
export function listOfferings(name: string, prices: PriceBook, zones: ReadonlySet<string>): Offering[] {
  const out: Offering[] = [];
  const onDemand = prices.onDemand(name);
  const offered = prices.offeredZones?.(name);
  for (const zone of zones) {
    if (offered !== undefined && !offered.has(zone)) continue;
    if (onDemand !== undefined) out.push({ capacityType: 'on-demand', zone, list: onDemand });
    const spot = prices.spot(name, zone);
    if (spot !== undefined) out.push({ capacityType: 'spot', zone, list: spot });
  }
  return out;
}

const overlaid = (priced: readonly PricedCandidate[]) => priced.some((c) => c.overlays.length > 0);

export function launchEffect(input: EffectInput): Effect {
  const r = replayOf(input);
  return 'effect' in r ? r.effect : verdictFor(r, input.launched);
}

/**
 * Replays are kept per candidate list (one shared array per distinct list, node.ts) and what else
 * they read: the nodes of one NodePool's burst are launched from the same list, prices and
 * overlays, and are replayed once.
 */
const replays = new WeakMap<readonly string[], Map<string, Replay>>();
const MAX_REPLAYS_PER_LIST = 16;

export function replayKey(input: EffectInput, claim: ClaimForEffect, pool: NodePoolView): string {
  const known = input.nodeLabelsOf ? claim.candidates.reduce((n, c) => (input.nodeLabelsOf!(c) ? n + 1 : n), 0) : -1;
  return [
    idOf(pool),
    input.prices ? idOf(input.prices) : '-',
    [...(input.zones ?? [])].join(','),
    [...(claim.zones ?? [])].join(','),
    [...claim.capacityTypes].join(','),
    claim.minValues,
    claim.priceOverlayApplied,
    Object.entries(claim.pinned).join(';'),
    known,
    input.counted.map((c) => `${idOf(c.overlay)}${c.selected ? 's' : ''}`).join(','),
    input.conflicted.map((o) => idOf(o)).join(','),
    input.withoutCandidates ? idOf(input.withoutCandidates) : '-',
  ].join('|');
}

function replayOf(input: EffectInput): { effect: Effect } | Replay {
  const { provider, claim, pool } = input;
  if (provider?.name === 'kwok') {
    // kwok/cloudprovider toNode: the cheapest candidate offering by its catalog's own price, never
    // an overlaid one: no overlay changes a KWOK launch.
    return { effect: { verdict: 'none', reason: "the KWOK provider launches by its catalog's raw prices" } };
  }
  if (provider?.name !== 'aws')
    return {
      effect: unknown(
        'provider',
        `the launch code of provider ${provider?.name ?? 'unknown'} is not known to the watcher`,
      ),
    };
  if (claim === undefined && input.nodeClaimFound)
    return {
      effect: unknown(
        'no-nodeclaim',
        'its NodeClaim has no node.kubernetes.io/instance-type In requirement: the candidates Karpenter chose among are not known',
      ),
    };
  if (claim === undefined || pool === undefined)
    return {
      effect: unknown('no-nodeclaim', `the node's ${claim === undefined ? 'NodeClaim' : 'NodePool'} is not known`),
    };
  if (claim.candidates.length >= MAX_CANDIDATES) {
    return {
      effect: unknown(
        'candidates-cut',
        `the NodeClaim lists Karpenter's maximum of ${MAX_CANDIDATES} instance types: without the overlays, others cut by price might have been candidates`,
      ),
    };
  }
  if ((input.withoutCandidates?.length ?? 0) > MAX_CANDIDATES)
    return {
      effect: unknown(
        'candidates-cut',
        `without the selected overlays more than ${MAX_CANDIDATES} instance types would be options, and Karpenter's NodeClaim lists the ${MAX_CANDIDATES} cheapest`,
      ),
    };
  let byList = replays.get(claim.candidates);
  if (!byList) {
    byList = new Map();
    replays.set(claim.candidates, byList);
  }
  const key = replayKey(input, claim, pool);
  const known = byList.get(key);
  if (known) return known;
  const r = replay(input, provider, claim, pool);
  if ('effect' in r) return r;
  if (byList.size >= MAX_REPLAYS_PER_LIST) byList.clear();
  byList.set(key, r);
  return r;
}

function replay(
  input: EffectInput,
  provider: ProviderKeys,
  claim: ClaimForEffect,
  pool: NodePoolView,
): { effect: Effect } | Replay {
  const { prices } = input;
  const zones =
    claim.zones !== undefined && input.zones !== undefined
      ? new Set([...input.zones].filter((z) => claim.zones!.has(z)))
      : (claim.zones ?? input.zones);
  if (zones === undefined)
    return { effect: unknown('zones', 'the zones its EC2NodeClass launches into are not known') };
  const pinnedKey = Object.entries(claim.pinned).join(';');
  const typesOf = (names: readonly string[]) =>
    names.map((name) =>
      internedCandidate(name, claim.pinned, pinnedKey, input.nodeLabelsOf?.(name), provider.instanceTypeKeys),
    );
  const candidates = typesOf(claim.candidates);
  // A replacement made anyway: without the selected overlays its NodeClaim would list other options.
  const withoutCandidates = input.withoutCandidates ? typesOf(input.withoutCandidates) : candidates;
  const withOverlays = input.counted.map((c) => c.overlay);
  const withoutOverlays = input.counted.filter((c) => !c.selected).map((c) => c.overlay);
  const selected = input.counted.filter((c) => c.selected).map((c) => c.overlay);

  if (prices === undefined) {
    // Without prices only one question is answered: did a selected overlay touch the launch at all?
    const zeroPriced: PriceBook = {
      source: 'none',
      asOf: undefined,
      region: undefined,
      hasSpot: true,
      onDemand: () => 0,
      spot: () => 0,
    };
    const world = priceWorld(
      {
        candidates,
        offeringsOf: (type) => listOfferings(type.name, zeroPriced, zones),
        offeringsKey: `zero|${[...zones].join(',')}`,
        pool,
        provider,
        region: undefined,
      },
      withOverlays,
    );
    if ('priced' in world && !world.priced.some((c) => c.overlays.some((o) => !withoutOverlays.includes(o)))) {
      return {
        effect: {
          verdict: 'none',
          reason: 'no selected overlay priced any candidate offering (no price source: nothing else was compared)',
        },
      };
    }
    return {
      effect: unknown('no-prices', 'no price source: the launch without the selected overlays cannot be replayed'),
    };
  }
  if (!prices.hasSpot && claim.capacityTypes.has('spot'))
    return {
      effect: unknown(
        'no-spot-prices',
        `the NodeClaim allows spot, and the price source (${prices.source}) has no spot prices`,
      ),
    };
  if (prices.offeredZones === undefined) {
    // Which zones each type is offered in is not known: an overlay that prices by zone could then price an offering that does not exist.
    const byZone = input.counted.find((c) => c.overlay.requirements.some((r) => r.key === ZONE || r.key === ZONE_ID));
    if (byZone)
      return {
        effect: unknown(
          'zones',
          `overlay ${byZone.overlay.name} prices by zone, and the price source (${prices.source}) does not say which zones each type is offered in`,
        ),
      };
  }

  const worldInput = {
    candidates,
    offeringsOf: (type: CandidateType) => listOfferings(type.name, prices, zones),
    offeringsKey: `list|${idOf(prices)}|${[...zones].join(',')}`,
    pool,
    provider,
    region: prices.region,
  };
  const withWorld: World = priceWorld(worldInput, withOverlays);
  if ('unknown' in withWorld) return { effect: unknown('attributes', withWorld.unknown) };
  const { priced } = withWorld;
  const isSelected = new Set(selected);
  const steeringNames = new Set<string>();
  for (const c of priced) for (const o of c.overlays) if (isSelected.has(o)) steeringNames.add(o.name);
  const steering = [...steeringNames].sort();
  const context = {
    overlays: steering,
    prices: { source: prices.source, ...(prices.asOf !== undefined ? { asOf: prices.asOf } : {}) },
  };

  // Every offering Karpenter holds for the type: both capacity types in each zone the NodeClass launches into and EC2 offers the type in.
  const nodeClassZones = [...(input.zones ?? zones)];
  const everyOffering = {
    ...worldInput,
    offeringsOf: (type: CandidateType) => {
      const offered = prices.offeredZones?.(type.name);
      return nodeClassZones
        .filter((z) => offered === undefined || offered.has(z))
        .flatMap((zone) => ['on-demand', 'spot'].map((capacityType) => ({ capacityType, zone, list: 0 })));
    },
    offeringsKey: `every|${idOf(prices)}|${nodeClassZones.join(',')}`,
  };
  const everyOfferingWithout = { ...everyOffering, candidates: withoutCandidates };
  // Counted by what it could price anywhere: the annotation reads every offering.
  const conflicted = input.conflicted.find(
    (o) => touches(priceWorld(everyOffering, [o])) || touches(priceWorld(everyOfferingWithout, [o])),
  );
  if (conflicted)
    return {
      priced,
      context,
      stop: {
        code: 'conflict',
        reason: `Karpenter refused an overlay of ${conflicted.name}'s weight as a Conflict: without the selected overlays it would judge ${conflicted.name} again, maybe differently`,
      },
    };

  const withLaunch = awsLaunch(priced, claim, claim.priceOverlayApplied);
  if ('unknown' in withLaunch) return { priced, context, stop: { code: withLaunch.code, reason: withLaunch.unknown } };
  const predicted = worldLaunch(withLaunch.launch, prices, withLaunch.cutAmbiguous !== undefined);

  // Without a selected overlay among them, and over the same candidates, the world without them is this one.
  const withoutWorld =
    selected.length === 0 && withoutCandidates === candidates
      ? withWorld
      : priceWorld({ ...worldInput, candidates: withoutCandidates }, withoutOverlays);
  if ('unknown' in withoutWorld)
    return { priced, context, withLaunch, predicted, without: { code: 'attributes', reason: withoutWorld.unknown } };
  // The scheduler sets the annotation when any offering of any candidate had an overlaid price
  // (offered or not, allowed by the NodeClaim or not): without the selected overlays, only if
  // another overlay priced one.
  let annotated = false;
  if (withoutOverlays.length > 0) {
    const allPriced = priceWorld(everyOfferingWithout, withoutOverlays);
    if ('unknown' in allPriced)
      return { priced, context, withLaunch, predicted, without: { code: 'attributes', reason: allPriced.unknown } };
    annotated = overlaid(allPriced.priced);
  }
  const withoutLaunch = awsLaunch(withoutWorld.priced, claim, annotated);
  if ('unknown' in withoutLaunch)
    return {
      priced,
      context,
      withLaunch,
      predicted,
      without: { code: withoutLaunch.code, reason: withoutLaunch.unknown },
    };
  if (withoutLaunch.cutAmbiguous !== undefined)
    return {
      priced,
      context,
      withLaunch,
      predicted,
      without: { code: 'truncation', reason: withoutLaunch.cutAmbiguous },
    };
  const requestsKnown = withLaunch.cutStraddled === undefined && withoutLaunch.cutStraddled === undefined;
  return {
    priced,
    context,
    withLaunch,
    predicted,
    without: {
      launch: withoutLaunch.launch,
      world: worldLaunch(withoutLaunch.launch, prices, false),
      sameRequest: requestsKnown ? sameRequest(withLaunch.launch, withoutLaunch.launch, claim) : undefined,
    },
  };
}

function touches(world: World): boolean {
  return 'unknown' in world || overlaid(world.priced);
}

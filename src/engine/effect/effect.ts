// What the selected overlays changed about a launch: Karpenter's launch replayed in two worlds,
// the overlays as they were and the same without those the watcher's selector picks (any other
// overlay stays in both), and the two launches compared. Pure: the caller passes the NodeClaim,
// the overlays in force at the launch, the prices and what is known of the candidates.
import { Memo } from '../memo.ts';
import type { NodePoolView } from '../nodepool.ts';
import type { OverlayView } from '../overlay.ts';
import type { ProviderKeys } from '../providers.ts';
import type { Labels } from '../requirements.ts';
import { ZONE, ZONE_ID } from '../well-known.ts';
import { Abstain, abstain } from './abstain.ts';
import { awsLaunch, sameRequest } from './aws-launch.ts';
import { type CandidateType, internedCandidate } from './candidates.ts';
import { alone, worldsOf } from './moment.ts';
import type { PriceBook } from './prices.ts';
import {
  type ClaimForEffect,
  type CountedOverlay,
  type Effect,
  type EffectInput,
  type InstanceLabels,
  MAX_CANDIDATES,
} from './types.ts';
import { type Replay, verdictFor, worldLaunch } from './verdict.ts';
import { priceWorld, type PricedCandidate, type PricedWorld, type WorldInput } from './worlds.ts';

/** The zones the launch could go to: the NodeClaim's, among those its NodeClass launches into. */
export function launchZones(
  claim: ClaimForEffect,
  nodeClassZones: ReadonlySet<string> | undefined,
): ReadonlySet<string> | undefined {
  if (claim.zones !== undefined && nodeClassZones !== undefined)
    return new Set([...nodeClassZones].filter((z) => claim.zones!.has(z)));
  return claim.zones ?? nodeClassZones;
}

/** The candidates as the AWS provider describes them, from their names, the values the NodeClaim pins and a node of each type seen. */
export function candidateTypes(
  names: readonly string[],
  pinned: Labels,
  provider: ProviderKeys,
  instanceLabels: InstanceLabels | undefined,
): CandidateType[] {
  return names.map((name) => internedCandidate(name, pinned, instanceLabels?.get(name), provider.instanceTypeKeys));
}

const overlaid = (priced: readonly PricedCandidate[]) => priced.some((c) => c.overlays.length > 0);

/**
 * Whether the scheduler would annotate a NodeClaim of these candidates
 * karpenter.sh/price-overlay-applied with the overlays counted in `input`: whether one of them
 * prices any offering Karpenter holds of any candidate (offered or not, allowed by the NodeClaim
 * or not). Undefined where the replay cannot tell (no prices, zones or NodeClaim).
 */
export function annotatedWith(input: EffectInput): boolean | undefined {
  if (answerWithoutReplay(input) !== undefined) return undefined;
  const { provider, claim, prices } = input;
  const worlds = worldsOf(input.counted);
  if (worlds.with.length === 0) return false;
  const priced = priceWorld(
    {
      offerings: 'every',
      prices: prices!,
      zones: input.zones ?? launchZones(claim!, input.zones)!,
      candidates: candidateTypes(claim!.candidates, claim!.pinned, provider!, input.instanceLabels),
      pool: input.pool!,
      provider: provider!,
      region: prices!.region,
    },
    worlds.with,
  );
  return priced instanceof Abstain ? undefined : overlaid(priced);
}

export function launchEffect(input: EffectInput): Effect {
  const answered = answerWithoutReplay(input);
  if (answered !== undefined) return answered;
  const claim = input.claim!;
  const replayInput: ReplayInput = {
    provider: input.provider!,
    claim,
    pool: input.pool!,
    prices: input.prices!,
    zones: launchZones(claim, input.zones)!,
    nodeClassZones: input.zones,
    counted: input.counted,
    conflicted: input.conflicted,
    instanceLabels: input.instanceLabels,
    withoutCandidates: input.withoutCandidates,
  };
  return verdictFor(REPLAYS.of(claim.candidates, replayInput), input.launched);
}

/** What the replay reads: every field is in its memo's key. */
interface ReplayInput {
  readonly provider: ProviderKeys;
  readonly claim: ClaimForEffect;
  readonly pool: NodePoolView;
  readonly prices: PriceBook;
  /** The zones the launch could go to. */
  readonly zones: ReadonlySet<string>;
  /** Those its NodeClass launches into, where known: every offering Karpenter holds for a type. */
  readonly nodeClassZones: ReadonlySet<string> | undefined;
  readonly counted: readonly CountedOverlay[];
  readonly conflicted: readonly OverlayView[];
  readonly instanceLabels: InstanceLabels | undefined;
  readonly withoutCandidates: readonly string[] | undefined;
}

/**
 * Replays are kept per candidate list (one shared array per distinct list, node.ts) and what else
 * they read: the nodes of one NodePool's burst are launched from the same list, prices and
 * overlays, and are replayed once.
 */
const REPLAYS = new Memo<readonly string[], ReplayInput, Replay>((_, input) => replay(input), 16);

/** The answers given before any replay: a provider, a NodeClaim, zones or prices the replay would need and lacks. */
function answerWithoutReplay(input: EffectInput): Effect | undefined {
  const { provider, claim, pool, prices } = input;
  // kwok/cloudprovider toNode: the cheapest candidate offering by its catalog's own price, never
  // an overlaid one: no overlay changes a KWOK launch.
  if (provider?.name === 'kwok')
    return { verdict: 'none', reason: "the KWOK provider launches by its catalog's raw prices" };
  if (provider?.name !== 'aws')
    return abstain(
      'provider',
      `the launch code of provider ${provider?.name ?? 'unknown'} is not known to the watcher`,
    ).effect();
  if (claim === undefined && input.nodeClaimFound)
    return abstain(
      'no-nodeclaim',
      'its NodeClaim has no node.kubernetes.io/instance-type In requirement: the candidates Karpenter chose among are not known',
    ).effect();
  if (claim === undefined || pool === undefined)
    return abstain(
      'no-nodeclaim',
      `the node's ${claim === undefined ? 'NodeClaim' : 'NodePool'} is not known`,
    ).effect();
  if (claim.candidates.length >= MAX_CANDIDATES)
    return abstain(
      'candidates-cut',
      `the NodeClaim lists Karpenter's maximum of ${MAX_CANDIDATES} instance types: without the overlays, others cut by price might have been candidates`,
    ).effect();
  if ((input.withoutCandidates?.length ?? 0) > MAX_CANDIDATES)
    return abstain(
      'candidates-cut',
      `without the selected overlays more than ${MAX_CANDIDATES} instance types would be options, and Karpenter's NodeClaim lists the ${MAX_CANDIDATES} cheapest`,
    ).effect();
  const zones = launchZones(claim, input.zones);
  if (zones === undefined) return abstain('zones', 'the zones its EC2NodeClass launches into are not known').effect();
  if (prices === undefined) return unpricedAnswer(input, provider, claim, pool, zones);
  if (!prices.hasSpot && claim.capacityTypes.has('spot'))
    return abstain(
      'no-spot-prices',
      `the NodeClaim allows spot, and the price source (${prices.source}) has no spot prices`,
    ).effect();
  if (prices.offeredZones === undefined) {
    // Which zones each type is offered in is not known: an overlay that prices by zone could then price an offering that does not exist.
    const byZone = input.counted.find((c) => c.overlay.requirements.some((r) => r.key === ZONE || r.key === ZONE_ID));
    if (byZone)
      return abstain(
        'zones',
        `overlay ${byZone.overlay.name} prices by zone, and the price source (${prices.source}) does not say which zones each type is offered in`,
      ).effect();
  }
  return undefined;
}

/** Without prices only one question is answered: did a selected overlay touch the launch at all? */
function unpricedAnswer(
  input: EffectInput,
  provider: ProviderKeys,
  claim: ClaimForEffect,
  pool: NodePoolView,
  zones: ReadonlySet<string>,
): Effect {
  const worlds = worldsOf(input.counted);
  const world = priceWorld(
    {
      offerings: 'unpriced',
      zones,
      candidates: candidateTypes(claim.candidates, claim.pinned, provider, input.instanceLabels),
      pool,
      provider,
      region: undefined,
    },
    worlds.with,
  );
  if (!(world instanceof Abstain) && !world.some((c) => c.overlays.some((o) => worlds.selected.has(o))))
    return {
      verdict: 'none',
      reason: 'no selected overlay priced any candidate offering (no price source: nothing else was compared)',
    };
  return abstain('no-prices', 'no price source: the launch without the selected overlays cannot be replayed').effect();
}

function replay(input: ReplayInput): Replay {
  const { provider, claim, prices } = input;
  const candidates = candidateTypes(claim.candidates, claim.pinned, provider, input.instanceLabels);
  // A replacement made anyway: without the selected overlays its NodeClaim would list other options.
  const withoutCandidates = input.withoutCandidates
    ? candidateTypes(input.withoutCandidates, claim.pinned, provider, input.instanceLabels)
    : candidates;
  const worlds = worldsOf(input.counted);
  const listed: WorldInput = {
    offerings: 'listed',
    prices,
    zones: input.zones,
    candidates,
    pool: input.pool,
    provider,
    region: prices.region,
  };
  const withWorld = priceWorld(listed, worlds.with);
  if (withWorld instanceof Abstain) return { priced: [], context: {}, abstained: withWorld };
  const selected = new Set(input.counted.filter((c) => c.selected).map((c) => c.overlay));
  const steering = new Set<string>();
  for (const c of withWorld) for (const o of c.overlays) if (selected.has(o)) steering.add(o.name);
  const context = {
    overlays: [...steering].sort(),
    prices: { source: prices.source, ...(prices.asOf !== undefined ? { asOf: prices.asOf } : {}) },
  };
  // Every offering Karpenter holds for the type: both capacity types in each zone the NodeClass launches into and EC2 offers the type in.
  const every: WorldInput = { ...listed, offerings: 'every', zones: input.nodeClassZones ?? input.zones };
  const everyWithout: WorldInput = { ...every, candidates: withoutCandidates };
  // Counted by what it could price anywhere: the annotation reads every offering.
  const conflicted = input.conflicted.find(
    (o) => touches(priceWorld(every, alone(o))) || touches(priceWorld(everyWithout, alone(o))),
  );
  if (conflicted)
    return {
      priced: withWorld,
      context,
      abstained: abstain(
        'conflict',
        `Karpenter refused an overlay of ${conflicted.name}'s weight as a Conflict: without the selected overlays it would judge ${conflicted.name} again, maybe differently`,
      ),
    };
  const withLaunch = awsLaunch(withWorld, claim, claim.priceOverlayApplied);
  if (withLaunch instanceof Abstain) return { priced: withWorld, context, abstained: withLaunch };
  const before: Replay = {
    priced: withWorld,
    context,
    withLaunch,
    predicted: worldLaunch(withLaunch.launch, prices, withLaunch.cutAmbiguous !== undefined),
  };
  // Without a selected overlay among them, and over the same candidates, the world without them is this one.
  const withoutWorld =
    selected.size === 0 && withoutCandidates === candidates
      ? withWorld
      : priceWorld({ ...listed, candidates: withoutCandidates }, worlds.without);
  return {
    ...before,
    without: launchWithout(withoutWorld, before, { everyWithout, overlays: worlds.without, claim, prices }),
  };
}

/** The launch without the selected overlays (`world`, priced with `overlays`), compared with the one with them. */
function launchWithout(
  world: PricedWorld,
  withThem: Replay,
  o: {
    /** Every offering Karpenter holds for the candidates: what the price-overlay-applied annotation reads. */
    readonly everyWithout: WorldInput;
    readonly overlays: readonly OverlayView[];
    readonly claim: ClaimForEffect;
    readonly prices: PriceBook;
  },
): Replay['without'] {
  const { overlays, claim, prices } = o;
  if (world instanceof Abstain) return world;
  // The scheduler sets the annotation when any offering of any candidate had an overlaid price
  // (offered or not, allowed by the NodeClaim or not): without the selected overlays, only if
  // another overlay priced one.
  let annotated = false;
  if (overlays.length > 0) {
    const allPriced = priceWorld(o.everyWithout, overlays);
    if (allPriced instanceof Abstain) return allPriced;
    annotated = overlaid(allPriced);
  }
  const without = awsLaunch(world, claim, annotated);
  if (without instanceof Abstain) return without;
  if (without.cutAmbiguous !== undefined) return abstain('truncation', without.cutAmbiguous);
  const withLaunch = withThem.withLaunch!;
  const requestsKnown = withLaunch.cutStraddled === undefined && without.cutStraddled === undefined;
  return {
    launch: without.launch,
    world: worldLaunch(without.launch, prices, false),
    sameRequest: requestsKnown ? sameRequest(withLaunch.launch, without.launch, claim) : undefined,
  };
}

function touches(world: PricedWorld): boolean {
  return world instanceof Abstain || overlaid(world);
}

// The one place that decides whether a node was launched under an overlay's influence.
// Pure: no I/O, no clock; the caller passes `now` and the caches' views.
import type { Labels } from './requirements.ts';
import { KarpenterView } from './karpenter-view.ts';
import { chooseProvider, type ProviderChoice, type ProviderSetting } from './provider-choice.ts';
import { KNOWN_PROVIDERS, type ProviderKeys } from './providers.ts';
import { type Allocatable, nodeClaimFor, type NodeClaimLookup, type NodeClaimView, type NodeView } from './node.ts';
import type { Match, OverlayIndex } from './overlay-index.ts';
import type { OverlayView } from './overlay.ts';
import { type Basis, buildRecord, type DecidedBy, type NodeRecord, type RecordKeys } from './record.ts';
import { launchEffect } from './effect/effect.ts';
import { overlaysInForce } from './effect/moment.ts';
import type { Effect, EffectInput, InstanceLabels } from './effect/types.ts';
import { disruptionEffect } from './disruption/controller.ts';
import type { DisruptionEvidence } from './disruption/evidence.ts';
import type { PoolOffering } from './disruption/types.ts';
import { type LaunchOrigin, launchOrigin } from './disruption/queue.ts';
import type { FitSizing } from './effect/allocatable.ts';
import type { PriceBook } from './effect/prices.ts';
import { type PricesDue, pricesAwaitedUntil } from './effect/prices-due.ts';
import { characteristics, scope } from './scope.ts';
import { CAPACITY_TYPE, INSTANCE_TYPE, NODEPOOL_LABEL, REGISTERED_LABEL } from './well-known.ts';

/**
 * How long before its Node a launch can have been decided: Karpenter deletes a NodeClaim whose
 * node has not registered within 15 minutes (nodeclaim/lifecycle, registrationTimeout).
 */
const LAUNCH_BEFORE_NODE_MS = 15 * 60_000;

export interface EngineSettings {
  keys: RecordKeys;
  /** A node older than this is decided with whatever labels it has. */
  gracePeriodMs: number;
  /**
   * karpenterProvider: `auto`, each launch judged with the keys of the provider its NodeClaim
   * names (spec.nodeClassRef.group); or one provider's keys for every launch, set explicitly.
   */
  provider: ProviderSetting;
  /** The providers the watcher knows, with instanceTypeKeys added (KNOWN_PROVIDERS when unset). */
  knownProviders?: readonly ProviderKeys[];
}

export interface DecisionInput {
  node: NodeView;
  nodeClaim?: NodeClaimView | undefined;
  now: number;
  /** The node is being created (the webhook's CREATE): record keys it carries are not the watcher's, and are replaced. */
  atCreate?: boolean;
  decidedBy: DecidedBy;
  /** The cluster's NodeClaims by spec.nodeClassRef.group, for a node nothing else names the provider of. */
  nodeClassGroups?: ReadonlyMap<string, number> | undefined;
  /** What the effect's replay reads besides the NodeClaim: prices, the NodeClass's zones, known instance types. */
  launch?: LaunchKnowledge | undefined;
}

/** What a decision reads besides the node: the NodeClaims (the caches', or those of files) and the launch's knowledge. */
interface DecisionKnowledge {
  nodeClaims: NodeClaimLookup;
  launch?: LaunchKnowledge | undefined;
}

/** The one way a node's DecisionInput is made, so that the webhook, the reconciler and the CLI decide alike. */
export function decisionInput(
  node: NodeView,
  known: DecisionKnowledge,
  now: number,
  decidedBy: DecidedBy,
): DecisionInput {
  return {
    node,
    nodeClaim: nodeClaimFor(node, known.nodeClaims),
    now,
    decidedBy,
    nodeClassGroups: known.nodeClaims.groups,
    launch: known.launch,
  };
}

/** What the watcher knows beyond the NodeClaim when it replays a launch; all of it may be missing. */
export interface LaunchKnowledge {
  prices?: PriceBook | undefined;
  /** Prices the source expects soon: a launch that would read unknown without them waits for them. */
  pricesDue?: PricesDue | undefined;
  /** The zones a NodeClass (by name) launches into: its subnets'. */
  zonesOf?(nodeClass: string): ReadonlySet<string> | undefined;
  /** What a NodeClass (by name) sets that Karpenter computes allocatable from, with Karpenter's own settings: one object per NodeClass version. */
  sizingOf?(nodeClass: string): FitSizing | undefined;
  /** The labels of a node of each instance type seen: an immutable map, a new one when a type is added. */
  instanceLabels?: InstanceLabels | undefined;
  /** What was seen of Karpenter's disruption: whether a launch replaced nodes, and which. Undefined: every launch is taken for provisioning. */
  disruption?: DisruptionEvidence | undefined;
  /** A NodePool's NodeClaims created by `createdBefore`, counted by offering: what Balanced consolidation's pool cost sums. */
  poolOfferings?(nodePool: string, createdBefore: number): readonly PoolOffering[] | undefined;
  /** The capacity of a NodePool's NodeClaims created by `createdBefore` but those in `except`: what counted against its limits. */
  poolCapacity?(nodePool: string, createdBefore: number, except: ReadonlySet<string>): Allocatable | undefined;
}

export type Decision =
  | { outcome: 'out-of-scope'; reason: string }
  | { outcome: 'recorded' }
  | { outcome: 'undetermined'; reason: string; retryAt: number; provider: ProviderChoice }
  | {
      outcome: 'influenced' | 'not-influenced';
      overlay: OverlayView | undefined;
      basis: Basis;
      evaluatedAt: number;
      record: NodeRecord;
      /** Whose keys the launch was judged with, from what; with a warning, the basis is approximate. */
      provider: ProviderChoice;
      /** What the selected overlays changed about the launch. */
      effect: Effect;
    };

/** Overlays are judged as they stood at the launch decision. */
export function launchTime(node: NodeView, nodeClaim: NodeClaimView | undefined, now: number): number {
  return nodeClaim?.createdAt ?? node.createdAt ?? now;
}

/** The cloud provider whose keys Karpenter compared for this launch, and how the watcher knows. */
export function providerOf(
  node: NodeView,
  nodeClaim: NodeClaimView | undefined,
  settings: EngineSettings,
  nodeClassGroups?: ReadonlyMap<string, number>,
): ProviderChoice {
  return chooseProvider(settings.provider, settings.knownProviders ?? KNOWN_PROVIDERS, {
    labels: characteristics(node, nodeClaim),
    nodeClaim,
    clusterGroups: nodeClassGroups,
  });
}

/**
 * What Karpenter compared for this launch: its NodePool as of then and its provider's keys, or,
 * either unknown, the node's labels.
 */
export function karpenterView(
  labels: Labels,
  at: number,
  index: OverlayIndex,
  provider: ProviderChoice,
): KarpenterView {
  return new KarpenterView(labels, index.nodePools.at(labels[NODEPOOL_LABEL], at), provider.keys);
}

/**
 * Without its NodeClaim, a node's launch is known only to lie within LAUNCH_BEFORE_NODE_MS
 * before its creation: the node's creation stands in, which is exact only if the overlay that
 * wins is the same at every moment of that window (it can change only where an overlay began or
 * ceased to count).
 */
function launchUncertain(
  input: DecisionInput,
  view: KarpenterView,
  index: OverlayIndex,
  winner: Match['version'],
): boolean {
  if (input.nodeClaim) return false;
  const createdAt = input.node.createdAt ?? input.now;
  const from = createdAt - LAUNCH_BEFORE_NODE_MS;
  const changes = index.changesBetween(from, createdAt);
  return changes.length > 0 && [from, ...changes].some((t) => index.match(view, t).version !== winner);
}

/** A launch as a decision sees it: the node and what else it reads, Karpenter's view of it, when it was decided, whose keys judge it. */
interface LaunchSeen {
  readonly input: DecisionInput;
  readonly view: KarpenterView;
  readonly at: number;
  readonly index: OverlayIndex;
  readonly provider: ProviderChoice;
}

function readiness(launch: LaunchSeen, grace: number, launchUnknown: boolean): string | undefined {
  const { input, view, at, index, provider } = launch;
  if (input.nodeClaim) return undefined;
  if (view.labels[REGISTERED_LABEL] === 'true') return undefined;
  const createdAt = input.node.createdAt ?? input.now;
  if (input.now - createdAt >= grace) return undefined;
  for (const key of index.keysNamedAt(at)) {
    if (view.missing(key)) return `label ${key} not yet on the node and its NodeClaim is unknown`;
  }
  if (provider.guessed)
    return 'its NodeClaim, whose nodeClassRef.group names the cloud provider, is unknown, and its labels name no provider';
  if (launchUnknown)
    return 'the overlay that wins changed in the 15 minutes before the node was created, and its NodeClaim, which dates the launch, is unknown';
  return undefined;
}

/** What the selected overlays changed about this launch: Karpenter's launch (or the disruption command that made it) replayed without them. */
function effectOf(launch: LaunchSeen, origin: Exclude<LaunchOrigin, { kind: 'awaiting' }>): Effect {
  const { input, view, at, index, provider } = launch;
  const claim = input.nodeClaim;
  const keys = provider.warning === undefined ? provider.keys : undefined;
  const launched = { instanceType: view.labels[INSTANCE_TYPE], capacityType: view.labels[CAPACITY_TYPE] };
  // The overlays in force are read only for a launch that can be replayed: every decision pays for the rest.
  const replayable = keys?.name === 'aws' && claim?.launch !== undefined;
  const unreplayed: EffectInput = {
    provider: keys,
    launched,
    claim: claim?.launch,
    nodeClaimFound: claim !== undefined,
    pool: view.pool,
    counted: [],
    conflicted: [],
    prices: undefined,
    zones: undefined,
  };
  const inputAt = (t: number): EffectInput => {
    if (!replayable) return unreplayed;
    const prices = input.launch?.prices;
    const instanceLabels = input.launch?.instanceLabels;
    const nodeClass = claim!.nodeClass;
    const sizing = nodeClass === undefined ? undefined : input.launch?.sizingOf?.(nodeClass);
    const { counted, conflicted } = overlaysInForce(index, t, prices && { prices, provider: keys, instanceLabels });
    return {
      provider: keys,
      launched,
      claim: claim!.launch,
      pool: view.pool,
      counted,
      conflicted,
      prices,
      zones: nodeClass === undefined ? undefined : input.launch?.zonesOf?.(nodeClass),
      ...(instanceLabels ? { instanceLabels } : {}),
      ...(sizing ? { sizing } : {}),
    };
  };
  if (origin.kind === 'provisioned') return launchEffect(inputAt(at));
  return disruptionEffect(origin, {
    index,
    at,
    evidence: input.launch?.disruption,
    poolOfferings: input.launch?.poolOfferings,
    poolCapacity: input.launch?.poolCapacity,
    pool: view.pool?.name,
    inputAt,
    replayable,
    annotated: claim?.launch?.priceOverlayApplied === true,
  });
}

export function decide(input: DecisionInput, index: OverlayIndex, settings: EngineSettings): Decision {
  const { node, nodeClaim, now } = input;
  const s = scope(node, nodeClaim, settings.keys, input.atCreate === true);
  if (!s.inScope) return { outcome: 'out-of-scope', reason: s.reason };
  if (s.recorded) return { outcome: 'recorded' };
  const evaluatedAt = launchTime(node, nodeClaim, now);
  const provider = providerOf(node, nodeClaim, settings, input.nodeClassGroups);
  const view = karpenterView(characteristics(node, nodeClaim), evaluatedAt, index, provider);
  const match = index.match(view, evaluatedAt);
  const launchUnknown = launchUncertain(input, view, index, match.version);
  const launch: LaunchSeen = { input, view, at: evaluatedAt, index, provider };
  const waiting = readiness(launch, settings.gracePeriodMs, launchUnknown);
  if (waiting !== undefined) {
    return {
      outcome: 'undetermined',
      reason: waiting,
      retryAt: (node.createdAt ?? now) + settings.gracePeriodMs,
      provider,
    };
  }
  const origin =
    nodeClaim && input.launch?.disruption
      ? launchOrigin(nodeClaim, input.launch.disruption, now)
      : ({ kind: 'provisioned' } as const);
  if (origin.kind === 'awaiting')
    return { outcome: 'undetermined', reason: origin.reason, retryAt: origin.until, provider };
  // A record names only an overlay of the selector's; another's win leaves the node not influenced.
  const overlay = match.version?.selected ? match.version.overlay : undefined;
  const pricedBy = match.version && !match.version.selected ? match.version.overlay.name : undefined;
  // Without its NodePool, the node's labels stand in for what Karpenter compared; without its
  // NodeClaim, the node's creation for the launch; with a provider in doubt, maybe not its keys.
  const basis = view.pool && !launchUnknown && provider.warning === undefined ? match.basis : 'approximate';
  const effect = effectOf(launch, origin);
  const awaited = pricesAwaitedUntil(effect, input.launch?.pricesDue, node.createdAt ?? now, now);
  if (awaited !== undefined)
    return { outcome: 'undetermined', reason: `prices on their way: ${effect.reason}`, retryAt: awaited, provider };
  const record = buildRecord({
    keys: settings.keys,
    overlay,
    decidedBy: input.decidedBy,
    basis,
    evaluatedAt,
    labeledAt: now,
    characteristicsFrom: nodeClaim ? 'node+nodeclaim' : 'node',
    ...(nodeClaim ? { nodeClaim: nodeClaim.name } : {}),
    ...(pricedBy !== undefined ? { pricedBy } : {}),
    provider,
    effect,
  });
  return { outcome: overlay ? 'influenced' : 'not-influenced', overlay, basis, evaluatedAt, record, provider, effect };
}

// Nodes and NodeClaims reduced to what a decision needs, from JSON or client objects.
import { combineRequirements, type Labels, type Requirement } from './requirements.ts';
import { toEpochMs } from './overlay.ts';
import { KNOWN_PROVIDERS } from './providers.ts';
import type { ClaimForEffect } from './effect/types.ts';
import { CAPACITY_TYPE, INSTANCE_TYPE, ZONE } from './well-known.ts';
import { normalizedKey } from './normalize.ts';
import { parseQuantity } from './quantity.ts';
import { Interned } from './interned.ts';
import type { RecordTold } from './record.ts';

type Timestamp = string | Date | undefined | null;

interface OwnerReference {
  apiVersion?: string;
  kind?: string;
  name?: string;
  uid?: string;
}

export interface NodeObject {
  metadata?: {
    name?: string;
    uid?: string;
    labels?: Record<string, string> | null;
    annotations?: Record<string, string> | null;
    creationTimestamp?: Timestamp;
    resourceVersion?: string;
    ownerReferences?: OwnerReference[] | null;
  };
  spec?: { providerID?: string | null } | null;
}

interface NodeClaimRequirement {
  key?: string;
  operator?: string;
  values?: string[] | null;
  minValues?: number | null;
}

export interface NodeClaimObject {
  metadata?: {
    name?: string;
    labels?: Record<string, string> | null;
    annotations?: Record<string, string> | null;
    creationTimestamp?: Timestamp;
  };
  spec?: {
    nodeClassRef?: { group?: string | null; kind?: string | null; name?: string | null } | null;
    requirements?: NodeClaimRequirement[] | null;
    resources?: { requests?: Record<string, string | number> | null } | null;
  } | null;
  status?: {
    providerID?: string | null;
    nodeName?: string | null;
    conditions?: { type?: string; status?: string; reason?: string | null; lastTransitionTime?: Timestamp }[] | null;
    allocatable?: Record<string, string | number> | null;
    capacity?: Record<string, string | number> | null;
  } | null;
}

export interface NodeView {
  readonly name: string;
  readonly uid?: string;
  readonly labels: Labels;
  readonly createdAt?: number;
  readonly providerID?: string;
  /** The NodeClaim named by the node's ownerReference (set by Karpenter's registration). */
  readonly ownerNodeClaim?: string;
  readonly resourceVersion?: string;
  /** The record's decision annotation, whole: kept only when asked for (`explain` tells all of it). */
  readonly story?: string;
  /** What a cache keeps of that annotation for good (decided-node.ts). */
  readonly told?: RecordTold;
}

export interface NodeClaimView {
  readonly name: string;
  readonly labels: Labels;
  readonly createdAt?: number;
  readonly providerID?: string;
  readonly nodeName?: string;
  /** spec.nodeClassRef.group: the cloud provider that launched it (`karpenter.k8s.aws`, `karpenter.kwok.sh`, ...). */
  readonly nodeClassGroup?: string;
  /** spec.nodeClassRef.name: its NodeClass (the EC2NodeClass whose subnets it launches into). */
  readonly nodeClass?: string;
  /** What its launch was chosen from, when its requirements name candidate instance types. */
  readonly launch?: ClaimForEffect;
  /** Why Karpenter's disruption is replacing or deleting it (its DisruptionReason condition, while True). */
  readonly disruptionReason?: string;
  /** When Karpenter marked it so (the condition's lastTransitionTime): just before it created the replacements. */
  readonly disruptionMarkedAt?: number;
  /**
   * Kept while it is marked: status.allocatable, what Karpenter's scheduling holds its instance type
   * to hold (the cloud provider's figure, written at launch). Whether a replacement's pods fit the
   * type of the nodes it replaced is told by it (engine/disruption/fit.ts).
   */
  readonly allocatable?: Allocatable;
  /**
   * status.capacity, one shared object per distinct figure: what Karpenter's cluster state counts
   * of it against its NodePool's limits (StateNode.Capacity), once launched.
   */
  readonly capacity?: Allocatable;
}

/** CPU in cores, memory in bytes, pods: what a type holds for pods, as Karpenter's scheduling counts it. */
export interface Allocatable {
  readonly cpu: number;
  readonly memory: number;
  readonly pods: number;
}

function resourcesOf(a: Record<string, string | number> | null | undefined): Allocatable | undefined {
  const cpu = parseQuantity(a?.cpu);
  const memory = parseQuantity(a?.memory);
  const pods = parseQuantity(a?.pods);
  return cpu === undefined || memory === undefined || pods === undefined ? undefined : { cpu, memory, pods };
}

const SHARED_CAPACITIES = new Interned<Allocatable>(4096);

function capacityOf(status: NodeClaimObject['status']): Allocatable | undefined {
  const c = resourcesOf(status?.capacity);
  return c && SHARED_CAPACITIES.of(`${c.cpu}/${c.memory}/${c.pods}`, () => Object.freeze(c));
}

/**
 * Of the NodeClaim's spec only the NodeClass's group is kept, and the known groups as one shared
 * string each: thousands of NodeClaims name the same one or two.
 */
const SHARED_GROUPS = new Map(KNOWN_PROVIDERS.map((p) => [p.group, p.group]));

/** `storyAnnotation`: the decision annotation's key, when the view should keep its value. */
export function toNodeView(obj: NodeObject, storyAnnotation?: string): NodeView {
  const md = obj.metadata ?? {};
  const owner = md.ownerReferences?.find((r) => r.kind === 'NodeClaim' && r.apiVersion?.startsWith('karpenter.sh/'));
  return {
    name: md.name ?? '',
    ...optional('uid', md.uid),
    labels: md.labels ?? {},
    ...optional('createdAt', toEpochMs(md.creationTimestamp)),
    ...optional('providerID', obj.spec?.providerID ?? undefined),
    ...optional('ownerNodeClaim', owner?.name),
    ...optional('resourceVersion', md.resourceVersion),
    ...optional('story', storyAnnotation === undefined ? undefined : md.annotations?.[storyAnnotation]),
  };
}

/**
 * Candidate lists as one shared array each: the NodeClaims of a burst list the same hundreds of
 * instance types. Bounded so that a table never holds more than a burst's worth.
 */
const MAX_SHARED_CANDIDATE_LISTS = 2000;
const SHARED_CANDIDATES = new Interned<readonly string[]>(MAX_SHARED_CANDIDATE_LISTS);

function shared(values: readonly string[]): readonly string[] {
  return SHARED_CANDIDATES.of(values.join('\u0000'), () => Object.freeze([...values]));
}

const PRICE_OVERLAY_APPLIED = 'karpenter.sh/price-overlay-applied';

/**
 * Multi-valued requirements and minValues as one shared map each: a NodePool's NodeClaims all
 * carry the same, and the replacement's caches key on the map's identity.
 */
const SHARED_ALLOWED = new Interned<ReadonlyMap<string, ReadonlySet<string>>>(MAX_SHARED_CANDIDATE_LISTS);
const SHARED_MIN_VALUES = new Interned<ReadonlyMap<string, number>>(MAX_SHARED_CANDIDATE_LISTS);
const SHARED_REQUIREMENTS = new Interned<readonly Requirement[]>(MAX_SHARED_CANDIDATE_LISTS);
/** Values every candidate shares, as one shared object per distinct set: the candidate types key on it. */
const SHARED_PINNED = new Interned<Labels>(MAX_SHARED_CANDIDATE_LISTS);
/**
 * A NodeClaim's launch and labels as one shared object per distinct spec and label set: a
 * cluster's NodeClaims are a few NodePools' launches, and 100,000 of them kept apart cost about
 * 1.2 KB each.
 */
const SHARED_LAUNCHES = new Interned<ClaimForEffect | undefined>(MAX_SHARED_CANDIDATE_LISTS);
const SHARED_CLAIM_LABELS = new Interned<Labels>(20_000);

/** Requirements besides the instance types, combined per key, as one shared array per distinct set. */
function sharedRequirements(reqs: readonly NodeClaimRequirement[]): readonly Requirement[] {
  const specs = reqs
    .filter((r) => normalizedKey(r.key ?? '') !== INSTANCE_TYPE)
    .map((r) => ({ key: r.key ?? '', operator: r.operator ?? '', values: r.values ?? [] }));
  return SHARED_REQUIREMENTS.of(JSON.stringify(specs), () => combineRequirements(specs));
}

/** A NodeClaim's launch, shared with every NodeClaim whose requirements, requests and overlay annotation are the same. */
function sharedLaunch(obj: NodeClaimObject): ClaimForEffect | undefined {
  const key = JSON.stringify([
    obj.spec?.requirements ?? [],
    obj.spec?.resources?.requests ?? {},
    obj.metadata?.annotations?.[PRICE_OVERLAY_APPLIED] === 'true',
  ]);
  return SHARED_LAUNCHES.of(key, () => claimLaunch(obj));
}

/** What the scheduler wrote into a NodeClaim for its launch: candidates, capacity types, zones, pinned values. */
function claimLaunch(obj: NodeClaimObject): ClaimForEffect | undefined {
  const reqs = obj.spec?.requirements ?? [];
  let candidates: readonly string[] | undefined;
  let capacityTypes: Set<string> | undefined;
  let zones: Set<string> | undefined;
  const minValues = new Map<string, number>();
  const pinned: Record<string, string> = {};
  const allowed = new Map<string, Set<string>>();
  for (const r of reqs) {
    const key = normalizedKey(r.key ?? '');
    // Requirements sharing a key are one requirement to Karpenter, whose minValues is the larger.
    if (typeof r.minValues === 'number') minValues.set(key, Math.max(r.minValues, minValues.get(key) ?? 0));
    const values = r.values ?? [];
    if (r.operator !== 'In') continue;
    // Requirements sharing a key are intersected, as Karpenter holds them.
    const narrow = (have: Set<string> | undefined) => new Set(have ? values.filter((v) => have.has(v)) : values);
    if (key === INSTANCE_TYPE) candidates = shared(candidates ? values.filter((v) => candidates!.includes(v)) : values);
    else if (key === CAPACITY_TYPE) capacityTypes = narrow(capacityTypes);
    else if (key === ZONE) zones = narrow(zones);
    else if (values.length === 1) pinned[key] = values[0]!;
    else allowed.set(key, narrow(allowed.get(key)));
  }
  if (candidates === undefined) return undefined;
  const requested = obj.spec?.resources?.requests ?? {};
  const cpu = parseQuantity(requested.cpu);
  const memory = parseQuantity(requested.memory);
  const pods = parseQuantity(requested.pods);
  // GPUs, ephemeral storage, ENIs for pods: what types hold of those the watcher does not know.
  const other = Object.keys(requested).some((r) => r !== 'cpu' && r !== 'memory' && r !== 'pods');
  return {
    candidates,
    pinned: SHARED_PINNED.of(JSON.stringify(pinned), () => Object.freeze(pinned)),
    capacityTypes: capacityTypes ?? new Set(['on-demand', 'spot']),
    ...(zones ? { zones } : {}),
    minValues: minValues.size > 0,
    ...(minValues.size > 0
      ? { minValuesByKey: SHARED_MIN_VALUES.of(JSON.stringify([...minValues]), () => minValues) }
      : {}),
    priceOverlayApplied: obj.metadata?.annotations?.[PRICE_OVERLAY_APPLIED] === 'true',
    ...(cpu !== undefined || memory !== undefined
      ? {
          requests: {
            ...(cpu !== undefined ? { cpu } : {}),
            ...(memory !== undefined ? { memory } : {}),
            ...(pods !== undefined ? { pods } : {}),
            ...(other ? { other } : {}),
          },
        }
      : {}),
    requirements: sharedRequirements(reqs),
    ...(allowed.size > 0
      ? { allowed: SHARED_ALLOWED.of(JSON.stringify([...allowed].map(([k, v]) => [k, [...v]])), () => allowed) }
      : {}),
  };
}

export function toNodeClaimView(obj: NodeClaimObject): NodeClaimView {
  const md = obj.metadata ?? {};
  const group = obj.spec?.nodeClassRef?.group ?? undefined;
  const disruption = obj.status?.conditions?.find((c) => c.type === 'DisruptionReason' && c.status === 'True');
  return {
    name: md.name ?? '',
    labels: sharedLabels(md.labels ?? {}),
    ...optional('createdAt', toEpochMs(md.creationTimestamp)),
    ...optional('providerID', obj.status?.providerID ?? undefined),
    ...optional('nodeName', obj.status?.nodeName ?? undefined),
    ...optional('nodeClassGroup', group === undefined ? undefined : (SHARED_GROUPS.get(group) ?? group)),
    ...optional('nodeClass', obj.spec?.nodeClassRef?.name ?? undefined),
    ...optional('launch', sharedLaunch(obj)),
    ...optional('disruptionReason', disruption?.reason ?? undefined),
    ...optional('disruptionMarkedAt', disruption ? toEpochMs(disruption.lastTransitionTime) : undefined),
    ...optional('allocatable', disruption ? resourcesOf(obj.status?.allocatable) : undefined),
    ...optional('capacity', capacityOf(obj.status)),
  };
}

function sharedLabels(labels: Labels): Labels {
  return SHARED_CLAIM_LABELS.of(JSON.stringify(labels), () => Object.freeze({ ...labels }));
}

function optional<K extends string, V>(key: K, value: V | undefined): { [P in K]?: V } {
  return (value === undefined || value === '' ? {} : { [key]: value }) as { [P in K]?: V };
}

/** Finds NodeClaims by providerID or name, and counts them by provider. */
export interface NodeClaimLookup {
  byProviderID(providerID: string): NodeClaimView | undefined;
  byName(name: string): NodeClaimView | undefined;
  /** Every NodeClaim known, counted by spec.nodeClassRef.group (what a node without a NodeClaim is assumed to run on). */
  readonly groups?: ReadonlyMap<string, number>;
}

/**
 * A node's NodeClaim, the way Karpenter links them (providerID, else the ownerReference of its
 * registration), else by the provider's own naming of a node it created itself: a NodeClaim of that
 * provider that names no other instance.
 */
export function nodeClaimFor(node: NodeView, claims: NodeClaimLookup): NodeClaimView | undefined {
  const linked =
    (node.providerID ? claims.byProviderID(node.providerID) : undefined) ??
    (node.ownerNodeClaim ? claims.byName(node.ownerNodeClaim) : undefined);
  if (linked) return linked;
  for (const provider of KNOWN_PROVIDERS) {
    const name = provider.nodeClaimNameOf?.(node);
    const claim = name === undefined ? undefined : claims.byName(name);
    if (
      claim &&
      claim.nodeClassGroup === provider.group &&
      (claim.providerID === undefined || claim.providerID === node.providerID)
    )
      return claim;
  }
  return undefined;
}

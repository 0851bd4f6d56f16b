// What the watcher's caches and the CLI's reads of the same objects share: an EC2NodeClass
// reduced to its zones and sizing, and NodeClaims found by providerID or name. Apart from the caches, so
// that `explain` and `report` on files load no HTTP client.
import {
  type Ec2NodeClassSpec,
  type FitSizing,
  INSTANCE_TYPE,
  type InstanceLabels,
  type Labels,
  type NodeClaimLookup,
  type NodeClaimView,
  type NodeClassSizing,
  nodeClassSizing,
  type NodeView,
  type ProviderSettings,
  REGISTERED_LABEL,
} from '../engine/index.ts';

interface Ec2NodeClassObject {
  metadata?: { name?: string };
  spec?: Ec2NodeClassSpec | null;
  status?: { subnets?: { zone?: string }[] | null } | null;
}

export interface NodeClassFacts {
  readonly name: string;
  readonly zones: ReadonlySet<string>;
  /** What Karpenter computes each type's allocatable with: its AMI family and kubelet settings. */
  readonly sizing: NodeClassSizing;
}

/** An EC2NodeClass reduced to its name, its subnets' zones and its sizing. */
export function nodeClassFacts(obj: unknown): NodeClassFacts {
  const o = obj as Ec2NodeClassObject;
  return {
    name: o.metadata?.name ?? '',
    zones: new Set((o.status?.subnets ?? []).flatMap((s) => (s.zone ? [s.zone] : []))),
    sizing: nodeClassSizing(o.spec),
  };
}

/**
 * NodeClaims found by providerID or name, and counted by provider: fed event by event by the
 * watcher's cache, built at once from a list by `explain` and `report`, so both link a node to
 * its NodeClaim alike.
 */
export class NodeClaimIndex implements NodeClaimLookup {
  private readonly byProvider = new Map<string, NodeClaimView>();
  /** The NodeClaims by name, kept by whoever feeds upsert and remove (the cache's store is reused, not copied). */
  private readonly named: ReadonlyMap<string, NodeClaimView>;
  /** NodeClaims by spec.nodeClassRef.group, kept as they come, change and go. */
  readonly groups = new Map<string, number>();
  /** The group each NodeClaim was counted under (the store's item is replaced before upsert). */
  private readonly countedAs = new Map<string, string>();

  constructor(named: ReadonlyMap<string, NodeClaimView>) {
    this.named = named;
  }

  /** An index of a list; of NodeClaims that share a name the last counts, as a store keeps it. */
  static of(claims: Iterable<NodeClaimView>): NodeClaimIndex {
    const named = new Map<string, NodeClaimView>();
    for (const c of claims) named.set(c.name, c);
    const index = new NodeClaimIndex(named);
    for (const c of named.values()) index.upsert(c);
    return index;
  }

  upsert(claim: NodeClaimView): void {
    if (claim.providerID) this.byProvider.set(claim.providerID, claim);
    this.count(claim.name, claim.nodeClassGroup);
  }

  remove(claim: NodeClaimView): void {
    if (claim.providerID && this.byProvider.get(claim.providerID)?.name === claim.name)
      this.byProvider.delete(claim.providerID);
    this.count(claim.name, undefined);
  }

  private count(name: string, group: string | undefined): void {
    const before = this.countedAs.get(name);
    if (before === group) return;
    if (before !== undefined) {
      const n = (this.groups.get(before) ?? 0) - 1;
      if (n > 0) this.groups.set(before, n);
      else this.groups.delete(before);
      this.countedAs.delete(name);
    }
    if (group !== undefined) {
      this.groups.set(group, (this.groups.get(group) ?? 0) + 1);
      this.countedAs.set(name, group);
    }
  }

  byProviderID(providerID: string): NodeClaimView | undefined {
    return this.byProvider.get(providerID);
  }

  byName(name: string): NodeClaimView | undefined {
    return this.named.get(name);
  }
}

const SIZINGS = new WeakMap<ProviderSettings, WeakMap<NodeClassSizing, WeakMap<InstanceLabels, FitSizing>>>();

/**
 * A NodeClass's sizing with Karpenter's settings and the types a registered node was seen of: one
 * object per NodeClass version, settings and map of types seen, so that the replay's memos, which
 * key on it, find what was worked out before.
 */
export function fitSizing(nodeClass: NodeClassSizing, settings: ProviderSettings, seen: InstanceLabels): FitSizing {
  const bySizing = SIZINGS.get(settings) ?? new WeakMap<NodeClassSizing, WeakMap<InstanceLabels, FitSizing>>();
  SIZINGS.set(settings, bySizing);
  const bySeen = bySizing.get(nodeClass) ?? new WeakMap<InstanceLabels, FitSizing>();
  bySizing.set(nodeClass, bySeen);
  const sizing = bySeen.get(seen) ?? { nodeClass, settings, registered: new Set(seen.keys()) };
  bySeen.set(seen, sizing);
  return sizing;
}

/**
 * The labels of one registered node per instance type (Karpenter copies every NodeClaim label at
 * registration). Handed out as one immutable map, replaced when a type is first seen (a cluster
 * runs a few hundred types at most): the engine's memos key on the map's identity.
 */
export class InstanceTypeLabels {
  private byType: ReadonlyMap<string, Labels> = new Map();

  seen(node: NodeView): void {
    const type = node.labels[INSTANCE_TYPE];
    if (type !== undefined && node.labels[REGISTERED_LABEL] === 'true' && !this.byType.has(type))
      this.byType = new Map([...this.byType, [type, node.labels]]);
  }

  get current(): InstanceLabels {
    return this.byType;
  }
}

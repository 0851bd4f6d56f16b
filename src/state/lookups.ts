// What the watcher's caches and the CLI's reads of the same objects share: an EC2NodeClass
// reduced to its zones, and NodeClaims found by providerID or name. Apart from the caches, so
// that `explain` and `report` on files load no HTTP client.
import type { NodeClaimLookup, NodeClaimView } from '../engine/index.ts';

interface Ec2NodeClassObject {
  metadata?: { name?: string };
  status?: { subnets?: { zone?: string }[] | null } | null;
}

export interface NodeClassZones {
  readonly name: string;
  readonly zones: ReadonlySet<string>;
}

/** An EC2NodeClass reduced to its name and its subnets' zones. */
export function nodeClassZones(obj: unknown): NodeClassZones {
  const o = obj as Ec2NodeClassObject;
  return {
    name: o.metadata?.name ?? '',
    zones: new Set((o.status?.subnets ?? []).flatMap((s) => (s.zone ? [s.zone] : []))),
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

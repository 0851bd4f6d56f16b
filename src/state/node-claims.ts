// The NodeClaims, fed by a Reflector: looked up by name and providerID, counted by provider, and
// told to subscribers in the order the watch delivered their changes (what pairs a drift
// replacement with the node its command marked: engine/disruption/queue.ts).
import { type NodeClaimLookup, type NodeClaimView, toNodeClaimView } from '../engine/index.ts';
import { type CacheDeps, cacheReflector, nameOf } from '../kube/cache-reflector.ts';
import type { Reflector } from '../kube/reflector.ts';
import { NodeClaimIndex } from './lookups.ts';

export const NODECLAIMS_PATH = '/apis/karpenter.sh/v1/nodeclaims';

/** A change seen on the watch: its event's order, and whether it added the object (ADDED). */
export interface WatchSeen {
  readonly order: number;
  readonly added: boolean;
}

export class NodeClaimCache implements NodeClaimLookup {
  readonly reflector: Reflector<NodeClaimView>;
  private readonly index: NodeClaimIndex;
  private readonly listeners: ((claim: NodeClaimView, seen: WatchSeen | undefined) => void)[] = [];
  private readonly removedListeners: ((claim: NodeClaimView) => void)[] = [];
  /**
   * The order of the watch's events: one watch delivers them in the order the apiserver wrote them,
   * so of two changes seen on it the lower number was written first. A list's objects have none.
   */
  private order = 0;
  private listing = false;
  /** NodeClaims by spec.nodeClassRef.group, kept as they come, change and go. */
  readonly groups: Map<string, number>;

  constructor(deps: CacheDeps) {
    this.reflector = cacheReflector(deps, NODECLAIMS_PATH, {
      resource: 'nodeclaims',
      keyOf: nameOf,
      slim: (obj) => toNodeClaimView(obj as Parameters<typeof toNodeClaimView>[0]),
      handlers: {
        upsert: (claim, _at, _raw, added) => {
          this.index.upsert(claim);
          const seen = this.listing ? undefined : { order: ++this.order, added: added === true };
          for (const l of this.listeners) l(claim, seen);
        },
        remove: (claim) => {
          this.index.remove(claim);
          for (const l of this.removedListeners) l(claim);
        },
        listing: () => {
          this.listing = true;
        },
        listed: () => {
          this.listing = false;
        },
      },
    });
    this.index = new NodeClaimIndex(this.reflector.store);
    this.groups = this.index.groups;
  }

  /** Called for every new or changed NodeClaim (with its watch event's order): a node may have become decidable. */
  subscribe(listener: (claim: NodeClaimView, seen: WatchSeen | undefined) => void): void {
    this.listeners.push(listener);
  }

  onRemoved(listener: (claim: NodeClaimView) => void): void {
    this.removedListeners.push(listener);
  }

  byProviderID(providerID: string): NodeClaimView | undefined {
    return this.index.byProviderID(providerID);
  }

  byName(name: string): NodeClaimView | undefined {
    return this.index.byName(name);
  }
}

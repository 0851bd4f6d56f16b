// The gauges of recorded nodes: veneer_nodewatcher_nodes_influenced_current{capacity_type},
// nodes_by_effect_current{effect}, nodes_pending, records_unreadable_current and
// nodes_opted_out_current. They are computed from the node cache at every scrape, never counted up
// and down, so that they are true at every scrape whatever was missed in between.
import {
  EFFECTS,
  needsRecord,
  nodeClaimFor,
  OPTED_OUT,
  type NodeClaimLookup,
  type NodeView,
  type RecordKeys,
} from '../../engine/index.ts';
import type { Metrics } from '../../metrics.ts';

interface NodeSource {
  /** Every node, by its metadata (labels). */
  nodes(): Iterable<NodeView>;
  /** The nodes that may still need a record, whole. */
  undecidedNodes(): Iterable<NodeView>;
}

export function exportNodeCounts(
  metrics: Metrics,
  source: NodeSource,
  nodeClaims: NodeClaimLookup,
  keys: RecordKeys,
): void {
  metrics.atScrape.nodeCounts = () => {
    metrics.nodesInfluenced.reset();
    const byEffect = new Map<string, number>(EFFECTS.map((e) => [e, 0]));
    let unreadable = 0;
    let optedOut = 0;
    for (const node of source.nodes()) {
      if (node.labels[keys.influenced] === 'true') {
        metrics.nodesInfluenced.inc({ capacity_type: node.labels[keys.copied['capacity-type']] ?? 'unknown' });
      }
      if (node.labels[keys.influenced] !== undefined && node.told === undefined) unreadable++;
      if (node.labels[keys.optOut] === OPTED_OUT) optedOut++;
      const effect = node.labels[keys.effect];
      const n = effect === undefined ? undefined : byEffect.get(effect);
      if (n !== undefined) byEffect.set(effect!, n + 1);
    }
    for (const [effect, n] of byEffect) metrics.nodesByEffect.set({ effect }, n);
    metrics.recordsUnreadable.set(unreadable);
    metrics.nodesOptedOut.set(optedOut);
    let pending = 0;
    for (const node of source.undecidedNodes()) if (needsRecord(node, nodeClaimFor(node, nodeClaims), keys)) pending++;
    metrics.nodesPending.set(pending);
  };
}

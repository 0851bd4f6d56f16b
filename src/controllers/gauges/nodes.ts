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
import { foldSeries } from '../series-cap.ts';

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
  max: number,
): void {
  metrics.atScrape.nodeCounts = () => {
    metrics.nodesInfluenced.reset();
    // Capacity types are what Veneer labels its overlays with: cluster data, so capped.
    const influenced = new Map<string, number>();
    const byEffect = new Map<string, number>(EFFECTS.map((e) => [e, 0]));
    let unreadable = 0;
    let optedOut = 0;
    for (const node of source.nodes()) {
      if (node.labels[keys.influenced] === 'true') {
        const capacityType = node.labels[keys.copied['capacity-type']] ?? 'unknown';
        influenced.set(capacityType, (influenced.get(capacityType) ?? 0) + 1);
      }
      if (node.labels[keys.influenced] !== undefined && node.told === undefined) unreadable++;
      if (node.labels[keys.optOut] === OPTED_OUT) optedOut++;
      const effect = node.labels[keys.effect];
      const n = effect === undefined ? undefined : byEffect.get(effect);
      if (n !== undefined) byEffect.set(effect!, n + 1);
    }
    const series = [...influenced].map(([capacity_type, value]) => ({ capacity_type, value }));
    for (const { capacity_type, value } of foldSeries(series, max, ['capacity_type']))
      metrics.nodesInfluenced.set({ capacity_type }, value);
    for (const [effect, n] of byEffect) metrics.nodesByEffect.set({ effect }, n);
    metrics.recordsUnreadable.set(unreadable);
    metrics.nodesOptedOut.set(optedOut);
    let pending = 0;
    for (const node of source.undecidedNodes()) if (needsRecord(node, nodeClaimFor(node, nodeClaims), keys)) pending++;
    metrics.nodesPending.set(pending);
  };
}

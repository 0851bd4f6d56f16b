// veneer_nodewatcher_overlay_nodes_current{overlay, capacity_type}: nodes whose record names each
// overlay, computed at scrape time from the metadata view of every node. Every active overlay
// has a series, 0 included: a 0 is what shows an overlay that steers nothing. Overlay names are
// bounded by what Veneer creates, but a scrape must stay bounded whatever is in the cluster, so
// past `max` series the smallest are summed into one.
// veneer_nodewatcher_overlays{state} and veneer_nodewatcher_nodeoverlays_seen{selected} count the
// overlays themselves, never by name.
import { OVERLAY_STATES, overlayState, type NodeView, type OverlayView, type RecordKeys } from '../../engine/index.ts';
import type { Metrics } from '../../metrics.ts';
import { foldSeries } from '../series-cap.ts';

const UNKNOWN = 'unknown';

interface OverlaySeries {
  overlay: string;
  capacity_type: string;
  value: number;
}

export function overlaySeries(
  nodes: Iterable<NodeView>,
  active: Iterable<OverlayView>,
  keys: RecordKeys,
  max: number,
): OverlaySeries[] {
  const series = new Map<string, OverlaySeries>();
  const add = (overlay: string, capacityType: string, n: number) => {
    const key = `${overlay}\u0000${capacityType}`;
    const s = series.get(key);
    if (s) s.value += n;
    else series.set(key, { overlay, capacity_type: capacityType, value: n });
  };
  // The label value, not the name: it is what records carry, and it is never longer than 63.
  for (const o of active) add(o.nameLabelValue, o.labels['veneer.io/capacity-type'] || UNKNOWN, 0);
  for (const node of nodes) {
    const overlay = node.labels[keys.matchingOverlay];
    if (node.labels[keys.influenced] === 'true' && overlay)
      add(overlay, node.labels[keys.copied['capacity-type']] || UNKNOWN, 1);
  }
  return foldSeries([...series.values()], max, ['overlay', 'capacity_type']);
}

/** Computes the gauge at every scrape from what `nodes` and `active` give then. */
export function exportOverlayNodes(
  metrics: Metrics,
  source: { nodes: () => Iterable<NodeView>; active: () => Iterable<OverlayView> },
  keys: RecordKeys,
  max: number,
): void {
  metrics.atScrape.overlayNodes = () => {
    metrics.overlayNodes.reset();
    for (const s of overlaySeries(source.nodes(), source.active(), keys, max))
      metrics.overlayNodes.set({ overlay: s.overlay, capacity_type: s.capacity_type }, s.value);
  };
}

/** veneer_nodewatcher_overlays{state}: the overlays the watcher sees now, by Karpenter's verdict. */
export function exportOverlayStates(metrics: Metrics, current: () => Iterable<OverlayView>): void {
  metrics.atScrape.overlayStates = () => {
    const counts = new Map(OVERLAY_STATES.map((s) => [s, 0]));
    for (const o of current()) {
      const state = overlayState(o);
      counts.set(state, (counts.get(state) ?? 0) + 1);
    }
    for (const [state, n] of counts) metrics.overlays.set({ state }, n);
  };
}

/**
 * veneer_nodewatcher_nodeoverlays_seen{selected}: every NodeOverlay the watch sees, by whether
 * the overlaySelector selects it. None selected while others exist: the selector matches none of
 * the cluster's overlays, and every node is recorded overlay-influenced=false.
 */
export function exportOverlaysSeen(
  metrics: Metrics,
  all: () => Iterable<OverlayView>,
  selected: (overlay: OverlayView) => boolean,
): void {
  metrics.atScrape.overlaysSeen = () => {
    let yes = 0;
    let no = 0;
    for (const o of all()) {
      if (selected(o)) yes++;
      else no++;
    }
    metrics.nodeOverlaysSeen.set({ selected: 'true' }, yes);
    metrics.nodeOverlaysSeen.set({ selected: 'false' }, no);
  };
}

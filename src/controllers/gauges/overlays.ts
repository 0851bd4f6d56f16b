// veneer_nodewatcher_overlay_nodes_current{overlay, capacity_type}: nodes whose record names each
// overlay, computed at scrape time from the metadata view of every node. Every active overlay
// has a series, 0 included: a 0 is what shows an overlay that steers nothing. Overlay names are
// bounded by what Veneer creates, but a scrape must stay bounded whatever is in the cluster, so
// past `max` series the smallest are summed into one.
// veneer_nodewatcher_overlays{state} and veneer_nodewatcher_nodeoverlays_seen{selected} count the
// overlays themselves, never by name.
import { OVERLAY_STATES, overlayState, type NodeView, type OverlayView, type RecordKeys } from '../../engine/index.ts';
import type { Metrics } from '../../metrics.ts';

export const OTHER = 'other';
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
  return foldSeries([...series.values()], max, 'capacity_type');
}

/**
 * At most `max` series: the biggest stay, the rest are summed into one whose labels are all
 * `other`. Ties go by name, so that the same cluster gives the same series.
 */
export function foldSeries<K extends string, S extends { overlay: string; value: number } & Record<K, string>>(
  all: S[],
  max: number,
  second: K,
): S[] {
  if (all.length <= max) return all;
  const byName = (a: string, b: string) => (a < b ? -1 : a > b ? 1 : 0);
  all.sort((a, b) => b.value - a.value || byName(a.overlay, b.overlay) || byName(a[second], b[second]));
  const kept = all.slice(0, max - 1);
  const sum = all.slice(max - 1).reduce((n, s) => n + s.value, 0);
  return [...kept, { overlay: OTHER, [second]: OTHER, value: sum } as S];
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

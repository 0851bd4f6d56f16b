// veneer_nodewatcher_overlay_dollars_per_hour{overlay, effect}: the on-demand list price an hour
// of the nodes whose record names each overlay, by the effect the record carries, computed at
// scrape time from the metadata view of every node and the prices the watcher holds then (the
// price the launch replay reads: the node's instance type in the book). Bounded like
// overlay_nodes_current: past `max` series the smallest are summed into one.
import {
  onDemandListPrice,
  recordedEffect,
  type Labels,
  type NodeView,
  type PriceBook,
  type RecordKeys,
} from '../../engine/index.ts';
import type { Metrics } from '../../metrics.ts';
import { foldSeries } from '../series-cap.ts';

interface DollarSeries {
  overlay: string;
  effect: string;
  value: number;
}

/**
 * On-demand USD an hour, at list price, of the nodes whose record names each overlay, by the
 * effect the record carries. A node whose price is not known (`price` says undefined) adds
 * nothing; overlay_nodes_current still counts it. Only overlays that name a node have series.
 */
export function overlayDollarSeries(
  nodes: Iterable<NodeView>,
  keys: RecordKeys,
  price: (labels: Labels) => number | undefined,
  max: number,
): DollarSeries[] {
  const series = new Map<string, DollarSeries>();
  for (const node of nodes) {
    const overlay = node.labels[keys.matchingOverlay];
    if (node.labels[keys.influenced] !== 'true' || !overlay) continue;
    const effect = recordedEffect(node.labels, keys);
    const usd = price(node.labels) ?? 0;
    const key = `${overlay}\u0000${effect}`;
    const s = series.get(key);
    if (s) s.value += usd;
    else series.set(key, { overlay, effect, value: usd });
  }
  // Sums of prices such as 0.192 carry binary noise; the report rounds the same way.
  return foldSeries([...series.values()], max, ['overlay', 'effect']).map((s) => ({
    ...s,
    value: Math.round(s.value * 10_000) / 10_000,
  }));
}

/** Computes overlay_dollars_per_hour at every scrape, with the prices `prices` holds then. */
export function exportOverlayDollars(
  metrics: Metrics,
  nodes: () => Iterable<NodeView>,
  prices: () => PriceBook | undefined,
  keys: RecordKeys,
  max: number,
): void {
  metrics.atScrape.overlayDollars = () => {
    metrics.overlayDollars.reset();
    const book = prices();
    for (const s of overlayDollarSeries(nodes(), keys, (labels) => onDemandListPrice(labels, book), max))
      metrics.overlayDollars.set({ overlay: s.overlay, effect: s.effect }, s.value);
  };
}

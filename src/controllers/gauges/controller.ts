// The gauges: an observer with no lifecycle of its own. Each family is computed from the caches
// at every scrape (its file's atScrape hook), so every replica reports the same and none writes.
import type { Runnable } from '../../kube/manager.ts';
import type { ControllerContext } from '../context.ts';
import { exportCrdsServed } from './crds.ts';
import { exportOverlayDollars } from './dollars.ts';
import { exportNodeCounts } from './nodes.ts';
import { exportOverlayNodes, exportOverlayStates, exportOverlaysSeen } from './overlays.ts';
import { ProviderWatch } from './providers.ts';
import { exportWatchAges } from './watches.ts';

export function gauges(ctx: ControllerContext): Runnable {
  const { caches, metrics, settings, log, now } = ctx;
  const { overlays } = caches;
  const max = ctx.options.metrics.maxOverlaySeries;
  const allNodes = () => caches.nodes.nodes();
  exportNodeCounts(metrics, caches.nodes, caches.nodeClaims, settings.keys, max);
  exportWatchAges(metrics, caches.watches());
  exportCrdsServed(metrics, () => caches.crds());
  exportOverlayNodes(metrics, { nodes: allNodes, active: () => overlays.counting(now()) }, settings.keys, max);
  // The overlays of the selector's: the watch also brings the others, which only outrank them.
  exportOverlayStates(metrics, () => [...overlays.current()].filter((ov) => overlays.selects(ov)));
  // All of them, selected or not: a selector that matches none of the cluster's overlays shows.
  exportOverlaysSeen(
    metrics,
    () => overlays.current(),
    (ov) => overlays.selects(ov),
  );
  exportOverlayDollars(metrics, allNodes, () => ctx.prices.current(), settings.keys, max);
  const providers = new ProviderWatch({ settings, groups: caches.nodeClaims.groups, metrics, log });
  caches.nodeClaims.subscribe((claim) => providers.seen(claim));
  return { name: 'gauges' };
}

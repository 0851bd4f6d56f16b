// The price source `serve` runs, and what tells it the region where only the nodes know it:
// prices.region auto, with AWS credentials in the pod's environment but no region (EKS Pod
// Identity gives the one, not the other). Until the nodes' cache has listed and one of them names
// a region (topology.kubernetes.io/region), the source holds the static table; then it reads AWS
// for that region, once (prices/region.ts says which node counts).
import type { Logger } from 'pino';
import type { Config } from '../config/load.ts';
import type { Metrics } from '../metrics.ts';
import { NodesRegion } from '../prices/region.ts';
import { priceMode, priceSettings, regionFromNodesWanted } from '../prices/settings.ts';
import { PriceSource } from '../prices/source.ts';
import type { NodeCache } from '../state/node-cache.ts';

export interface ServedPrices {
  prices: PriceSource;
  /** Where the region came from, for the start-up line. */
  said: { mode: string; region: string | undefined; regionFrom: string };
}

/** What of the node cache tells the region: every node's labels as they come, and the first list. */
export type NodesSeen = Pick<NodeCache, 'onMetadata' | 'nodes'> & { all: { synced: Promise<void> } };

export function servePrices(
  config: Config,
  nodes: NodesSeen,
  deps: { metrics: Metrics; log: Logger; now: () => number },
  env: Record<string, string | undefined> = process.env,
): ServedPrices {
  const { log } = deps;
  const choice = priceSettings(config, env);
  const fromNodes = regionFromNodesWanted(config, env);
  const later = priceMode(config, true);
  const prices = new PriceSource({ ...choice, ...(fromNodes ? { regionLater: later } : {}), ...deps });
  if (fromNodes) {
    const found = (region: string) => {
      log.info(
        { region, regionFrom: 'nodes', mode: later },
        "prices: the region, from the nodes' topology.kubernetes.io/region",
      );
      void prices.useRegion(region);
    };
    const region = new NodesRegion({ log, found });
    nodes.onMetadata((node) => region.seen(node));
    void nodes.all.synced.then(() => region.fromList(nodes.nodes()));
  }
  const regionFrom = choice.regionFrom ?? (fromNodes ? 'nodes (not named yet)' : 'none');
  return { prices, said: { mode: choice.mode, region: choice.region, regionFrom } };
}

// The cluster's region as its nodes name it (topology.kubernetes.io/region, which every EKS node
// carries): where prices.region `auto` looks last, after the setting and the environment, for a
// pod that has AWS credentials but no region (EKS Pod Identity).
//
// A cluster spans one region, so the region is chosen once and kept: the one most nodes of the
// first complete list name (a node labelled by hand cannot outvote the fleet; the list comes
// whole, so this costs no wait), or, when none of them names one, the first node that does. Nodes
// that disagree are warned of once; the prices are never switched to another region.
import type { Logger } from 'pino';
import { REGION } from '../engine/index.ts';

/** An AWS region's name, as prices.region accepts it (config/schema.ts): `eastus` or `us-central1` are another cloud's. */
const AWS_REGION = /^[a-z]{2}(-[a-z]+)+-[0-9]$/;

interface Labelled {
  readonly labels: Readonly<Record<string, string>>;
}

/** The AWS region a node names, if any. */
function nodeRegion(node: Labelled): string | undefined {
  const region = node.labels[REGION];
  return region !== undefined && AWS_REGION.test(region) ? region : undefined;
}

/** How many nodes name each region. */
function regionCounts(nodes: Iterable<Labelled>): Map<string, number> {
  const counts = new Map<string, number>();
  for (const node of nodes) {
    const region = nodeRegion(node);
    if (region !== undefined) counts.set(region, (counts.get(region) ?? 0) + 1);
  }
  return counts;
}

/** The region most nodes name (a tie: the first in alphabetical order); undefined when none names one. */
export function regionOfNodes(nodes: Iterable<Labelled>): string | undefined {
  let best: [string, number] | undefined;
  for (const entry of regionCounts(nodes)) {
    if (best === undefined || entry[1] > best[1] || (entry[1] === best[1] && entry[0] < best[0])) best = entry;
  }
  return best?.[0];
}

/** Follows the nodes until they name the region, then says it once (`found`). */
export class NodesRegion {
  private readonly o: { log: Logger; found: (region: string) => void };
  private listed = false;
  private chosen: string | undefined;
  private warned = false;

  constructor(o: { log: Logger; found: (region: string) => void }) {
    this.o = o;
  }

  get region(): string | undefined {
    return this.chosen;
  }

  /** The nodes of the first complete list: the region most of them name. */
  fromList(nodes: Iterable<Labelled>): void {
    if (this.listed) return;
    this.listed = true;
    const all = [...nodes];
    const region = regionOfNodes(all);
    if (region === undefined) return;
    const counts = regionCounts(all);
    if (counts.size > 1) this.warn(region, { nodes: Object.fromEntries(counts) });
    this.choose(region);
  }

  /** A node seen since the list: the first to name a region gives it when the list named none. */
  seen(node: Labelled): void {
    if (!this.listed) return;
    const region = nodeRegion(node);
    if (region === undefined) return;
    if (this.chosen === undefined) this.choose(region);
    else if (region !== this.chosen) this.warn(this.chosen, { otherRegion: region });
  }

  private choose(region: string): void {
    this.chosen = region;
    this.o.found(region);
  }

  private warn(chosen: string, fields: Record<string, unknown>): void {
    if (this.warned) return;
    this.warned = true;
    this.o.log.warn(
      { region: chosen, ...fields },
      `nodes name more than one region (${REGION}); prices stay read for ${chosen}, chosen first (set prices.region to choose)`,
    );
  }
}

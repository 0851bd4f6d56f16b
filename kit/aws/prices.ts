// The AWS controller's own on-demand prices: the static table generated into its module
// (pkg/providers/pricing/zz_generated.pricing_aws.go), which it prices with under ISOLATED_VPC, as
// the kit runs it. Read from the copy scripts/control-plane.sh keeps beside the controller, so that
// the local EC2 (kit/aws/moto.ts) ranks `lowest-price` by the very prices Karpenter sees.
import { readFileSync } from 'node:fs';
import { binary } from '../control-plane.ts';

/** One Go source's map literal: `"region": {` blocks of `"type": price,` entries. */
export function parseGoPriceTable(source: string): Record<string, Record<string, number>> {
  const regions: Record<string, Record<string, number>> = {};
  let current: Record<string, number> | undefined;
  for (const line of source.split('\n')) {
    const region = /^\t"([a-z0-9-]+)": \{\s*$/.exec(line);
    if (region) {
      current = regions[region[1]!] = {};
      continue;
    }
    if (/^\t\},?\s*$/.test(line)) {
      current = undefined;
      continue;
    }
    if (!current) continue;
    for (const m of line.matchAll(/"([a-z0-9-]+\.[a-z0-9-]+)": ([0-9.]+)/g)) current[m[1]!] = Number(m[2]);
  }
  return regions;
}

/** On-demand USD an hour per instance type, in `region`, as the controller's table has it. */
export function staticOnDemandPrices(
  region: string,
  table = readFileSync(binary('karpenterAwsPrices'), 'utf8'),
): Map<string, number> {
  const prices = parseGoPriceTable(table)[region];
  if (prices === undefined) throw new Error(`the AWS controller's price table has no region ${region}`);
  if (Object.keys(prices).length === 0)
    throw new Error(`the AWS controller's price table lists no instance type in ${region}`);
  return new Map(Object.entries(prices));
}

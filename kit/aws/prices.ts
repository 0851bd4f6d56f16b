// The AWS controller's own on-demand prices: the static table generated into its module
// (pkg/providers/pricing/zz_generated.pricing_aws.go), which it prices with under ISOLATED_VPC, as
// the kit runs it. Read from the copy scripts/control-plane.sh keeps beside the controller, so that
// the local EC2 (kit/aws/moto.ts) ranks `lowest-price` by the very prices Karpenter sees.
import { readFileSync } from 'node:fs';
import { binary } from '../control-plane.ts';

/** On-demand USD an hour per instance type, in `region`, as the controller's table has it. */
export function staticOnDemandPrices(region: string, table = readFileSync(binary('karpenterAwsPrices'), 'utf8')): Map<string, number> {
  // The table is a Go map literal: `"us-east-1": {` ... `},` per region, `"m5.xlarge": 0.192000,` per type.
  const start = table.indexOf(`\t"${region}": {`);
  if (start < 0) throw new Error(`the AWS controller's price table has no region ${region}`);
  const end = table.indexOf('\n\t},', start);
  const prices = new Map<string, number>();
  for (const m of table.slice(start, end).matchAll(/"([a-z0-9-]+\.[a-z0-9-]+)": ([0-9.]+)/g)) prices.set(m[1]!, Number(m[2]));
  if (prices.size === 0) throw new Error(`the AWS controller's price table lists no instance type in ${region}`);
  return prices;
}

// Karpenter's AWS provider's static on-demand tables (generated from its module by
// scripts/generate-price-table.ts): what Karpenter prices with under ISOLATED_VPC or while the
// Pricing API is out of reach. Like Karpenter, a region without a table of its own takes
// us-east-1's. No spot prices: Karpenter reads those from EC2 only.
import table from './karpenter-static-prices.json' with { type: 'json' };
import { Prices } from './book.ts';

export const STATIC_SOURCE = 'static';
/** Karpenter's fallback region (pricing.go Reset). */
const FALLBACK_REGION = 'us-east-1';

export const staticTableSource: string = table.source;

/** The region whose table prices `region`: its own, or us-east-1's. */
export function staticRegionFor(region: string | undefined): string {
  return region !== undefined && Object.hasOwn(table.regions, region) ? region : FALLBACK_REGION;
}

export function staticOnDemand(region: string | undefined): Map<string, number> {
  const regions = table.regions as Record<string, Record<string, number>>;
  return new Map(Object.entries(regions[staticRegionFor(region)] ?? {}));
}

/** The static table alone: on-demand prices, no spot prices. */
export function staticPrices(region: string | undefined): Prices {
  return new Prices({
    source: STATIC_SOURCE,
    ...(region !== undefined ? { region } : {}),
    onDemand: staticOnDemand(region),
  });
}

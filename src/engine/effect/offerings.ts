// The offerings a world prices for a candidate type, at list prices before any overlay. Which
// offerings is said as data (an OfferingSource), never as a function, so that a priced world's
// memo keys on all of it (memo.ts).
import type { PriceBook } from './prices.ts';

export interface Offering {
  readonly capacityType: string;
  readonly zone: string;
  /** The provider's price before any overlay (on-demand list price, spot price). */
  readonly list: number;
}

export type OfferingSource =
  /** Those EC2 sells the type as: on-demand and spot in every zone given that EC2 offers it in, spot only where it has a price. */
  | { readonly offerings: 'listed'; readonly prices: PriceBook; readonly zones: ReadonlySet<string> }
  /**
   * Every offering Karpenter holds for the type, at no price: both capacity types in each zone
   * given that EC2 offers it in. What an overlay could price anywhere (the price-overlay-applied
   * annotation reads every offering).
   */
  | { readonly offerings: 'every'; readonly prices: PriceBook; readonly zones: ReadonlySet<string> }
  /** Both capacity types in every zone given, at no price: with no price source, only whether an overlay prices one is asked. */
  | { readonly offerings: 'unpriced'; readonly zones: ReadonlySet<string> }
  /** One offering: the one a node runs on. */
  | { readonly offerings: 'one'; readonly capacityType: string; readonly zone: string; readonly list: number };

export function offeringsOf(name: string, source: OfferingSource): Offering[] {
  switch (source.offerings) {
    case 'listed':
      return listOfferings(name, source.prices, source.zones);
    case 'every': {
      const offered = source.prices.offeredZones?.(name);
      return [...source.zones]
        .filter((z) => offered === undefined || offered.has(z))
        .flatMap((zone) => ['on-demand', 'spot'].map((capacityType) => ({ capacityType, zone, list: 0 })));
    }
    case 'unpriced':
      return [...source.zones].flatMap((zone) => [
        { capacityType: 'on-demand', zone, list: 0 },
        { capacityType: 'spot', zone, list: 0 },
      ]);
    case 'one':
      return [{ capacityType: source.capacityType, zone: source.zone, list: source.list }];
  }
}

/**
 * A candidate's offerings at list prices: on-demand and spot in every zone the NodeClass launches
 * into and EC2 offers the type in (a spot offering only where it has a spot price).
 */
function listOfferings(name: string, prices: PriceBook, zones: ReadonlySet<string>): Offering[] {
  const out: Offering[] = [];
  const onDemand = prices.onDemand(name);
  const offered = prices.offeredZones?.(name);
  for (const zone of zones) {
    if (offered !== undefined && !offered.has(zone)) continue;
    if (onDemand !== undefined) out.push({ capacityType: 'on-demand', zone, list: onDemand });
    const spot = prices.spot(name, zone);
    if (spot !== undefined) out.push({ capacityType: 'spot', zone, list: spot });
  }
  return out;
}

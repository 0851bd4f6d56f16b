// List prices from AWS, read the way Karpenter's AWS provider reads them (v1.14.3,
// pkg/providers/pricing/pricing.go): on-demand from the Pricing API's GetProducts (shared tenancy
// and bare metal, Linux, no pre-installed software, capacity "Used", the region's code), spot from
// EC2 DescribeSpotPriceHistory (Linux/UNIX, the latest record per type and zone); and, as Karpenter
// reads them for its offerings, the zones EC2 offers each type in (DescribeInstanceTypeOfferings).
// Needs only pricing:GetProducts, ec2:DescribeSpotPriceHistory and ec2:DescribeInstanceTypeOfferings.
import { EC2Client, paginateDescribeInstanceTypeOfferings, paginateDescribeSpotPriceHistory } from '@aws-sdk/client-ec2';
import { type Filter, paginateGetProducts, PricingClient } from '@aws-sdk/client-pricing';

/** The Pricing API has endpoints in a few regions only (pricing.go NewAPI). */
export function pricingRegion(region: string): string {
  if (region.startsWith('ap-')) return 'ap-south-1';
  if (region.startsWith('cn-')) return 'cn-northwest-1';
  if (region.startsWith('eu-')) return 'eu-central-1';
  return 'us-east-1';
}

const term = (Field: string, Value: string): Filter => ({ Field, Type: 'TERM_MATCH', Value });

interface PriceItem {
  product?: { attributes?: { instanceType?: string } };
  terms?: { OnDemand?: Record<string, { priceDimensions?: Record<string, { pricePerUnit?: Record<string, string> }> }> };
}

/** One GetProducts page's prices (onDemandPage): items without an instance type or a price are skipped. */
export function onDemandPage(priceList: readonly unknown[], currency: string): Map<string, number> {
  const prices = new Map<string, number>();
  for (const raw of priceList) {
    let item: PriceItem;
    try {
      item = (typeof raw === 'string' ? JSON.parse(raw) : JSON.parse(String(raw))) as PriceItem;
    } catch {
      continue;
    }
    const type = item.product?.attributes?.instanceType;
    if (!type) continue;
    for (const t of Object.values(item.terms?.OnDemand ?? {})) {
      for (const d of Object.values(t.priceDimensions ?? {})) {
        const price = Number.parseFloat(d.pricePerUnit?.[currency] ?? '');
        if (Number.isFinite(price) && price !== 0) prices.set(type, price);
      }
    }
  }
  return prices;
}

/** On-demand USD (CNY in China) an hour per instance type in `region`. */
export async function fetchOnDemand(client: PricingClient, region: string, signal: AbortSignal): Promise<Map<string, number>> {
  const currency = region.startsWith('cn-') ? 'CNY' : 'USD';
  const base = [term('regionCode', region), term('serviceCode', 'AmazonEC2'), term('preInstalledSw', 'NA'), term('operatingSystem', 'Linux'), term('capacitystatus', 'Used'), term('marketoption', 'OnDemand')];
  const query = async (extra: Filter[]) => {
    const prices = new Map<string, number>();
    for await (const page of paginateGetProducts({ client }, { ServiceCode: 'AmazonEC2', Filters: [...base, ...extra], MaxResults: 100 }, { abortSignal: signal })) {
      for (const [type, price] of onDemandPage(page.PriceList ?? [], currency)) prices.set(type, price);
    }
    return prices;
  };
  const [shared, metal] = await Promise.all([
    query([term('tenancy', 'Shared'), term('productFamily', 'Compute Instance')]),
    query([term('tenancy', 'Dedicated'), term('productFamily', 'Compute Instance (bare metal)')]),
  ]);
  if (shared.size === 0 || metal.size === 0) throw new Error('no on-demand pricing found');
  return new Map([...shared, ...metal]);
}

/** Spot USD an hour per instance type and zone: EC2's latest record of each. */
export async function fetchSpot(client: EC2Client, now: Date, signal: AbortSignal): Promise<Map<string, Map<string, number>>> {
  const prices = new Map<string, Map<string, number>>();
  const input = { ProductDescriptions: ['Linux/UNIX', 'Linux/UNIX (Amazon VPC)'], StartTime: now, MaxResults: 1000 };
  for await (const page of paginateDescribeSpotPriceHistory({ client }, input, { abortSignal: signal })) {
    for (const record of page.SpotPriceHistory ?? []) {
      const price = Number.parseFloat(record.SpotPrice ?? '');
      if (!Number.isFinite(price) || record.Timestamp === undefined || !record.InstanceType || !record.AvailabilityZone) continue;
      let zones = prices.get(record.InstanceType);
      if (!zones) prices.set(record.InstanceType, (zones = new Map()));
      zones.set(record.AvailabilityZone, price);
    }
  }
  if (prices.size === 0) throw new Error('no spot pricing found');
  return prices;
}

/** The availability zones EC2 offers each instance type in. */
export async function fetchOfferedZones(client: EC2Client, signal: AbortSignal): Promise<Map<string, Set<string>>> {
  const zones = new Map<string, Set<string>>();
  for await (const page of paginateDescribeInstanceTypeOfferings({ client }, { LocationType: 'availability-zone', MaxResults: 1000 }, { abortSignal: signal })) {
    for (const o of page.InstanceTypeOfferings ?? []) {
      if (!o.InstanceType || !o.Location) continue;
      let set = zones.get(o.InstanceType);
      if (!set) zones.set(o.InstanceType, (set = new Set()));
      set.add(o.Location);
    }
  }
  if (zones.size === 0) throw new Error('no instance type offerings found');
  return zones;
}

export function pricingClient(region: string): PricingClient {
  return new PricingClient({ region: pricingRegion(region), maxAttempts: 3 });
}

export function ec2Client(region: string): EC2Client {
  return new EC2Client({ region, maxAttempts: 3 });
}

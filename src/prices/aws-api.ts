// List prices from AWS, read the way Karpenter's AWS provider reads them (v1.14.3,
// pkg/providers/pricing/pricing.go): on-demand from the Pricing API's GetProducts (shared tenancy
// and bare metal, Linux, no pre-installed software, capacity "Used", the region's code), spot from
// EC2 DescribeSpotPriceHistory (Linux/UNIX, the latest record per type and zone); and, as Karpenter
// reads them for its offerings, the zones EC2 offers each type in (DescribeInstanceTypeOfferings);
// and what its allocatable is computed from (DescribeInstanceTypes: vCPUs, memory, architecture,
// ENIs). Needs only pricing:GetProducts, ec2:DescribeSpotPriceHistory,
// ec2:DescribeInstanceTypeOfferings and ec2:DescribeInstanceTypes.
import type { InstanceTypeInfo } from '../engine/index.ts';
import { type AwsClient, type Xml, type XmlElement, items, text } from './aws-client.ts';

interface Filter {
  Field: string;
  Type: 'TERM_MATCH';
  Value: string;
}

const term = (Field: string, Value: string): Filter => ({ Field, Type: 'TERM_MATCH', Value });

interface PriceItem {
  product?: { attributes?: { instanceType?: string } };
  terms?: {
    OnDemand?: Record<string, { priceDimensions?: Record<string, { pricePerUnit?: Record<string, string> }> }>;
  };
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
export async function fetchOnDemand(
  client: AwsClient,
  region: string,
  signal: AbortSignal,
): Promise<Map<string, number>> {
  const currency = region.startsWith('cn-') ? 'CNY' : 'USD';
  const base = [
    term('regionCode', region),
    term('serviceCode', 'AmazonEC2'),
    term('preInstalledSw', 'NA'),
    term('operatingSystem', 'Linux'),
    term('capacitystatus', 'Used'),
    term('marketoption', 'OnDemand'),
  ];
  const query = async (extra: Filter[]) => {
    const prices = new Map<string, number>();
    let next: string | undefined;
    do {
      const page = (await client.pricing(
        'GetProducts',
        {
          ServiceCode: 'AmazonEC2',
          Filters: [...base, ...extra],
          MaxResults: 100,
          ...(next ? { NextToken: next } : {}),
        },
        signal,
      )) as { PriceList?: unknown[]; NextToken?: string };
      for (const [type, price] of onDemandPage(page.PriceList ?? [], currency)) prices.set(type, price);
      next = page.NextToken || undefined;
    } while (next);
    return prices;
  };
  const [shared, metal] = await Promise.all([
    query([term('tenancy', 'Shared'), term('productFamily', 'Compute Instance')]),
    query([term('tenancy', 'Dedicated'), term('productFamily', 'Compute Instance (bare metal)')]),
  ]);
  if (shared.size === 0 || metal.size === 0) throw new Error('no on-demand pricing found');
  return new Map([...shared, ...metal]);
}

/** Every item of an EC2 list action's `set`, following nextToken. */
async function* ec2Items(
  client: AwsClient,
  action: string,
  params: Record<string, string>,
  set: string,
  signal: AbortSignal,
): AsyncGenerator<XmlElement> {
  let next: string | undefined;
  do {
    const page = await client.ec2(action, { ...params, ...(next ? { NextToken: next } : {}) }, signal);
    yield* items(page[set]);
    next = text(page, 'nextToken') || undefined;
  } while (next);
}

/** Spot USD an hour per instance type and zone: EC2's latest record of each. */
export async function fetchSpot(
  client: AwsClient,
  now: Date,
  signal: AbortSignal,
): Promise<Map<string, Map<string, number>>> {
  const prices = new Map<string, Map<string, number>>();
  const params = {
    'ProductDescription.1': 'Linux/UNIX',
    'ProductDescription.2': 'Linux/UNIX (Amazon VPC)',
    StartTime: now.toISOString(),
    MaxResults: '1000',
  };
  for await (const r of ec2Items(client, 'DescribeSpotPriceHistory', params, 'spotPriceHistorySet', signal)) {
    const price = Number.parseFloat(text(r, 'spotPrice') ?? '');
    const type = text(r, 'instanceType');
    const zone = text(r, 'availabilityZone');
    if (!Number.isFinite(price) || text(r, 'timestamp') === undefined || !type || !zone) continue;
    let zones = prices.get(type);
    if (!zones) {
      zones = new Map();
      prices.set(type, zones);
    }
    zones.set(zone, price);
  }
  if (prices.size === 0) throw new Error('no spot pricing found');
  return prices;
}

/** The availability zones EC2 offers each instance type in. */
export async function fetchOfferedZones(client: AwsClient, signal: AbortSignal): Promise<Map<string, Set<string>>> {
  const zones = new Map<string, Set<string>>();
  for await (const o of ec2Items(
    client,
    'DescribeInstanceTypeOfferings',
    { LocationType: 'availability-zone', MaxResults: '1000' },
    'instanceTypeOfferingSet',
    signal,
  )) {
    const type = text(o, 'instanceType');
    const location = text(o, 'location');
    if (!type || !location) continue;
    let set = zones.get(type);
    if (!set) {
      set = new Set();
      zones.set(type, set);
    }
    set.add(location);
  }
  if (zones.size === 0) throw new Error('no instance type offerings found');
  return zones;
}

const child = (node: XmlElement | undefined, name: string): XmlElement | undefined => {
  const v = node?.[name];
  return v !== undefined && typeof v === 'object' && !Array.isArray(v) ? v : undefined;
};

/** A list's `item` texts (`<supportedArchitectures><item>arm64</item></supportedArchitectures>`). */
function texts(list: Xml | Xml[] | undefined): string[] {
  if (list === undefined || typeof list === 'string' || Array.isArray(list)) return [];
  const item = list.item;
  return (Array.isArray(item) ? item : [item]).filter((i): i is string => typeof i === 'string');
}

/**
 * What DescribeInstanceTypes says of each type that the AWS provider's allocatable reads
 * (instancetype/types.go): the default vCPUs, memory, the first architecture, the default network
 * card's ENIs and the IPv4 addresses per ENI. A type missing any of them is left out.
 */
export async function fetchInstanceTypes(
  client: AwsClient,
  signal: AbortSignal,
): Promise<Map<string, InstanceTypeInfo>> {
  const out = new Map<string, InstanceTypeInfo>();
  for await (const t of ec2Items(client, 'DescribeInstanceTypes', { MaxResults: '100' }, 'instanceTypeSet', signal)) {
    const name = text(t, 'instanceType');
    const network = child(t, 'networkInfo');
    const card = Number(text(network ?? {}, 'defaultNetworkCardIndex') ?? 0);
    const cardInfo = items(network?.networkCards).find((c) => Number(text(c, 'networkCardIndex') ?? 0) === card);
    const info = {
      vcpus: Number(text(child(t, 'vCpuInfo') ?? {}, 'defaultVCpus')),
      memoryMiB: Number(text(child(t, 'memoryInfo') ?? {}, 'sizeInMiB')),
      arch: texts(child(t, 'processorInfo')?.supportedArchitectures)[0] ?? '',
      maxENIs: Number(text(cardInfo ?? network ?? {}, 'maximumNetworkInterfaces')),
      ipv4PerENI: Number(text(network ?? {}, 'ipv4AddressesPerInterface')),
    };
    if (name && info.arch && [info.vcpus, info.memoryMiB, info.maxENIs, info.ipv4PerENI].every(Number.isFinite))
      out.set(name, info);
  }
  if (out.size === 0) throw new Error('no instance types described');
  return out;
}

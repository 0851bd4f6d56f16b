// Generated launches for the effect's differential test: an AWS-shaped catalog (up to 600
// instance types, GPUs, accelerators and metal among them) with on-demand and per-zone spot prices
// (spot at 0.2 to 1.1 of on-demand, equal prices, zones without spot), an EC2NodeClass's zones,
// NodePools with and without spot, Veneer's overlay kinds and others (price and priceAdjustment,
// selected or not, equal weights), and NodeClaims as Karpenter's scheduler writes them: candidate
// instance types that the NodeClaim's requirements allow, the capacity types they offer.
import type { JudgeInstanceType, JudgeNodePool, JudgeOverlay, JudgeRequirement } from './karpenter-oracle.ts';
import type { LaunchClaim, LaunchRequest } from './karpenter-oracle.ts';
import type { Choices } from './karpenter-cluster.ts';

export const LAUNCH_REGION = 'us-east-1';
export const ALL_ZONES = ['us-east-1a', 'us-east-1b', 'us-east-1c'];
const inReq = (key: string, ...values: string[]): JudgeRequirement => ({ key, operator: 'In', values });
const absent = (key: string): JudgeRequirement => ({ key, operator: 'DoesNotExist' });

export interface Family {
  name: string;
  category: string;
  generation: string;
  arch: 'amd64' | 'arm64';
  rate: number;
  device?: 'gpu' | 'neuron';
}
export const SIZES: [string, number][] = [
  ['large', 2],
  ['xlarge', 4],
  ['2xlarge', 8],
  ['4xlarge', 16],
  ['8xlarge', 32],
  ['12xlarge', 48],
  ['16xlarge', 64],
  ['24xlarge', 96],
  ['metal', 96],
];

/** Families enough for 600 types: categories x generations x suffixes, and a few with devices. */
export const FAMILIES: Family[] = (() => {
  const out: Family[] = [];
  for (const category of ['c', 'm', 'r', 't', 'x', 'z', 'i', 'd', 'h']) {
    for (const generation of ['5', '6', '7']) {
      for (const suffix of ['', 'i', 'a', 'g', 'n']) {
        out.push({
          name: `${category}${generation}${suffix}`,
          category,
          generation,
          arch: suffix === 'g' ? 'arm64' : 'amd64',
          rate: 0.02 + ((category.charCodeAt(0) * 7 + Number(generation) * 3 + suffix.length) % 11) / 250,
        });
      }
    }
  }
  out.push(
    { name: 'g5', category: 'g', generation: '5', arch: 'amd64', rate: 0.25, device: 'gpu' },
    { name: 'p3', category: 'p', generation: '3', arch: 'amd64', rate: 0.75, device: 'gpu' },
    { name: 'inf2', category: 'inf', generation: '2', arch: 'amd64', rate: 0.19, device: 'neuron' },
  );
  return out;
})();

export interface CatalogType {
  name: string;
  family: Family;
  size: string;
  cpu: number;
  onDemand: number;
  /** Spot price per zone; a zone without one has no spot offering. */
  spot: Record<string, number>;
  /** Zones it is offered in. */
  zones: string[];
}

export interface LaunchCase {
  request: LaunchRequest;
  catalog: Map<string, CatalogType>;
  /** The EC2NodeClass's subnets' zones. */
  zones: string[];
}

export const round = (x: number) => Number(x.toFixed(4));

export function catalogType(
  family: Family,
  size: string,
  cpu: number,
  zones: string[],
  c: Choices,
  equalPrice: number | undefined,
): CatalogType {
  const onDemand = equalPrice ?? round(cpu * family.rate * (c.chance(0.1) ? 1.5 : 1));
  const ratio = c.pick([0.2, 0.3, 0.35, 0.5, 0.7, 0.9, 1, 1.1]);
  const offered = zones.filter(() => !c.chance(0.1));
  if (offered.length === 0) offered.push(zones[0]!);
  const spot: Record<string, number> = {};
  for (const z of offered)
    if (!c.chance(0.08)) spot[z] = c.chance(0.1) ? onDemand : round(onDemand * ratio * (0.9 + c.int(21) / 100));
  return { name: `${family.name}.${size}`, family, size, cpu, onDemand, spot, zones: offered };
}

export function judgeType(t: CatalogType, zones: string[]): JudgeInstanceType {
  const f = t.family;
  const requirements: JudgeRequirement[] = [
    inReq('node.kubernetes.io/instance-type', t.name),
    inReq('kubernetes.io/arch', f.arch),
    inReq('kubernetes.io/os', 'linux'),
    inReq('topology.kubernetes.io/zone', ...t.zones),
    inReq('topology.kubernetes.io/region', LAUNCH_REGION),
    inReq('karpenter.sh/capacity-type', 'on-demand', 'spot'),
    inReq('karpenter.k8s.aws/instance-category', f.category),
    inReq('karpenter.k8s.aws/instance-family', f.name),
    inReq('karpenter.k8s.aws/instance-generation', f.generation),
    inReq('karpenter.k8s.aws/instance-size', t.size),
    inReq('karpenter.k8s.aws/instance-cpu', String(t.cpu)),
    inReq('karpenter.k8s.aws/instance-memory', String(t.cpu * 4096)),
    inReq('karpenter.k8s.aws/instance-hypervisor', t.size === 'metal' ? '' : 'nitro'),
    inReq('karpenter.k8s.aws/instance-tenancy', 'default', 'dedicated'),
    f.device === 'gpu'
      ? inReq('karpenter.k8s.aws/instance-gpu-count', '1')
      : absent('karpenter.k8s.aws/instance-gpu-count'),
    f.device === 'neuron'
      ? inReq('karpenter.k8s.aws/instance-accelerator-count', '1')
      : absent('karpenter.k8s.aws/instance-accelerator-count'),
    absent('node.kubernetes.io/windows-build'),
  ].filter((r) => !(r.key === 'karpenter.k8s.aws/instance-hypervisor' && t.size === 'metal'));
  if (t.size === 'metal') requirements.push(absent('karpenter.k8s.aws/instance-hypervisor'));
  const offerings = zones.flatMap((zone) =>
    (['on-demand', 'spot'] as const).map((ct) => {
      const price = ct === 'on-demand' ? t.onDemand : t.spot[zone];
      return {
        requirements: [inReq('karpenter.sh/capacity-type', ct), inReq('topology.kubernetes.io/zone', zone)],
        price: price ?? t.onDemand,
        available: t.zones.includes(zone) && price !== undefined,
      };
    }),
  );
  const devices: Record<string, string> =
    f.device === 'gpu' ? { 'nvidia.com/gpu': '1' } : f.device === 'neuron' ? { 'aws.amazon.com/neuron': '1' } : {};
  return {
    name: t.name,
    requirements,
    offerings,
    capacity: { cpu: String(t.cpu), memory: `${t.cpu * 4}Gi`, pods: '110', ...devices },
  };
}

/** The labels a registered node of this type carries: every single value among its requirements. */
export function nodeLabelsOfType(t: JudgeInstanceType): Record<string, string> {
  const labels: Record<string, string> = {};
  for (const r of t.requirements) if (r.operator === 'In' && r.values?.length === 1) labels[r.key] = r.values[0]!;
  return labels;
}

const VENEER = { 'app.kubernetes.io/managed-by': 'veneer' };

export function generatedOverlays(
  c: Choices,
  catalog: CatalogType[],
  pools: JudgeNodePool[],
): (JudgeOverlay & { selected: boolean })[] {
  const out: (JudgeOverlay & { selected: boolean })[] = [];
  const odOnly = inReq('karpenter.sh/capacity-type', 'on-demand');
  const someType = () => c.pick(catalog);
  const veneer = c.int(4);
  for (let i = 0; i < veneer; i++) {
    const t = someType();
    switch (c.int(3)) {
      case 0:
        out.push({
          name: `cost-aware-ri-${t.name}-${LAUNCH_REGION}`,
          weight: 30,
          requirements: [odOnly, inReq('node.kubernetes.io/instance-type', t.name)],
          price: '0.00',
          selected: true,
        });
        break;
      case 1:
        out.push({
          name: `cost-aware-ec2-sp-${t.family.name}-${LAUNCH_REGION}`,
          weight: 20,
          requirements: [odOnly, inReq('karpenter.k8s.aws/instance-family', t.family.name)],
          price: '0.00',
          selected: true,
        });
        break;
      default:
        out.push({
          name: 'cost-aware-compute-sp-global',
          weight: 10,
          requirements: [odOnly, { key: 'karpenter.k8s.aws/instance-family', operator: 'Exists' }],
          price: '0.00',
          selected: true,
        });
    }
  }
  const others = c.int(4);
  for (let i = 0; i < others; i++) {
    const t = someType();
    const requirements: JudgeRequirement[] = [];
    if (c.chance(0.6))
      requirements.push(inReq('karpenter.sh/capacity-type', c.pick(['on-demand', 'on-demand', 'spot'])));
    switch (c.int(6)) {
      case 0:
        requirements.push(inReq('karpenter.k8s.aws/instance-family', t.family.name));
        break;
      case 1:
        requirements.push(inReq('karpenter.k8s.aws/instance-category', t.family.category));
        break;
      case 2:
        requirements.push({
          key: 'karpenter.k8s.aws/instance-cpu',
          operator: c.pick(['Gt', 'Lt']),
          values: [c.pick(['2', '4', '8', '16'])],
        });
        break;
      case 3:
        requirements.push(inReq('topology.kubernetes.io/zone', c.pick(ALL_ZONES)));
        break;
      case 4:
        requirements.push(inReq('node.kubernetes.io/instance-type', t.name));
        break;
      default:
        requirements.push(inReq('karpenter.sh/nodepool', c.pick(pools).name));
    }
    if (requirements.length === 0) requirements.push({ key: 'karpenter.k8s.aws/instance-family', operator: 'Exists' });
    const change = c.chance(0.5)
      ? { priceAdjustment: c.pick(['-90%', '-50%', '-20%', '+20%', '-0.05', '+0.1', '-100%']) }
      : { price: c.pick(['0.00', '0.01', '0.05', '0.5']) };
    out.push({
      name: c.pick(['a', 'b', 'pref-default-1', 'team-discount', 'zz']) + String(i),
      weight: c.pick([1, 10, 20, 30, 50]),
      requirements,
      ...change,
      selected: c.chance(0.5),
    });
  }
  // The same name twice would be one overlay.
  const seen = new Set<string>();
  return out.filter((o) => !seen.has(o.name) && seen.add(o.name));
}

/** Overlay labels as the watcher sees them: Veneer's selector label on the selected ones. */
export const overlayLabels = (o: { selected: boolean }) => (o.selected ? VENEER : { team: 'platform' });

export function generateLaunchCase(c: Choices, claims: number): LaunchCase {
  const zones = c.chance(0.7) ? ALL_ZONES : c.some(ALL_ZONES, 2, 2);
  const size = c.next() < 0.7 ? 2 + c.int(14) : c.next() < 0.66 ? 16 + c.int(85) : 100 + c.int(501);
  const equalPrice = c.chance(0.08) ? round(0.1 + c.int(5) / 10) : undefined;
  const names = new Set<string>();
  const catalog: CatalogType[] = [];
  for (let tries = 0; catalog.length < size && tries < size * 5; tries++) {
    const family = c.chance(0.03) ? c.pick(FAMILIES.filter((f) => f.device)) : c.pick(FAMILIES);
    const [sz, cpu] = c.pick(SIZES);
    const name = `${family.name}.${sz}`;
    if (names.has(name)) continue;
    names.add(name);
    catalog.push(catalogType(family, sz, cpu, zones, c, equalPrice));
  }
  const pools: JudgeNodePool[] = ['default', 'batch'].slice(0, 1 + c.int(2)).map((name) => ({
    name,
    labels: (c.chance(0.3) ? { team: 'web' } : {}) as Record<string, string>,
    requirements: [inReq('karpenter.sh/capacity-type', ...(c.chance(0.3) ? ['on-demand'] : ['on-demand', 'spot']))],
  }));
  const launchClaims: LaunchClaim[] = [];
  for (let i = 0; i < claims; i++) {
    const pool = c.pick(pools);
    const arch = c.chance(0.85) ? 'amd64' : 'arm64';
    const claimZones = c.chance(0.2) ? c.some(zones, 1, zones.length) : undefined;
    const poolCapacityTypes = pool.requirements[0]!.values!;
    const allowed = (t: CatalogType) =>
      t.family.arch === arch && t.zones.some((z) => claimZones === undefined || claimZones.includes(z));
    const fit = catalog.filter(allowed);
    if (fit.length === 0) continue;
    const count = Math.min(fit.length, c.next() < 0.6 ? 1 + c.int(5) : 1 + c.int(fit.length));
    const candidates = c
      .some(fit, count, count)
      .map((t) => t.name)
      .sort();
    // The scheduler's capacity types: those the candidates offer, within the NodePool's.
    const offers = (ct: string) =>
      candidates.some((n) => {
        const t = catalog.find((x) => x.name === n)!;
        return t.zones.some(
          (z) =>
            (claimZones === undefined || claimZones.includes(z)) && (ct === 'on-demand' || t.spot[z] !== undefined),
        );
      });
    const capacityTypes = poolCapacityTypes.filter(offers);
    if (!capacityTypes.includes('on-demand')) continue;
    const minValues = candidates.length >= 2 && c.chance(0.03);
    const requirements = [
      { key: 'karpenter.sh/nodepool', operator: 'In', values: [pool.name] },
      { key: 'kubernetes.io/arch', operator: 'In', values: [arch] },
      { key: 'kubernetes.io/os', operator: 'In', values: ['linux'] },
      { key: 'karpenter.sh/capacity-type', operator: 'In', values: capacityTypes },
      {
        key: 'node.kubernetes.io/instance-type',
        operator: 'In',
        values: candidates,
        ...(minValues ? { minValues: 2 } : {}),
      },
      ...(claimZones ? [{ key: 'topology.kubernetes.io/zone', operator: 'In', values: claimZones }] : []),
    ];
    launchClaims.push({ nodePool: pool.name, requirements });
  }
  const request: LaunchRequest = {
    instanceTypes: catalog.map((t) => judgeType(t, zones)),
    nodePools: pools,
    overlays: generatedOverlays(c, catalog, pools),
    zones,
    claims: launchClaims,
    orders: 3,
  };
  return { request, catalog: new Map(catalog.map((t) => [t.name, t])), zones };
}

// Whole generated clusters for the differential test: an AWS-shaped catalog, NodePools (template
// labels, template requirements, kubelet labels), overlays of every operator on keys of every
// kind, and launches. From one case come what Karpenter's controller is given (a JudgeCase) and
// what the watcher is given live: each launched node's labels and NodeClaim as Karpenter and
// the kubelet write them, the NodePools, and the overlays with the statuses Karpenter wrote.
import type { JudgeAnswer, JudgeCase, JudgeInstanceType, JudgeNodePool, JudgeOverlay } from './karpenter-oracle.ts';
import type { NodeObject, NodePoolObject, OverlayObject } from '../../src/engine/index.ts';
import type { NodeClaimObject } from '../../src/engine/node.ts';
import type { RequirementSpec } from '../../src/engine/requirements.ts';

/** A deterministic stream of choices (mulberry32), so that a seed replays a case. */
export class Choices {
  private state: number;
  constructor(seed: number) {
    this.state = seed >>> 0;
  }
  next(): number {
    this.state = (this.state + 0x6d2b79f5) >>> 0;
    let t = this.state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  }
  int(n: number): number {
    return Math.floor(this.next() * n);
  }
  pick<T>(items: readonly T[]): T {
    return items[this.int(items.length)] as T;
  }
  chance(p: number): boolean {
    return this.next() < p;
  }
  some<T>(items: readonly T[], min: number, max: number): T[] {
    const count = min + this.int(max - min + 1);
    const pool = [...items];
    const out: T[] = [];
    while (out.length < count && pool.length > 0) out.push(...pool.splice(this.int(pool.length), 1));
    return out;
  }
}

const ZONES = [
  ['us-west-2a', 'usw2-az1'],
  ['us-west-2b', 'usw2-az2'],
  ['us-west-2c', 'usw2-az3'],
] as const;
const REGION = 'us-west-2';
interface Family {
  name: string;
  category: string;
  generation: string;
  arch: string;
  memoryPerCpu: number;
  gpu?: { name: string; manufacturer: string };
}
const FAMILIES: Family[] = [
  { name: 'm5', category: 'm', generation: '5', arch: 'amd64', memoryPerCpu: 4096 },
  { name: 'c6i', category: 'c', generation: '6', arch: 'amd64', memoryPerCpu: 2048 },
  { name: 'r6g', category: 'r', generation: '6', arch: 'arm64', memoryPerCpu: 8192 },
  { name: 't3', category: 't', generation: '3', arch: 'amd64', memoryPerCpu: 4096 },
  {
    name: 'g5',
    category: 'g',
    generation: '5',
    arch: 'amd64',
    memoryPerCpu: 4096,
    gpu: { name: 'a10g', manufacturer: 'nvidia' },
  },
];
const SIZES = [
  ['large', 2],
  ['xlarge', 4],
  ['2xlarge', 8],
] as const;
const TYPE_NAMES = FAMILIES.flatMap((f) => SIZES.map(([size]) => `${f.name}.${size}`));

const POOLS = ['default', 'batch', 'ml'];
/** Keys a NodePool can put on its nodes without Karpenter comparing them (template requirements, kubelet flags). */
const TIER = 'example.com/tier';
const ROLE = 'example.com/role';

const inReq = (key: string, ...values: string[]): RequirementSpec => ({ key, operator: 'In', values });
const absent = (key: string): RequirementSpec => ({ key, operator: 'DoesNotExist' });

function instanceType(
  family: Family,
  size: string,
  cpu: number,
  zones: readonly (readonly [string, string])[],
  c: Choices,
): JudgeInstanceType {
  const name = `${family.name}.${size}`;
  const gpu = family.gpu;
  const requirements: RequirementSpec[] = [
    inReq('node.kubernetes.io/instance-type', name),
    inReq('kubernetes.io/arch', family.arch),
    inReq('kubernetes.io/os', 'linux'),
    inReq('topology.kubernetes.io/zone', ...zones.map(([z]) => z)),
    inReq('topology.kubernetes.io/region', REGION),
    inReq('topology.k8s.aws/zone-id', ...zones.map(([, id]) => id)),
    inReq('karpenter.sh/capacity-type', 'on-demand', 'spot'),
    inReq('karpenter.k8s.aws/instance-category', family.category),
    inReq('karpenter.k8s.aws/instance-family', family.name),
    inReq('karpenter.k8s.aws/instance-generation', family.generation),
    inReq('karpenter.k8s.aws/instance-size', size),
    inReq('karpenter.k8s.aws/instance-cpu', String(cpu)),
    inReq('karpenter.k8s.aws/instance-memory', String(cpu * family.memoryPerCpu)),
    inReq('karpenter.k8s.aws/instance-hypervisor', 'nitro'),
    // The same two values on every AWS type, in no offering.
    inReq('karpenter.k8s.aws/instance-tenancy', 'default', 'dedicated'),
    gpu ? inReq('karpenter.k8s.aws/instance-gpu-count', '1') : absent('karpenter.k8s.aws/instance-gpu-count'),
    gpu ? inReq('karpenter.k8s.aws/instance-gpu-name', gpu.name) : absent('karpenter.k8s.aws/instance-gpu-name'),
    gpu
      ? inReq('karpenter.k8s.aws/instance-gpu-manufacturer', gpu.manufacturer)
      : absent('karpenter.k8s.aws/instance-gpu-manufacturer'),
    absent('node.kubernetes.io/windows-build'),
  ];
  const base = cpu * (0.04 + c.int(10) / 1000);
  return {
    name,
    requirements,
    offerings: zones.flatMap(([zone, id]) =>
      (['on-demand', 'spot'] as const).map((ct) => ({
        requirements: [
          inReq('karpenter.sh/capacity-type', ct),
          inReq('topology.kubernetes.io/zone', zone),
          inReq('topology.k8s.aws/zone-id', id),
        ],
        price: Number((ct === 'spot' ? base * 0.4 : base).toFixed(4)),
        available: true,
      })),
    ),
    capacity: { cpu: String(cpu), memory: `${cpu * family.memoryPerCpu}Mi`, pods: '58' },
  };
}

interface Pool extends JudgeNodePool {
  /** Labels the kubelet adds (--node-labels): on the node, never compared. */
  kubeletLabels: Record<string, string>;
}

function nodePool(name: string, c: Choices): Pool {
  const labels: Record<string, string> = {};
  if (c.chance(0.5)) labels.team = c.pick(['web', 'ml']);
  // A template label on an instance-type key narrows the pool to that family.
  if (c.chance(0.15)) labels['karpenter.k8s.aws/instance-family'] = c.pick(FAMILIES).name;
  const requirements: RequirementSpec[] = [inReq('karpenter.sh/capacity-type', 'on-demand', 'spot')];
  if (c.chance(0.5)) requirements.push(inReq(TIER, c.pick(['gold', 'silver'])));
  return { name, labels, requirements, kubeletLabels: c.chance(0.5) ? { [ROLE]: 'worker' } : {} };
}

const NUMERIC: Record<string, string[]> = {
  'karpenter.k8s.aws/instance-cpu': ['1', '2', '3', '4', '7', '8', '16'],
  'karpenter.k8s.aws/instance-memory': ['4096', '8191', '8192', '16384', '32768'],
  'karpenter.k8s.aws/instance-gpu-count': ['0', '1'],
  'karpenter.k8s.aws/instance-generation': ['3', '5', '6'],
};
const VALUES: Record<string, string[]> = {
  'karpenter.sh/capacity-type': ['on-demand', 'spot'],
  'karpenter.k8s.aws/instance-family': FAMILIES.map((f) => f.name),
  'karpenter.k8s.aws/instance-category': ['m', 'c', 'r', 'g'],
  'node.kubernetes.io/instance-type': TYPE_NAMES,
  'beta.kubernetes.io/instance-type': TYPE_NAMES,
  'topology.kubernetes.io/zone': ZONES.map(([z]) => z),
  'failure-domain.beta.kubernetes.io/zone': ZONES.map(([z]) => z),
  'topology.k8s.aws/zone-id': ZONES.map(([, id]) => id),
  'topology.kubernetes.io/region': [REGION, 'us-east-1'],
  'kubernetes.io/arch': ['amd64', 'arm64'],
  'karpenter.k8s.aws/instance-gpu-name': ['a10g', 't4'],
  'karpenter.k8s.aws/instance-tenancy': ['default', 'dedicated'],
  'karpenter.sh/nodepool': POOLS,
  team: ['web', 'ml'],
  [TIER]: ['gold', 'silver'],
  [ROLE]: ['worker'],
  'karpenter.sh/registered': ['true'],
  'kubernetes.io/hostname': ['node-1'],
};
// Keys the node carries that Karpenter does not compare (or compares only as a template label) are drawn twice as often.
const KEYS = [...Object.keys(VALUES), ...Object.keys(NUMERIC), 'team', TIER, ROLE];
/** Keys Karpenter refuses in a requirement (RuntimeValidation): drawn rarely. */
const RESTRICTED = new Set(['karpenter.sh/registered', 'kubernetes.io/hostname']);

function requirement(c: Choices): RequirementSpec {
  let key = c.pick(KEYS);
  if (RESTRICTED.has(key) && !c.chance(0.2)) key = 'karpenter.k8s.aws/instance-family';
  const numeric = NUMERIC[key];
  const op =
    numeric && c.chance(0.6)
      ? c.pick(['Gt', 'Lt', 'Gte', 'Lte'])
      : c.pick(['In', 'In', 'In', 'NotIn', 'Exists', 'DoesNotExist']);
  switch (op) {
    case 'Exists':
    case 'DoesNotExist':
      return { key, operator: op };
    case 'In':
    case 'NotIn':
      return { key, operator: op, values: c.some(numeric ?? VALUES[key] ?? [], 1, 3) };
    default:
      return { key, operator: op, values: [c.pick(numeric ?? ['1'])] };
  }
}

const OVERLAY_NAMES = [
  'a',
  'b',
  'c',
  'ab',
  'b1',
  'zz',
  'cost-aware-compute-sp-global',
  'cost-aware-ec2-sp-m5-us-west-2',
  'cost-aware-ri-m5.xlarge-us-west-2',
  'pref-default-1',
];

function overlay(name: string, c: Choices, pools: readonly Pool[]): JudgeOverlay {
  const requirements: RequirementSpec[] = [];
  // Veneer's own shapes, and arbitrary ones.
  if (c.chance(0.5)) requirements.push(inReq('karpenter.sh/capacity-type', 'on-demand'));
  const extra = c.int(4);
  for (let i = 0; i < extra; i++) requirements.push(requirement(c));
  if (c.chance(0.1)) requirements.push(inReq('karpenter.sh/nodepool', c.pick(pools).name));
  const weight = c.pick([undefined, 1, 10, 10, 20, 20, 30]);
  const kind = c.next();
  const change =
    kind < 0.7
      ? { price: '0.00' }
      : kind < 0.85
        ? { priceAdjustment: '-20%' }
        : kind < 0.95
          ? { capacity: { 'example.com/device': '1' } }
          : { price: '0.00', capacity: { 'example.com/device': '2' } };
  return { name, ...(weight !== undefined ? { weight } : {}), requirements, ...change };
}

export interface Launch {
  pool: Pool;
  type: JudgeInstanceType;
  offering: number;
}

export interface GeneratedCluster {
  judgeCase: JudgeCase;
  pools: Pool[];
  launches: Launch[];
}

/** One cluster: 6-15 instance types, 1-3 NodePools, 1-7 overlays, `launchCount` on-demand launches. */
export function generateCluster(c: Choices, launchCount: number): GeneratedCluster {
  const types: JudgeInstanceType[] = [];
  for (const family of c.some(FAMILIES, 2, FAMILIES.length)) {
    for (const [size, cpu] of c.some(SIZES, 1, SIZES.length))
      types.push(instanceType(family, size, cpu, c.some(ZONES, 1, 3), c));
  }
  const pools = c.some(POOLS, 1, 3).map((name) => nodePool(name, c));
  const overlays = c.some(OVERLAY_NAMES, 1, 7).map((name) => overlay(name, c, pools));
  const launches: Launch[] = [];
  for (let tries = 0; launches.length < launchCount && tries < launchCount * 20; tries++) {
    const pool = c.pick(pools);
    const type = c.pick(types);
    // Karpenter launches only what the NodePool's template labels allow.
    const family = pool.labels['karpenter.k8s.aws/instance-family'];
    if (family !== undefined && !type.name.startsWith(`${family}.`)) continue;
    const onDemand = type.offerings
      .map((o, i) => [o, i] as const)
      .filter(([o]) => o.requirements[0]?.values?.[0] === 'on-demand');
    launches.push({ pool, type, offering: c.pick(onDemand)[1] });
  }
  const judgeCase: JudgeCase = {
    instanceTypes: types,
    nodePools: pools.map(({ name, labels, requirements }) => ({ name, labels, requirements })),
    overlays,
    launches: launches.map((l) => ({ nodePool: l.pool.name, instanceType: l.type.name, offering: l.offering })),
  };
  return { judgeCase, pools, launches };
}

const DEPRECATED_COPIES: Record<string, string> = {
  'kubernetes.io/arch': 'beta.kubernetes.io/arch',
  'kubernetes.io/os': 'beta.kubernetes.io/os',
  'node.kubernetes.io/instance-type': 'beta.kubernetes.io/instance-type',
  'topology.kubernetes.io/zone': 'failure-domain.beta.kubernetes.io/zone',
  'topology.kubernetes.io/region': 'failure-domain.beta.kubernetes.io/region',
};

/** A single-valued In requirement becomes a label; DoesNotExist and several values do not. */
function requirementLabels(reqs: readonly RequirementSpec[]): Record<string, string> {
  const out: Record<string, string> = {};
  for (const r of reqs) if (r.operator === 'In' && r.values?.length === 1) out[r.key] = r.values[0] as string;
  return out;
}

/** The NodeClaim Karpenter writes for a launch, and the Node once registered (kubelet labels included). */
export function launchedObjects(
  l: Launch,
  name: string,
  launchedAt: string,
): { node: NodeObject; claim: NodeClaimObject } {
  const offering = l.type.offerings[l.offering];
  const claimLabels: Record<string, string> = {
    ...requirementLabels(l.pool.requirements),
    ...requirementLabels(l.type.requirements),
    ...requirementLabels(offering?.requirements ?? []),
    ...l.pool.labels,
    'karpenter.sh/nodepool': l.pool.name,
  };
  const providerID = `aws:///${claimLabels['topology.kubernetes.io/zone']}/i-${name}`;
  // The node runs on one tenancy, though the type admits both.
  const kubelet: Record<string, string> = {
    ...l.pool.kubeletLabels,
    'kubernetes.io/hostname': name,
    'karpenter.k8s.aws/ec2nodeclass': 'default',
    'karpenter.k8s.aws/instance-tenancy': 'default',
  };
  for (const [stable, deprecated] of Object.entries(DEPRECATED_COPIES)) {
    const value = claimLabels[stable];
    if (value !== undefined) kubelet[deprecated] = value;
  }
  return {
    claim: {
      metadata: { name: `${name}-claim`, labels: claimLabels, creationTimestamp: launchedAt },
      status: { providerID, nodeName: name },
    },
    node: {
      metadata: {
        name,
        labels: { ...kubelet, ...claimLabels, 'karpenter.sh/registered': 'true', 'karpenter.sh/initialized': 'true' },
        creationTimestamp: launchedAt,
        ownerReferences: [{ apiVersion: 'karpenter.sh/v1', kind: 'NodeClaim', name: `${name}-claim` }],
      },
      spec: { providerID },
    },
  };
}

/** The overlays as the watcher reads them: Veneer's selector label, and the status Karpenter wrote. */
export function watchedOverlays(c: JudgeCase, answer: JudgeAnswer, createdAt: string): OverlayObject[] {
  return c.overlays.map((o) => ({
    metadata: {
      name: o.name,
      labels: { 'app.kubernetes.io/managed-by': 'veneer' },
      creationTimestamp: createdAt,
      generation: o.generation ?? 1,
    },
    spec: {
      requirements: o.requirements,
      ...(o.weight !== undefined && o.weight !== null ? { weight: o.weight } : {}),
      ...(o.price !== undefined ? { price: o.price } : {}),
      ...(o.priceAdjustment !== undefined ? { priceAdjustment: o.priceAdjustment } : {}),
      ...(o.capacity !== undefined ? { capacity: o.capacity } : {}),
    },
    status: { conditions: answer.statuses[o.name]?.conditions ?? [] },
  }));
}

export function watchedNodePools(pools: readonly Pool[], createdAt: string): NodePoolObject[] {
  return pools.map((p) => ({
    metadata: { name: p.name, creationTimestamp: createdAt },
    spec: { template: { metadata: { labels: p.labels } } },
  }));
}

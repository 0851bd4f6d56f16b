// Generated clusters for the replacement's differential test: the launch test's AWS-shaped catalog
// (amd64, no devices or metal: consolidation's options are what pods fit), NodePools on-demand only
// or with spot (mostly on-demand only: the watcher records on-demand nodes, and a replacement is
// on-demand only where spot is excluded; a third with minValues), Veneer's overlays and others
// (test/judges/launch-cases.ts), and running nodes with pods; in two clusters of five, small
// lightly filled nodes of one type and an overlay pricing a type their pods fit below theirs; in one
// of two, a selected overlay discounting a node's own type, with a cheaper type of another family
// its pods fit (replacement-discount.ts); in two of five, NodePools that consolidate Balanced,
// with pods of several eviction costs (pod-deletion-cost), so that scores fall on both sides of 1/2.
// Each node is asked alone, all together, the small ones together, and some sets of two or three,
// of Karpenter's consolidation (computeConsolidation, filterOutSameInstanceType for several) in
// both worlds. Once the catalog is sized, some NodePools get a limit (withLimits).
import type {
  ConsolidateNode,
  ConsolidateNodePool,
  ConsolidateRequest,
  JudgeNodePoolRequirement,
  JudgeOverlay,
} from './karpenter-oracle.ts';
import { Choices } from './karpenter-cluster.ts';
import { parseQuantity } from '../../src/engine/quantity.ts';
import {
  ALL_ZONES,
  type CatalogType,
  catalogType,
  FAMILIES,
  generatedOverlays,
  judgeType,
  round,
  SIZES,
} from './launch-cases.ts';
import { ownDiscount } from './replacement-discount.ts';

export interface ConsolidationCase {
  request: ConsolidateRequest;
  catalog: Map<string, CatalogType>;
  zones: string[];
}

const inReq = (key: string, ...values: string[]) => ({ key, operator: 'In', values });

export function generateConsolidationCase(c: Choices): ConsolidationCase {
  const zones = c.chance(0.6) ? ALL_ZONES.slice(0, 1) : c.some(ALL_ZONES, 2, 3).sort();
  const families = FAMILIES.filter((f) => f.arch === 'amd64' && f.device === undefined);
  const sizes = SIZES.filter(([s, cpu]) => s !== 'metal' && cpu <= 16);
  const equalPrice = c.chance(0.05) ? round(0.1 + c.int(5) / 10) : undefined;
  const size = 3 + c.int(c.chance(0.8) ? 12 : 40);
  const catalog: CatalogType[] = [];
  const names = new Set<string>();
  for (let tries = 0; catalog.length < size && tries < size * 5; tries++) {
    const family = c.pick(families);
    const [sz, cpu] = c.pick(sizes);
    const name = `${family.name}.${sz}`;
    if (names.has(name)) continue;
    names.add(name);
    catalog.push(catalogType(family, sz, cpu, zones, c, equalPrice));
  }
  const pools: ConsolidateNodePool[] = ['od', 'other'].slice(0, 1 + (c.chance(0.3) ? 1 : 0)).map((name, i) => {
    const capacityTypes = i === 0 || c.chance(0.5) ? ['on-demand'] : c.pick([['on-demand', 'spot'], ['spot']]);
    const families = c.chance(0.5) ? [...new Set(c.some(catalog, 1, 4).map((t) => t.family.name))] : undefined;
    return {
      name,
      labels: (c.chance(0.2) ? { team: 'web' } : {}) as Record<string, string>,
      requirements: [
        inReq('karpenter.sh/capacity-type', ...capacityTypes),
        inReq('kubernetes.io/arch', 'amd64'),
        ...(families ? [inReq('karpenter.k8s.aws/instance-family', ...families)] : []),
      ],
      ...(c.chance(0.3) ? { weight: 1 + c.int(50) } : {}),
    };
  });
  // minValues, which consolidation's filters require of the options left in both worlds.
  for (const pool of pools) {
    if (!c.chance(0.35)) continue;
    const families = pool.requirements.find((r) => r.key === 'karpenter.k8s.aws/instance-family');
    const key = c.pick([
      'node.kubernetes.io/instance-type',
      'karpenter.k8s.aws/instance-family',
      'karpenter.k8s.aws/instance-cpu',
    ]);
    if (key === 'karpenter.k8s.aws/instance-family' && families?.values !== undefined)
      (families as JudgeNodePoolRequirement).minValues = 1 + c.int(Math.min(2, families.values.length));
    else pool.requirements.push({ key, operator: 'Exists', minValues: 2 + c.int(2) });
  }
  const allowedIn = (pool: ConsolidateNodePool, t: CatalogType) => {
    const families = pool.requirements.find((r) => r.key === 'karpenter.k8s.aws/instance-family')?.values;
    return families === undefined || families.includes(t.family.name);
  };
  const nodes: ConsolidateNode[] = [];
  const packed = c.chance(0.4) ? packing(c, catalog, pools[0]!, allowedIn) : undefined;
  if (packed) nodes.push(...packed.nodes);
  const count = nodes.length + 1 + c.int(c.chance(0.5) ? 2 : 5);
  for (let i = 0; nodes.length < count && i < count * 4; i++) {
    const pool = c.pick(pools);
    const capacityTypes = pool.requirements[0]!.values!;
    // Mostly larger types than the pods need: consolidation then looks for a cheaper one.
    const allowed = catalog.filter((x) => allowedIn(pool, x));
    const larger = allowed.filter((x) => x.cpu >= 4);
    if (allowed.length === 0) continue;
    const t = c.pick(larger.length > 0 && c.chance(0.7) ? larger : allowed);
    const zone = c.pick(t.zones);
    const capacityType = c.pick(capacityTypes) as 'on-demand' | 'spot';
    if (capacityType === 'spot' && t.spot[zone] === undefined) continue;
    // Pods that fill a share of its allocatable CPU: little of it, and consolidation looks for a
    // smaller type; most of it, and the others' room cannot take them (no deletion).
    const allocatable = t.cpu * 1000 - 200;
    const target = Math.floor(allocatable * c.pick([0.2, 0.35, 0.5, 0.7, 0.9]));
    const parts = 1 + c.int(3);
    const pods = Array.from({ length: parts }, () => ({
      cpu: `${Math.max(50, Math.floor(target / parts))}m`,
      memory: c.pick(['128Mi', '512Mi', '1Gi']),
    }));
    nodes.push({ name: `n${nodes.length}`, nodePool: pool.name, instanceType: t.name, zone, capacityType, pods });
  }
  const commands: string[][] = nodes.map((n) => [n.name]);
  // Every node at once: they cannot all be deleted, so consolidation must replace them if anything.
  if (nodes.length >= 2) commands.push(nodes.map((n) => n.name));
  if (packed && nodes.length > packed.nodes.length) commands.push(packed.nodes.map((n) => n.name));
  if (nodes.length >= 3)
    for (let k = 0, m = c.int(3); k < m; k++)
      commands.push(
        c
          .some(nodes, 2, Math.min(3, nodes.length))
          .map((n) => n.name)
          .sort(),
      );
  // Overlays on the catalog's types and families, with the NodePools' names (launch-cases.ts).
  const overlays = generatedOverlays(
    c,
    catalog,
    pools.map((p) => ({ name: p.name, labels: p.labels, requirements: [] })),
  );
  if (packed) overlays.push(packed.overlay);
  const discount = c.chance(0.5) ? ownDiscount(c, catalog, nodes, pools, zones) : undefined;
  if (discount) overlays.push(discount.overlay);
  if (discount?.added) catalog.push(discount.added);
  // A commitment on one type or family, discounted rather than free: what makes a replacement
  // cheaper than a node it would not undercut at list prices.
  if (c.chance(0.6)) {
    const t = c.pick(catalog);
    const byFamily = c.chance(0.4);
    overlays.push({
      name: `commitment-${byFamily ? t.family.name : t.name}`,
      weight: 40,
      requirements: [
        inReq('karpenter.sh/capacity-type', 'on-demand'),
        byFamily
          ? inReq('karpenter.k8s.aws/instance-family', t.family.name)
          : inReq('node.kubernetes.io/instance-type', t.name),
      ],
      ...(c.chance(0.5) ? { price: '0.00' } : { priceAdjustment: c.pick(['-30%', '-60%', '-90%']) }),
      selected: true,
    });
  }
  if (c.chance(0.4)) balanced(c, pools, nodes);
  return {
    request: {
      instanceTypes: catalog.map((t) => judgeType(t, zones)),
      nodePools: pools,
      overlays,
      nodes,
      commands,
      spotToSpot: c.chance(0.5),
    },
    catalog: new Map(catalog.map((t) => [t.name, t])),
    zones,
  };
}

/**
 * Balanced consolidation in some NodePools: it scores a move by its savings' share of the pool's
 * cost against its disruption's share of the pool's, a node's disruption 1 plus its pods' eviction
 * costs (1 each by default; pod-deletion-cost adds cost/2^27, clamped to [-10, 10], and a negative
 * one counts 0).
 */
function balanced(c: Choices, pools: ConsolidateNodePool[], nodes: ConsolidateNode[]): void {
  for (const pool of pools) if (pool === pools[0] || c.chance(0.5)) pool.consolidationPolicy = 'Balanced';
  for (const node of nodes)
    for (const pod of node.pods) if (c.chance(0.4)) pod.deletionCost = String(c.pick([-2, 1, 3, 8]) * 2 ** 27);
}

/**
 * Small on-demand nodes of one type, lightly filled (their pods often fit one of them), and an
 * overlay that prices another type the pods fit below theirs: a command of several of them is
 * what filterOutSameInstanceType decides, with the overlay and without it.
 */
function packing(
  c: Choices,
  catalog: CatalogType[],
  pool: ConsolidateNodePool,
  allowedIn: (pool: ConsolidateNodePool, t: CatalogType) => boolean,
): { nodes: ConsolidateNode[]; overlay: JudgeOverlay & { selected: boolean } } | undefined {
  const allowed = catalog.filter((x) => allowedIn(pool, x));
  const small = allowed.filter((x) => x.cpu <= 4);
  if (small.length === 0) return undefined;
  const own = c.pick(small);
  const into = allowed.filter((x) => x !== own && x.cpu >= own.cpu);
  if (into.length === 0) return undefined;
  const target = c.pick(into);
  const nodes = Array.from({ length: 2 + c.int(3) }, (_, i) => {
    const milli = Math.floor(own.cpu * 1000 * c.pick([0.1, 0.15, 0.2, 0.3, 0.45]));
    const parts = 1 + c.int(2);
    return {
      name: `p${i}`,
      nodePool: pool.name,
      instanceType: own.name,
      zone: c.pick(own.zones),
      capacityType: 'on-demand' as const,
      pods: Array.from({ length: parts }, () => ({
        cpu: `${Math.max(50, Math.floor(milli / parts))}m`,
        memory: c.pick(['128Mi', '256Mi', '512Mi']),
      })),
    };
  });
  const below = c.pick([0, 0.3, 0.6, 0.9]);
  return {
    nodes,
    overlay: {
      name: `packing-${target.name}`,
      weight: 45,
      requirements: [
        inReq('karpenter.sh/capacity-type', 'on-demand'),
        inReq('node.kubernetes.io/instance-type', target.name),
      ],
      price: String(round(own.onDemand * below)),
      selected: c.chance(0.85),
    },
  };
}

const LIMITED = ['cpu', 'memory', 'pods'] as const;

/** A type's capacity of `resource`, as the judge's sized type carries it. */
export function capacityOf(c: ConsolidationCase, type: string, resource: string): number {
  const quantity = c.request.instanceTypes.find((x) => x.name === type)?.capacity[resource];
  return parseQuantity(quantity) ?? 0;
}

/**
 * In three clusters of ten, a limit on CPU, memory or pods for each NodePool in turn: what its nodes
 * hold plus what one of the catalog's types holds, a half to three times over. Karpenter's simulation
 * leaves the candidates out, so the limit leaves a replacement that and the candidates' own: the
 * types over it are no option in either world. Drawn from their own choices after the catalog is
 * sized (capacity by the provider's code), so the clusters without limits stay as they were.
 */
function withLimits(c: ConsolidationCase, choices: Choices): void {
  if (!choices.chance(0.3)) return;
  for (const pool of c.request.nodePools) {
    if (pool !== c.request.nodePools[0] && !choices.chance(0.5)) continue;
    const resource = choices.pick(LIMITED);
    const used = c.request.nodes
      .filter((n) => n.nodePool === pool.name)
      .reduce((sum, n) => sum + capacityOf(c, n.instanceType, resource), 0);
    const extra = capacityOf(c, choices.pick(c.request.instanceTypes).name, resource) * choices.pick([0.5, 1, 1.5, 3]);
    pool.limits = { [resource]: String(Math.floor(used + extra)) };
  }
}

/**
 * In one cluster of five across several zones, a NodePool's replacements must span two or three
 * zones (`topology.kubernetes.io/zone Exists`, minValues): consolidation's filters count a type's
 * zones as the AWS provider's requirements hold them. From their own choices, as withLimits.
 */
function withZoneMinValues(c: ConsolidationCase, choices: Choices): void {
  if (c.zones.length < 2 || !choices.chance(0.2)) return;
  const pool = choices.pick(c.request.nodePools);
  pool.requirements.push({
    key: 'topology.kubernetes.io/zone',
    operator: 'Exists',
    minValues: 2 + choices.int(c.zones.length - 1),
  });
}

/**
 * In one cluster of five, a NodePool's capacity types get minValues (one in four of them two, which
 * an on-demand replacement cannot meet): consolidation's filters count each option's capacity
 * types, its usage classes among those the replacement allows. From their own choices, as withLimits.
 */
function withCapacityTypeMinValues(c: ConsolidationCase, choices: Choices): void {
  if (!choices.chance(0.2)) return;
  const pool = choices.pick(c.request.nodePools);
  const capacityTypes = pool.requirements.find((r) => r.key === 'karpenter.sh/capacity-type')!;
  (capacityTypes as JudgeNodePoolRequirement).minValues = choices.chance(0.25) ? 2 : 1;
}

/** Mixed into a cluster's seed, one per shape, so a shape's choices leave the rest of the cluster as it was. */
const LIMITS_STREAM = 0x4c494d;
const ZONES_STREAM = 0x5a4f4e;
const CAPACITY_STREAM = 0x434150;

/**
 * The shapes given once the catalog is sized (limits read the types' capacity): NodePool limits,
 * zones' and capacity types' minValues, each from its own stream of the cluster's `seed`.
 */
export function withShapes(c: ConsolidationCase, seed: number): void {
  withLimits(c, new Choices(seed ^ LIMITS_STREAM));
  withZoneMinValues(c, new Choices(seed ^ ZONES_STREAM));
  withCapacityTypeMinValues(c, new Choices(seed ^ CAPACITY_STREAM));
}

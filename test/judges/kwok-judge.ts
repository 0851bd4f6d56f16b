// What real Karpenter with its KWOK provider (kit/karpenter.ts) was given, as a case for the judge
// (test/judges/oracle): the instance types exactly as KWOK builds them from its catalog file
// (kwok/cloudprovider/helpers.go newInstanceType), the NodePools, the overlays, and per launched
// node its (NodePool, instance type, offering).
import type { KwokInstanceType, KwokNodePool } from '../../kit/karpenter.ts';
import { nodePoolRequirements } from '../../kit/karpenter.ts';
import type { OverlayObject } from '../../src/engine/index.ts';
import type {
  JudgeCase,
  JudgeInstanceType,
  JudgeLaunch,
  JudgeNodePool,
  JudgeOverlay,
  JudgeRequirement,
} from './karpenter-oracle.ts';

const inReq = (key: string, ...values: string[]): JudgeRequirement => ({ key, operator: 'In', values });
const AWS_SIZE = /^\w+\.(nano|micro|small|medium|large|\d*xlarge|metal)$/;

/** KWOK's parseSizeFromType and parseFamilyFromType. */
function sizeAndFamily(name: string, cpu: string): [string, string] {
  const parts = name.split(/[.-]/);
  return [AWS_SIZE.exec(name)?.[1] ?? cpu, parts.length < 2 ? name.slice(0, 1) : parts[0]!];
}

export function judgeInstanceTypes(catalog: KwokInstanceType[]): JudgeInstanceType[] {
  return catalog.map((t) => {
    const cpu = t.resources.cpu ?? '';
    const [size, family] = sizeAndFamily(t.name, cpu);
    const valuesOf = (key: string) => [
      ...new Set(t.offerings.flatMap((o) => o.Requirements.find((r) => r.key === key)?.values ?? [])),
    ];
    return {
      name: t.name,
      requirements: [
        inReq('node.kubernetes.io/instance-type', t.name),
        inReq('kubernetes.io/arch', t.architecture),
        inReq('kubernetes.io/os', ...t.operatingSystems),
        inReq('topology.kubernetes.io/zone', ...valuesOf('topology.kubernetes.io/zone')),
        inReq('karpenter.sh/capacity-type', ...valuesOf('karpenter.sh/capacity-type')),
        inReq('karpenter.kwok.sh/instance-size', size),
        inReq('karpenter.kwok.sh/instance-family', family),
        inReq('karpenter.kwok.sh/instance-cpu', cpu),
        inReq('karpenter.kwok.sh/instance-memory', t.resources.memory ?? ''),
      ],
      offerings: t.offerings.map((o) => ({ requirements: o.Requirements, price: o.Price, available: true })),
      capacity: { pods: '110', ...t.resources },
    };
  });
}

export function judgeNodePools(pools: KwokNodePool[]): JudgeNodePool[] {
  return pools.map((p) => ({ name: p.name, labels: p.labels ?? {}, requirements: nodePoolRequirements(p) }));
}

export function judgeOverlays(overlays: OverlayObject[]): JudgeOverlay[] {
  return overlays.map((o) => {
    const spec = o.spec ?? {};
    return {
      name: o.metadata?.name ?? '',
      weight: spec.weight ?? null,
      generation: o.metadata?.generation ?? 1,
      requirements: (spec.requirements ?? []) as JudgeRequirement[],
      ...(typeof spec.price === 'string' ? { price: spec.price } : {}),
      ...(typeof spec.priceAdjustment === 'string' ? { priceAdjustment: spec.priceAdjustment } : {}),
      ...(spec.capacity ? { capacity: spec.capacity as Record<string, string> } : {}),
    };
  });
}

export function kwokJudgeCase(
  catalog: KwokInstanceType[],
  pools: KwokNodePool[],
  overlays: OverlayObject[],
  launches: JudgeLaunch[] = [],
): JudgeCase {
  return {
    instanceTypes: judgeInstanceTypes(catalog),
    nodePools: judgeNodePools(pools),
    overlays: judgeOverlays(overlays),
    launches,
  };
}

// What real Karpenter with its AWS provider (kit/aws/karpenter.ts) launched, as a case for the judge
// (test/judges/oracle): each launched instance type with the requirements the AWS provider gave
// it, read back from a node of that type (the provider's instance-type keys, test/judges/aws-instance-keys
// checks the set; a key the type lacks is DoesNotExist, as the provider defines it), its offerings
// per zone and capacity type as the local EC2 priced them, the NodePools and the overlays.
import type * as k8s from '@kubernetes/client-node';
import { type AwsNodePool, awsNodePoolObject, ZONES } from '../../kit/aws/karpenter.ts';
import type { SpotCatalog } from '../../kit/aws/moto.ts';
import type { OverlayObject } from '../../src/engine/index.ts';
import { AWS_KEYS } from '../../src/engine/providers.ts';
import type { JudgeCase, JudgeInstanceType, JudgeLaunch, JudgeRequirement } from './karpenter-oracle.ts';
import { judgeOverlays } from './kwok-judge.ts';

const CAPACITY_TYPE = 'karpenter.sh/capacity-type';
const ZONE = 'topology.kubernetes.io/zone';

function judgeInstanceType(labels: Record<string, string>, catalog: SpotCatalog): JudgeInstanceType {
  const name = labels['node.kubernetes.io/instance-type']!;
  const spot = catalog.prices[name]?.spot ?? {};
  const offerings = ZONES.flatMap((zone) => [
    {
      requirements: [
        { key: CAPACITY_TYPE, operator: 'In', values: ['on-demand'] },
        { key: ZONE, operator: 'In', values: [zone] },
      ],
      price: catalog.prices[name]?.onDemand ?? 1,
      available: true,
    },
    ...(spot[zone] === undefined
      ? []
      : [
          {
            requirements: [
              { key: CAPACITY_TYPE, operator: 'In', values: ['spot'] },
              { key: ZONE, operator: 'In', values: [zone] },
            ],
            price: spot[zone]!,
            available: true,
          },
        ]),
  ]);
  const requirements: JudgeRequirement[] = [...AWS_KEYS.instanceTypeKeys].map((key) => {
    const fixed = AWS_KEYS.fixedValues?.get(key);
    if (fixed) return { key, operator: 'In', values: [...fixed] };
    if (key === CAPACITY_TYPE)
      return { key, operator: 'In', values: [...new Set(offerings.map((o) => o.requirements[0]!.values[0]!))] };
    if (key === ZONE) return { key, operator: 'In', values: [...ZONES] };
    const value = labels[key];
    return value === undefined ? { key, operator: 'DoesNotExist' } : { key, operator: 'In', values: [value] };
  });
  return {
    name,
    requirements,
    offerings,
    capacity: {
      cpu: labels['karpenter.k8s.aws/instance-cpu'] ?? '2',
      memory: `${labels['karpenter.k8s.aws/instance-memory'] ?? '8192'}Mi`,
      pods: '110',
    },
  };
}

/** The judge's case for these launched nodes (one launch each, in order). */
export function awsJudgeCase(
  nodes: k8s.V1Node[],
  pools: AwsNodePool[],
  overlays: OverlayObject[],
  catalog: SpotCatalog,
): JudgeCase {
  const types = new Map<string, JudgeInstanceType>();
  const launches: JudgeLaunch[] = nodes.map((n) => {
    const labels = n.metadata?.labels ?? {};
    const type = labels['node.kubernetes.io/instance-type']!;
    if (!types.has(type)) types.set(type, judgeInstanceType(labels, catalog));
    const offering = types
      .get(type)!
      .offerings.findIndex(
        (o) =>
          o.requirements[0]!.values?.[0] === labels[CAPACITY_TYPE] && o.requirements[1]!.values?.[0] === labels[ZONE],
      );
    if (offering < 0)
      throw new Error(`${n.metadata?.name}: no ${labels[CAPACITY_TYPE]} offering of ${type} in ${labels[ZONE]}`);
    return { nodePool: labels['karpenter.sh/nodepool']!, instanceType: type, offering };
  });
  const nodePools = pools.map((p) => {
    const o = awsNodePoolObject(p);
    return { name: p.name, labels: o.spec.template.metadata.labels, requirements: o.spec.template.spec.requirements };
  });
  return { instanceTypes: [...types.values()], nodePools, overlays: judgeOverlays(overlays), launches };
}

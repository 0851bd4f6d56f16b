// The cluster `scale-100k` grows: node i and its NodeClaim as Karpenter and the watcher leave
// them (real-size, about 20 KB and 5 KB as served; four in five on-demand with a record of about
// 1.2 KB, one in five spot), over eight instance types in three zones, and the overlays that
// recorded them.
import { recordKeys } from '../src/engine/index.ts';
import { realNode, realNodeClaim } from '../kit/real-node.ts';
import { computeSavingsPlan, ec2InstanceSavingsPlan, reservedInstance } from '../kit/veneer.ts';

const KEYS = recordKeys('veneer.io');
const TYPES = [
  'm5.large',
  'm5.xlarge',
  'm5.2xlarge',
  'c6i.large',
  'c6i.xlarge',
  'c6i.2xlarge',
  'r6i.large',
  'r6i.xlarge',
];
const ZONES = ['us-west-2a', 'us-west-2b', 'us-west-2c'];
export const OVERLAYS = [
  computeSavingsPlan(),
  ...['m5', 'c6i', 'r6i'].map((family) => ec2InstanceSavingsPlan(family, 'us-west-2')),
  ...TYPES.map((type) => reservedInstance(type, 'us-west-2')),
];

/** A record as the watcher writes it: the labels and a decision annotation with its effect (about 1.2 KB). */
function record(type: string, i: number, at: string): { labels: Record<string, string>; story: string } {
  const overlay = `cost-aware-ri-${type}-us-west-2`;
  const labeledAt = `${at.slice(0, 19).replaceAll('-', '').replaceAll(':', '')}Z`;
  const story = {
    influenced: true,
    overlay,
    weight: 30,
    price: '0.00',
    decidedBy: i % 10 === 0 ? 'reconciler' : 'webhook',
    evaluatedAt: at,
    labeledAt: at,
    basis: 'exact',
    characteristicsFrom: 'node+nodeclaim',
    nodeClaim: `claim-${i}`,
    provider: 'aws',
    providerFrom: 'nodeclaim',
    effect: {
      verdict: 'capacity-type',
      overlays: [overlay],
      prices: { source: 'aws', asOf: at },
      launched: { listPrice: 0.192, price: 0 },
      with: { capacityType: 'on-demand', strategy: 'prioritized', instanceTypes: [type], listPrice: 0.192 },
      without: { capacityType: 'spot', strategy: 'price-capacity-optimized', instanceTypes: TYPES },
    },
    labels: KEYS.ownedLabels,
  };
  return {
    labels: {
      [KEYS.influenced]: 'true',
      [KEYS.matchingOverlay]: overlay,
      [KEYS.copied['capacity-type']]: 'reserved-instance',
      [KEYS.copied['instance-family']]: type.split('.')[0]!,
      [KEYS.copied['instance-type']]: type,
      [KEYS.copied.region]: 'us-west-2',
      [KEYS.effect]: 'capacity-type',
      [KEYS.labeledAt]: labeledAt,
    },
    story: JSON.stringify(story),
  };
}

/** Node i and its NodeClaim, as Karpenter and the watcher leave them. */
export function nodeAndClaim(i: number) {
  const type = TYPES[i % TYPES.length]!;
  const zone = ZONES[i % ZONES.length]!;
  const spot = i % 5 === 4;
  const shape = {
    name: `ip-10-${(i >> 16) & 255}-${(i >> 8) & 255}-${i & 255}.us-west-2.compute.internal`,
    index: i,
    instanceType: type,
    zone,
    capacityType: spot ? 'spot' : 'on-demand',
    claimName: `claim-${i}`,
  } as const;
  const node = realNode(shape);
  const claim = realNodeClaim(shape);
  node.metadata!.ownerReferences = [
    {
      apiVersion: 'karpenter.sh/v1',
      kind: 'NodeClaim',
      name: shape.claimName,
      uid: `claim-uid-${i}`,
      blockOwnerDeletion: true,
    },
  ];
  if (!spot) {
    const r = record(type, i, new Date().toISOString());
    Object.assign(node.metadata!.labels!, r.labels);
    node.metadata!.annotations = { ...node.metadata!.annotations, [KEYS.decisionAnnotation]: r.story };
  }
  return { node, claim, influenced: !spot };
}

// A NodePool's limits inside consolidation's simulation (src/engine/disruption/limits.ts): a type
// whose capacity, as the AWS provider computes it, is over the limit was no option in either world;
// one over only what the pool's other nodes left may have been. The shape is the one real Karpenter
// on AWS showed (test/aws/limits.test.ts): a c6i.large under a -50% overlay on c6i, a limit of 30
// pods, and the RI overlay's m5.large (29 pods) replacing it while t3.large (35 pods, the cheapest
// without the overlays) is over the limit.
import t from 'tap';
import { replacementEffect } from '../../../src/engine/disruption/controller.ts';
import { roomOf } from '../../../src/engine/disruption/limits.ts';
import { NodePoolHistory } from '../../../src/engine/nodepool.ts';
import { reasonOf } from '../../../src/engine/disruption/reasons.ts';
import type { Candidate } from '../../../src/engine/disruption/types.ts';
import type { FitSizing } from '../../../src/engine/effect/allocatable.ts';
import { AL2023 as sizing, DESCRIBED } from './described.ts';
import { internedCandidate } from '../../../src/engine/effect/candidates.ts';
import type { PriceBook } from '../../../src/engine/effect/prices.ts';
import { type Allocatable, toNodeClaimView, toNodePoolView, toOverlayView } from '../../../src/engine/index.ts';
import { AWS_KEYS } from '../../../src/engine/providers.ts';
import { ec2InstanceSavingsPlan, reservedInstance } from '../../../kit/veneer.ts';

const ZONE = 'us-east-1a';
const OD: Record<string, number> = { 'm5.large': 0.096, 'c6i.large': 0.085, 't3.large': 0.0832 };
const prices: PriceBook = {
  source: 'test',
  asOf: 0,
  region: 'us-east-1',
  hasSpot: false,
  onDemand: (x) => OD[x],
  spot: () => undefined,
  instanceTypes: () => Object.keys(OD),
  instanceInfo: (x) => DESCRIBED[x],
};
const type = (name: string) => internedCandidate(name, {}, undefined, AWS_KEYS.instanceTypeKeys);
const poolWith = (limits?: Record<string, string>) =>
  toNodePoolView({ metadata: { name: 'od' }, ...(limits ? { spec: { limits } } : {}) });
const GI = 2 ** 30;

t.test("a type's room in the limits, from its capacity as the provider computes it", async (t) => {
  const room = (limits: Record<string, string>, used?: Allocatable, s: Partial<FitSizing> = {}) =>
    roomOf({ pool: poolWith(limits), used, prices, sizing: { ...sizing, ...s } });
  t.equal(roomOf({ pool: poolWith(), used: undefined, prices, sizing }), undefined, 'no limits: nothing to say');
  t.equal(room({ nodes: '3' }), undefined, 'a nodes limit stops every type or none');
  const pods30 = room({ pods: '30' })!;
  t.equal(pods30(type('t3.large')), 'over', 't3.large holds 35 pods (3 ENIs x 11 + 2)');
  t.equal(pods30(type('m5.large')), 'within', 'm5.large holds 29');
  const left = room({ pods: '40' }, { cpu: 2, memory: 4 * GI, pods: 29 })!;
  t.equal(left(type('t3.large')), 'unsure', 'within the limit, over what the other node may have left');
  t.equal(left(type('m5.large')), 'unsure');
  t.equal(room({ pods: '64' }, { cpu: 2, memory: 4 * GI, pods: 29 })!(type('t3.large')), 'within');
  const memory = room({ memory: '7Gi' })!;
  t.equal(memory(type('c6i.large')), 'within', 'c6i.large: 4096 MiB less 7.5%');
  t.equal(memory(type('m5.large')), 'over', 'm5.large: 8192 MiB less 7.5% is 7.4Gi');
  t.equal(
    room({ memory: '7.7Gi' }, undefined, { registered: new Set(['m5.large']) })!(type('m5.large')),
    'unsure',
    'a registered type: the provider holds the memory its node reported, not the formula',
  );
  t.equal(room({ cpu: '1' })!(type('m5.large')), 'over', '2 vCPUs');
  t.equal(room({ cpu: 'lots' })!(type('m5.large')), 'unsure', 'a limit that is not a quantity');
  t.equal(room({ 'nvidia.com/gpu': '0' })!(type('m5.large')), 'within', 'no devices: 0 of a GPU');
  t.equal(room({ 'nvidia.com/gpu': '0' })!(type('p3.2xlarge')), 'unsure', 'a GPU type: its count is not known');
  t.equal(room({ 'ephemeral-storage': '100Gi' })!(type('m5.large')), 'unsure', 'the NodeClass sizes the disk');
  t.equal(
    roomOf({
      pool: poolWith({ pods: '30' }),
      used: undefined,
      prices: { ...prices, instanceInfo: undefined },
      sizing,
    })!(type('t3.large')),
    'unsure',
    'no DescribeInstanceTypes: no capacity',
  );
});

const halfC6i = (() => {
  const o = ec2InstanceSavingsPlan('c6i', 'us-east-1');
  return toOverlayView({ ...o, spec: { requirements: o.spec?.requirements, weight: 20, priceAdjustment: '-50%' } });
})();
const RI = toOverlayView(reservedInstance('m5.large', 'us-east-1'));
const replacementClaim = toNodeClaimView({
  metadata: { name: 'replacement' },
  spec: {
    requirements: [
      { key: 'node.kubernetes.io/instance-type', operator: 'In', values: ['m5.large'] },
      { key: 'karpenter.k8s.aws/instance-family', operator: 'In', values: ['c6i', 'm5', 't3'] },
      { key: 'karpenter.sh/capacity-type', operator: 'In', values: ['on-demand'] },
      { key: 'kubernetes.io/arch', operator: 'In', values: ['amd64'] },
      { key: 'topology.kubernetes.io/zone', operator: 'In', values: [ZONE] },
    ],
    resources: { requests: { cpu: '500m', memory: '64Mi', pods: '1' } },
  },
}).launch!;

function replaced(limits?: Record<string, string>, used?: Allocatable) {
  const pool = poolWith(limits);
  const candidate: Candidate = {
    nodeClaim: 'old',
    node: 'ip-old',
    labels: {
      'node.kubernetes.io/instance-type': 'c6i.large',
      'karpenter.sh/capacity-type': 'on-demand',
      'topology.kubernetes.io/zone': ZONE,
      'karpenter.k8s.aws/instance-family': 'c6i',
      'kubernetes.io/arch': 'amd64',
    },
    pool,
  };
  return replacementEffect(
    { reason: reasonOf('Underutilized'), candidates: [candidate], churn: [], ...(used ? { used } : {}) },
    {
      provider: AWS_KEYS,
      launched: { instanceType: 'm5.large', capacityType: 'on-demand' },
      claim: replacementClaim,
      pool,
      counted: [
        { overlay: halfC6i, selected: true },
        { overlay: RI, selected: true },
      ],
      conflicted: [],
      prices,
      zones: new Set([ZONE]),
      sizing,
    },
  );
}

t.test('a type over the limit, cut by price with the overlays, is no option without them either', async (t) => {
  const unlimited = replaced();
  t.equal(unlimited.verdict, 'instance-type', 'no limit: without the overlays t3.large undercuts the $0.085/h node');
  t.same(unlimited.without?.instanceTypes, ['t3.large']);
  const limited = replaced({ pods: '30' });
  t.equal(limited.verdict, 'replacement', limited.reason ?? '');
  t.equal(limited.disruption?.replacedWithout, false, 'without the overlays nothing within the limit undercuts it');
  t.same(limited.disruption?.price, { with: 0.0425, without: 0.085 });
  const crowded = replaced({ pods: '40' }, { cpu: 2, memory: 4 * GI, pods: 29 });
  t.equal(crowded.verdict, 'unknown', 'another node of the pool may have left t3.large no room');
  t.equal(crowded.reasonCode, 'unseen-options');
  t.match(crowded.reason, /t3\.large .*limits left room for it/);
  t.equal(replaced({ pods: '64' }, { cpu: 2, memory: 4 * GI, pods: 29 }).verdict, 'instance-type', 'room enough');
});

t.test("a NodePool's limits, read as numbers, and a change of them starts a version", async (t) => {
  const history = new NodePoolHistory();
  const v1 = poolWith({ cpu: '1000', memory: '1000Gi', pods: '30', nodes: '10' });
  t.same(v1.limits, { cpu: 1000, memory: 1000 * GI, pods: 30, nodes: 10 });
  t.ok(Number.isNaN(poolWith({ cpu: 'lots' }).limits!.cpu!), 'not a quantity: NaN, which every type is unsure of');
  history.observe(v1, 1000);
  history.observe(poolWith({ cpu: '1000', memory: '1000Gi', pods: '30', nodes: '10' }), 2000);
  history.observe(poolWith({ pods: '40' }), 3000);
  t.same(history.at('od', 2500)?.limits?.pods, 30, 'the same limits: the same version');
  t.same(history.at('od', 3500)?.limits, { pods: 40 }, 'a decision after the change reads the new limits');
});

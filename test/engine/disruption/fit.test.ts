// Whether the replacement's pods fit a type, as Karpenter's scheduling answers it
// (src/engine/disruption/fit.ts exactFitOf): the NodeClaim's requirements and requests against the
// type's allocatable as the AWS provider computes it; undefined wherever the watcher cannot say what
// Karpenter holds. The guess from kept options and replaced NodeClaims (fitShown, tooSmall) is
// exercised through consolidation in test/engine/disruption/consolidation.test.ts.
import t from 'tap';
import { exactFitOf } from '../../../src/engine/disruption/fit.ts';
import { nodeClassSizing } from '../../../src/engine/effect/allocatable.ts';
import { AL2023 as sizing, DESCRIBED } from './described.ts';
import { internedCandidate } from '../../../src/engine/effect/candidates.ts';
import type { PriceBook } from '../../../src/engine/effect/prices.ts';
import type { ClaimForEffect } from '../../../src/engine/effect/types.ts';
import { AWS_KEYS } from '../../../src/engine/providers.ts';
import { toNodeClaimView } from '../../../src/engine/index.ts';

const prices: PriceBook = {
  source: 'test',
  asOf: 0,
  region: 'us-east-1',
  hasSpot: false,
  onDemand: () => 0.1,
  spot: () => undefined,
  instanceInfo: (x) => DESCRIBED[x],
};
const type = (name: string) => internedCandidate(name, {}, undefined, AWS_KEYS.instanceTypeKeys);

function claim(requests: Record<string, string>, arch = 'amd64'): ClaimForEffect {
  return toNodeClaimView({
    metadata: { name: 'replacement' },
    spec: {
      requirements: [
        { key: 'node.kubernetes.io/instance-type', operator: 'In', values: ['m5.large'] },
        { key: 'kubernetes.io/arch', operator: 'In', values: [arch] },
        { key: 'karpenter.sh/capacity-type', operator: 'In', values: ['on-demand'] },
      ],
      resources: { requests },
    },
  }).launch!;
}

t.test("the pods fit a type when its allocatable holds the requests, as Karpenter's scheduling tests it", async (t) => {
  // c6i.large on AL2023: 1930m, 3114 MiB, 29 pods (what real Karpenter on AWS writes in its NodeClaims).
  const fits = exactFitOf({
    claim: claim({ cpu: '1930m', memory: '3114Mi', pods: '29' }),
    provider: AWS_KEYS,
    prices,
    sizing,
  });
  t.equal(fits(type('c6i.large')), true, 'exactly its allocatable');
  const over = exactFitOf({ claim: claim({ cpu: '1', memory: '3115Mi' }), provider: AWS_KEYS, prices, sizing });
  t.equal(over(type('c6i.large')), false, 'a MiB more memory than it holds');
  t.equal(over(type('m5.large')), true, 'm5.large holds twice the memory');
  const pods = exactFitOf({ claim: claim({ cpu: '100m', pods: '30' }), provider: AWS_KEYS, prices, sizing });
  t.equal(pods(type('m5.large')), false, 'its ENIs hold 29 pods');
  const arm = exactFitOf({ claim: claim({ cpu: '100m' }), provider: AWS_KEYS, prices, sizing });
  t.equal(arm(type('m6g.large')), false, 'an arm64 type, where the NodeClaim asks for amd64');
  t.equal(
    exactFitOf({ claim: claim({ cpu: '100m' }, 'arm64'), provider: AWS_KEYS, prices, sizing })(type('m6g.large')),
    true,
  );
});

t.test('no answer where the watcher cannot say what Karpenter holds', async (t) => {
  const c = claim({ cpu: '1', memory: '1Gi' });
  const ask = (o: Partial<Parameters<typeof exactFitOf>[0]>, name = 'm5.large') =>
    exactFitOf({ claim: c, provider: AWS_KEYS, prices, sizing, ...o })(type(name));
  t.equal(ask({}), true);
  t.equal(ask({ sizing: undefined }), undefined, "the NodeClass's settings unknown");
  t.equal(
    ask({ sizing: { ...sizing, registered: new Set(['m5.large']) } }),
    undefined,
    'a node of the type registered: its memory may be the one it reported',
  );
  t.equal(
    ask({ sizing: { ...sizing, nodeClass: nodeClassSizing({ kubelet: { maxPods: 'self.vcpus * 8' } }) } }),
    undefined,
    'a CEL expression in the kubelet settings',
  );
  t.equal(
    ask({ prices: { ...prices, instanceInfo: undefined } }),
    undefined,
    'the price source does not describe types',
  );
  t.equal(ask({}, 'x9.large'), undefined, 'a type EC2 did not describe');
  t.equal(
    ask({
      sizing: {
        ...sizing,
        nodeClass: nodeClassSizing({
          amiSelectorTerms: [{ alias: 'al2023@latest' }],
          kubelet: { systemReserved: { memory: '9.5Gi' } },
        }),
      },
    }),
    undefined,
    "reservations past the type's memory: Karpenter's quantities give a figure of their own there",
  );
  t.equal(
    exactFitOf({ claim: claim({ cpu: '1', 'nvidia.com/gpu': '1' }), provider: AWS_KEYS, prices, sizing })(
      type('m5.large'),
    ),
    undefined,
    'a request besides CPU, memory and pods',
  );
});

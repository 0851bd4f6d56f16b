// What Karpenter's AWS provider holds a type to hold for pods (src/engine/effect/allocatable.ts),
// worked by hand for the types one meets first, and an EC2NodeClass read as the provider reads it.
// The provider's own code judges the arithmetic on 20,000 generated types and settings in
// test/judges/allocatable-differential.test.ts.
import t from 'tap';
import { awsAllocatable, KARPENTER_DEFAULTS, nodeClassSizing } from '../../../src/engine/effect/allocatable.ts';

const MI = 2 ** 20;
const m5large = { vcpus: 2, memoryMiB: 8192, arch: 'x86_64', maxENIs: 3, ipv4PerENI: 10 };

t.test('m5.large on AL2023 with no kubelet settings', async (t) => {
  // pods: 3 ENIs x (10 - 1) + 2 = 29. memory: 8192 MiB less ceil(7.5%) = 615 MiB, less kube-reserved
  // 11 x 29 + 255 = 574 MiB and the eviction threshold's 100 MiB. CPU: 6% of the first core, 1% of the second.
  t.same(awsAllocatable(m5large, {}, 'AL2023'), { cpu: 2000 - 60 - 10, memory: (7577 - 574 - 100) * MI, pods: 29 });
});

t.test('the settings that move it', async (t) => {
  t.equal(awsAllocatable(m5large, { maxPods: 110 }, 'AL2023').pods, 110, 'maxPods');
  t.equal(
    awsAllocatable(m5large, { maxPods: 110 }, 'AL2023').memory,
    (7577 - 574 - 100) * MI,
    "AL2023's kube-reserved memory reads the ENI-limited pods, whatever maxPods says",
  );
  t.equal(
    awsAllocatable(m5large, { maxPods: 110 }, 'Bottlerocket').memory,
    (7577 - (11 * 110 + 255) - 100) * MI,
    "Bottlerocket's reads the pods it runs",
  );
  t.equal(awsAllocatable(m5large, {}, 'Windows2022').pods, 110, 'Windows: no ENI-limited density');
  t.equal(awsAllocatable(m5large, { podsPerCore: 4 }, 'AL2023').pods, 8, 'podsPerCore x vCPUs');
  t.equal(awsAllocatable(m5large, { podsPerCore: 4 }, 'Bottlerocket').pods, 29, 'Bottlerocket ignores podsPerCore');
  t.equal(
    awsAllocatable(m5large, { kubeReserved: { cpu: '100m', memory: '1Gi' } }, 'AL2023').cpu,
    1900,
    'kubeReserved replaces the formula',
  );
  t.equal(
    awsAllocatable(m5large, { evictionHard: { 'memory.available': '10%' } }, 'AL2023').memory,
    (7577 - 574) * MI - Math.ceil((7577 * MI) / 10),
    'a percentage of the capacity, rounded up',
  );
  t.equal(
    awsAllocatable(m5large, { evictionHard: { 'memory.available': '100%' } }, 'AL2023').memory,
    (7577 - 574) * MI,
    '100% disables the threshold',
  );
  t.equal(
    awsAllocatable({ ...m5large, arch: 'arm64' }, {}, 'AL2023').memory,
    (8128 - Math.ceil(8128 * 0.075) - 574 - 100) * MI,
    'Graviton: 64 MiB less first',
  );
  t.equal(awsAllocatable(m5large, {}, 'AL2023', { ...KARPENTER_DEFAULTS, reservedENIs: 1 }).pods, 20, 'reserved ENIs');
  t.equal(awsAllocatable(m5large, {}, 'AL2023', { ...KARPENTER_DEFAULTS, reservedENIs: 3 }).pods, 0, 'none left');
  t.equal(
    awsAllocatable(m5large, {}, 'AL2023', KARPENTER_DEFAULTS, 7800 * MI).memory,
    (7800 - 574 - 100) * MI,
    "a registered node's memory in place of the formula's",
  );
  t.throws(
    () => awsAllocatable(m5large, { systemReserved: { memory: 'lots' } }, 'AL2023'),
    /systemReserved memory: "lots" is not a quantity/,
  );
});

t.test('an EC2NodeClass as the provider reads it', async (t) => {
  t.same(nodeClassSizing({ amiSelectorTerms: [{ alias: 'al2023@latest' }] }), {
    amiFamily: 'AL2023',
    kubelet: {},
    expressions: false,
  });
  t.equal(nodeClassSizing({ amiSelectorTerms: [{ alias: 'bottlerocket@v1.30.0' }] }).amiFamily, 'Bottlerocket');
  t.equal(
    nodeClassSizing({ amiFamily: 'AL2', amiSelectorTerms: [{ alias: 'al2023@latest' }] }).amiFamily,
    'AL2',
    'spec.amiFamily first',
  );
  t.equal(nodeClassSizing({ amiSelectorTerms: [{ id: 'ami-1' } as never] }).amiFamily, 'Custom', 'no alias: Custom');
  t.equal(
    nodeClassSizing({ amiSelectorTerms: [{ alias: 'plan9@latest' }] }).amiFamily,
    undefined,
    'an alias of no family known',
  );
  t.same(nodeClassSizing({ kubelet: { maxPods: 58, evictionHard: { 'memory.available': '5%' } } }).kubelet, {
    maxPods: 58,
    evictionHard: { 'memory.available': '5%' },
  });
  t.ok(nodeClassSizing({ kubelet: { maxPods: 'self.vcpus * 8' } }).expressions, "v1.15.0's CEL maxPods");
  t.ok(
    nodeClassSizing({ kubelet: { kubeReserved: { memory: 'self.memory_mib / 10' } } }).expressions,
    'a CEL reservation',
  );
  t.notOk(nodeClassSizing(undefined).expressions);
});

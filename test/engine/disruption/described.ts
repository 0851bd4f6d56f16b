// What the engine tests of the pods' fit read of instance types: DescribeInstanceTypes as EC2 (and
// the kit's moto) answers it, and an AL2023 EC2NodeClass with no kubelet settings and no node of
// any type registered yet (fit.test.ts, consolidation.test.ts, limits.test.ts).
import {
  type FitSizing,
  type InstanceTypeInfo,
  KARPENTER_DEFAULTS,
  nodeClassSizing,
} from '../../../src/engine/effect/allocatable.ts';

export const DESCRIBED: Readonly<Record<string, InstanceTypeInfo>> = {
  'm5.large': { vcpus: 2, memoryMiB: 8192, arch: 'x86_64', maxENIs: 3, ipv4PerENI: 10 },
  'c6i.large': { vcpus: 2, memoryMiB: 4096, arch: 'x86_64', maxENIs: 3, ipv4PerENI: 10 },
  'r6i.large': { vcpus: 2, memoryMiB: 16384, arch: 'x86_64', maxENIs: 3, ipv4PerENI: 10 },
  't3.large': { vcpus: 2, memoryMiB: 8192, arch: 'x86_64', maxENIs: 3, ipv4PerENI: 12 },
  'm6g.large': { vcpus: 2, memoryMiB: 8192, arch: 'arm64', maxENIs: 3, ipv4PerENI: 10 },
  'p3.2xlarge': { vcpus: 8, memoryMiB: 62464, arch: 'x86_64', maxENIs: 4, ipv4PerENI: 15 },
};

export const AL2023: FitSizing = {
  nodeClass: nodeClassSizing({ amiSelectorTerms: [{ alias: 'al2023@latest' }] }),
  settings: KARPENTER_DEFAULTS,
  registered: new Set(),
};

// A generated catalog sized as Karpenter's AWS provider sizes it: each type described as
// DescribeInstanceTypes would (its vCPUs, 4 GiB per vCPU, its family's architecture, ENIs and
// addresses per ENI growing with the size as EC2's do), an EC2NodeClass's AMI family and kubelet
// settings, and each type's capacity and overhead computed by the provider's own code (v1.14.3's
// judge: test/judges/oracle allocatable_aws.go). The judge's instance types then have Karpenter's
// allocatable, and the engine gets what the watcher reads live: DescribeInstanceTypes through the
// price source, the NodeClass's settings.
import {
  type InstanceTypeInfo,
  KARPENTER_DEFAULTS,
  type NodeClassSizing,
  nodeClassSizing,
} from '../../src/engine/effect/allocatable.ts';
import type { Choices } from './karpenter-cluster.ts';
import type { AllocatableAnswer, JudgeInstanceType, KarpenterJudge } from './karpenter-oracle.ts';
import type { CatalogType } from './launch-cases.ts';

export interface CaseSizing {
  readonly nodeClass: NodeClassSizing;
  /** DescribeInstanceTypes, by type. */
  readonly info: ReadonlyMap<string, InstanceTypeInfo>;
  /** The provider's figures, by type. */
  readonly allocatable: ReadonlyMap<string, AllocatableAnswer>;
}

/** EC2's default-card ENIs and IPv4 addresses per ENI, by vCPUs (m5's and c6i's: 3 x 10 at 2, 15 x 50 from 64). */
function network(vcpus: number): { maxENIs: number; ipv4PerENI: number } {
  if (vcpus <= 2) return { maxENIs: 3, ipv4PerENI: 10 };
  if (vcpus <= 8) return { maxENIs: 4, ipv4PerENI: 15 };
  if (vcpus < 64) return { maxENIs: 8, ipv4PerENI: 30 };
  return { maxENIs: 15, ipv4PerENI: 50 };
}

/** An EC2NodeClass: mostly AL2023 with no kubelet settings, as most are; sometimes Bottlerocket, AL2, a maxPods or reservations. */
function nodeClassOf(c: Choices) {
  const kubelet: Record<string, unknown> = {};
  if (c.chance(0.2)) kubelet.maxPods = c.pick([58, 110]);
  if (c.chance(0.15)) kubelet.kubeReserved = { cpu: '200m', memory: c.pick(['1Gi', '600Mi']) };
  if (c.chance(0.15)) kubelet.systemReserved = { memory: '500Mi' };
  if (c.chance(0.15)) kubelet.evictionHard = { 'memory.available': c.pick(['5%', '200Mi']) };
  const family = c.pick(['al2023', 'al2023', 'al2023', 'bottlerocket', 'al2']);
  return { amiSelectorTerms: [{ alias: `${family}@latest` }], kubelet };
}

/** Sizes `types` (the judge's, changed in place) by the provider's code; `catalog` tells each type's family. */
export async function sizeCatalog(
  types: JudgeInstanceType[],
  catalog: ReadonlyMap<string, CatalogType>,
  c: Choices,
  judge: KarpenterJudge,
): Promise<CaseSizing> {
  const spec = nodeClassOf(c);
  const nodeClass = nodeClassSizing(spec);
  const info = new Map<string, InstanceTypeInfo>();
  for (const t of types) {
    const type = catalog.get(t.name)!;
    info.set(t.name, {
      vcpus: type.cpu,
      memoryMiB: type.cpu * 4096,
      arch: type.family.arch === 'arm64' ? 'arm64' : 'x86_64',
      ...network(type.cpu),
    });
  }
  const answers = await judge.allocatable(
    types.map((t) => ({
      ...info.get(t.name)!,
      amiFamily: nodeClass.amiFamily!,
      ...nodeClass.kubelet,
      ...KARPENTER_DEFAULTS,
    })),
  );
  const allocatable = new Map<string, AllocatableAnswer>();
  for (const [i, t] of types.entries()) {
    const a = answers[i]!;
    t.capacity = { ...t.capacity, ...a.capacity };
    t.overhead = a.overhead;
    allocatable.set(t.name, a);
  }
  return { nodeClass, info, allocatable };
}

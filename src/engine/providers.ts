// The label keys a Karpenter cloud provider defines for an instance type and its offerings.
// Karpenter's NodeOverlay controller compares an overlay with the NodePool's name and template
// labels plus these requirements (pkg/controllers/nodeoverlay, getOverlaidOfferings), never
// with the node's labels: any other key on a node is undefined for it.

export interface ProviderKeys {
  readonly name: string;
  /** Keys in an instance type's requirements (a type that lacks an attribute defines it as DoesNotExist). */
  readonly instanceTypeKeys: ReadonlySet<string>;
  /** Keys in an offering's requirements; those absent from the instance type's narrow only NotIn. */
  readonly offeringKeys: ReadonlySet<string>;
}

// karpenter-provider-aws, pkg/providers/instancetype (checked against its code by
// test/engine/provider-keys.test.ts).
export const AWS_KEYS: ProviderKeys = {
  name: 'aws',
  instanceTypeKeys: new Set([
    'node.kubernetes.io/instance-type',
    'kubernetes.io/arch',
    'kubernetes.io/os',
    'node.kubernetes.io/windows-build',
    'topology.kubernetes.io/zone',
    'topology.kubernetes.io/region',
    'topology.k8s.aws/zone-id',
    'karpenter.sh/capacity-type',
    'karpenter.k8s.aws/capacity-reservation-id',
    'karpenter.k8s.aws/capacity-reservation-type',
    'karpenter.k8s.aws/instance-category',
    'karpenter.k8s.aws/instance-family',
    'karpenter.k8s.aws/instance-generation',
    'karpenter.k8s.aws/instance-size',
    'karpenter.k8s.aws/instance-cpu',
    'karpenter.k8s.aws/instance-cpu-manufacturer',
    'karpenter.k8s.aws/instance-cpu-sustained-clock-speed-mhz',
    'karpenter.k8s.aws/instance-memory',
    'karpenter.k8s.aws/instance-ebs-bandwidth',
    'karpenter.k8s.aws/instance-network-bandwidth',
    'karpenter.k8s.aws/instance-hypervisor',
    'karpenter.k8s.aws/instance-encryption-in-transit-supported',
    'karpenter.k8s.aws/instance-local-nvme',
    'karpenter.k8s.aws/instance-gpu-name',
    'karpenter.k8s.aws/instance-gpu-manufacturer',
    'karpenter.k8s.aws/instance-gpu-count',
    'karpenter.k8s.aws/instance-gpu-memory',
    'karpenter.k8s.aws/instance-accelerator-name',
    'karpenter.k8s.aws/instance-accelerator-manufacturer',
    'karpenter.k8s.aws/instance-accelerator-count',
  ]),
  offeringKeys: new Set([
    'karpenter.sh/capacity-type',
    'topology.kubernetes.io/zone',
    'topology.k8s.aws/zone-id',
    'karpenter.k8s.aws/capacity-reservation-id',
    'karpenter.k8s.aws/capacity-reservation-type',
  ]),
};

// sigs.k8s.io/karpenter kwok/cloudprovider/helpers.go: the KWOK provider's instance types. An
// offering's requirements are whatever its catalog lists (capacity type and zone, and region
// in ours).
export const KWOK_KEYS: ProviderKeys = {
  name: 'kwok',
  instanceTypeKeys: new Set([
    'node.kubernetes.io/instance-type',
    'kubernetes.io/arch',
    'kubernetes.io/os',
    'topology.kubernetes.io/zone',
    'karpenter.sh/capacity-type',
    'karpenter.kwok.sh/instance-size',
    'karpenter.kwok.sh/instance-family',
    'karpenter.kwok.sh/instance-cpu',
    'karpenter.kwok.sh/instance-memory',
  ]),
  offeringKeys: new Set(['karpenter.sh/capacity-type', 'topology.kubernetes.io/zone', 'topology.kubernetes.io/region']),
};

export const PROVIDERS: Readonly<Record<string, ProviderKeys>> = { aws: AWS_KEYS, kwok: KWOK_KEYS };

/** A provider's keys with more of the user's: instance-type keys a custom provider defines. */
export function withExtraKeys(base: ProviderKeys, instanceTypeKeys: readonly string[]): ProviderKeys {
  if (instanceTypeKeys.length === 0) return base;
  return { ...base, instanceTypeKeys: new Set([...base.instanceTypeKeys, ...instanceTypeKeys]) };
}

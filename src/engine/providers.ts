// The label keys a Karpenter cloud provider defines for an instance type and its offerings.
// Karpenter's NodeOverlay controller compares an overlay with the NodePool's name and template
// labels plus these requirements (pkg/controllers/nodeoverlay, getOverlaidOfferings), never
// with the node's labels: any other key on a node is undefined for it.

import type { Labels } from './requirements.ts';
import { ARCH, CAPACITY_TYPE, INSTANCE_TYPE, REGION, ZONE, ZONE_ID } from './well-known.ts';

export interface ProviderKeys {
  readonly name: string;
  /**
   * The API group of the provider's NodeClass, which every NodeClaim it launches names in
   * `spec.nodeClassRef.group`; it is also the domain of the labels the provider writes.
   */
  readonly group: string;
  /** Keys in an instance type's requirements (a type that lacks an attribute defines it as DoesNotExist). */
  readonly instanceTypeKeys: ReadonlySet<string>;
  /** Keys in an offering's requirements; those absent from the instance type's narrow only NotIn. */
  readonly offeringKeys: ReadonlySet<string>;
  /**
   * Instance-type keys whose values are the same on every type and in no offering: Karpenter
   * compares an overlay with all of them, never with the one value a node carries.
   */
  readonly fixedValues?: ReadonlyMap<string, readonly string[]>;
  /**
   * The name of the NodeClaim a node was launched for, where the provider's own naming says it
   * before Karpenter links them (the NodeClaim's providerID, its registration's ownerReference).
   */
  readonly nodeClaimNameOf?: (node: { readonly providerID?: string; readonly labels: Labels }) => string | undefined;
}

// karpenter-provider-aws v1.14.1 (paired with core v1.14.1), pkg/providers/instancetype
// (types.go computeRequirements; offering/ base, reserved-capacity and placement-group
// resolvers). test/judges/provider-keys.test.ts checks both sets against what the provider's own
// code builds (test/judges/aws-instance-keys). Most keys are on every instance type (DoesNotExist when
// the type lacks the attribute); conditional ones: topology.k8s.aws/zone-id (subnets with zone
// IDs in the type's zones) and karpenter.k8s.aws/placement-group-* (an EC2NodeClass with a
// placement group; -partition only for a partition group). Every offering key is also an
// instance-type key: the instance type holds all values (every zone, capacity type,
// reservation, partition), the offering one. karpenter.k8s.aws/instance-tenancy is
// `In [default, dedicated]` on every type and in no offering, so an overlay's tenancy
// requirement is judged against both values, never against the node's tenancy.
/** The AWS provider's instance-type labels the engine reads by name (a type's name, size, devices). */
export const AWS_LABEL = {
  category: 'karpenter.k8s.aws/instance-category',
  family: 'karpenter.k8s.aws/instance-family',
  generation: 'karpenter.k8s.aws/instance-generation',
  size: 'karpenter.k8s.aws/instance-size',
  flex: 'karpenter.k8s.aws/instance-capability-flex',
  cpu: 'karpenter.k8s.aws/instance-cpu',
  /** In MiB. */
  memory: 'karpenter.k8s.aws/instance-memory',
  gpuCount: 'karpenter.k8s.aws/instance-gpu-count',
  acceleratorCount: 'karpenter.k8s.aws/instance-accelerator-count',
} as const;

export const AWS_KEYS: ProviderKeys = {
  name: 'aws',
  group: 'karpenter.k8s.aws',
  instanceTypeKeys: new Set([
    INSTANCE_TYPE,
    ARCH,
    'kubernetes.io/os',
    'node.kubernetes.io/windows-build',
    ZONE,
    REGION,
    ZONE_ID,
    CAPACITY_TYPE,
    'karpenter.k8s.aws/capacity-reservation-id',
    'karpenter.k8s.aws/capacity-reservation-type',
    'karpenter.k8s.aws/capacity-reservation-interruptible',
    AWS_LABEL.category,
    AWS_LABEL.family,
    AWS_LABEL.generation,
    AWS_LABEL.size,
    AWS_LABEL.flex,
    AWS_LABEL.cpu,
    'karpenter.k8s.aws/instance-cpu-manufacturer',
    'karpenter.k8s.aws/instance-cpu-sustained-clock-speed-mhz',
    AWS_LABEL.memory,
    'karpenter.k8s.aws/instance-ebs-bandwidth',
    'karpenter.k8s.aws/instance-network-bandwidth',
    'karpenter.k8s.aws/instance-hypervisor',
    'karpenter.k8s.aws/instance-encryption-in-transit-supported',
    'karpenter.k8s.aws/instance-tenancy',
    'karpenter.k8s.aws/instance-local-nvme',
    'karpenter.k8s.aws/instance-gpu-name',
    'karpenter.k8s.aws/instance-gpu-manufacturer',
    AWS_LABEL.gpuCount,
    'karpenter.k8s.aws/instance-gpu-memory',
    'karpenter.k8s.aws/instance-accelerator-name',
    'karpenter.k8s.aws/instance-accelerator-manufacturer',
    AWS_LABEL.acceleratorCount,
    'karpenter.k8s.aws/placement-group-id',
    'karpenter.k8s.aws/placement-group-partition',
  ]),
  offeringKeys: new Set([
    CAPACITY_TYPE,
    ZONE,
    ZONE_ID,
    'karpenter.k8s.aws/capacity-reservation-id',
    'karpenter.k8s.aws/capacity-reservation-type',
    'karpenter.k8s.aws/capacity-reservation-interruptible',
    'karpenter.k8s.aws/placement-group-partition',
  ]),
  fixedValues: new Map([['karpenter.k8s.aws/instance-tenancy', ['default', 'dedicated']]]),
};

// sigs.k8s.io/karpenter v1.14.1 kwok/cloudprovider/helpers.go (newInstanceType): the KWOK
// provider's instance-type keys, checked by test/judges/provider-keys.test.ts. An offering's
// requirements are whatever its catalog lists: the embedded kwok/cloudprovider/instance_types.json
// lists capacity type and zone; a catalog of one's own (INSTANCE_TYPES_FILE_PATH) may list more,
// such as the region kept here, which no KWOK instance type defines.
export const KWOK_KEYS: ProviderKeys = {
  name: 'kwok',
  group: 'karpenter.kwok.sh',
  instanceTypeKeys: new Set([
    INSTANCE_TYPE,
    ARCH,
    'kubernetes.io/os',
    ZONE,
    CAPACITY_TYPE,
    'karpenter.kwok.sh/instance-size',
    'karpenter.kwok.sh/instance-family',
    'karpenter.kwok.sh/instance-cpu',
    'karpenter.kwok.sh/instance-memory',
  ]),
  offeringKeys: new Set([CAPACITY_TYPE, ZONE, REGION]),
  // KWOK creates the Node itself, before the NodeClaim shows its providerID: a `kwok://` node
  // carries the NodeClaim's labels, whose kubernetes.io/hostname is the NodeClaim's name
  // (kwok/cloudprovider toNode), so the launch is known at CREATE.
  nodeClaimNameOf: (node) =>
    node.providerID?.startsWith('kwok://') ? node.labels['kubernetes.io/hostname'] : undefined,
};

/** The providers the watcher knows the keys of, found by their NodeClass group. */
export const KNOWN_PROVIDERS: readonly ProviderKeys[] = [AWS_KEYS, KWOK_KEYS];

/** A provider's keys with more of the user's: instance-type keys a custom provider defines. */
export function withExtraKeys(base: ProviderKeys, instanceTypeKeys: readonly string[]): ProviderKeys {
  if (instanceTypeKeys.length === 0) return base;
  return { ...base, instanceTypeKeys: new Set([...base.instanceTypeKeys, ...instanceTypeKeys]) };
}

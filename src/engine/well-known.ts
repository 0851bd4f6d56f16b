// The well-known label keys of Kubernetes and Karpenter the engine reads, each spelled once (as
// Karpenter's pkg/apis/v1/labels.go spells its own); the provider key tables (providers.ts) list
// them with the provider's own keys.
export const INSTANCE_TYPE = 'node.kubernetes.io/instance-type';
export const ZONE = 'topology.kubernetes.io/zone';
export const ZONE_ID = 'topology.k8s.aws/zone-id';
export const REGION = 'topology.kubernetes.io/region';
export const CAPACITY_TYPE = 'karpenter.sh/capacity-type';
export const NODEPOOL_LABEL = 'karpenter.sh/nodepool';
export const REGISTERED_LABEL = 'karpenter.sh/registered';
export const ARCH = 'kubernetes.io/arch';

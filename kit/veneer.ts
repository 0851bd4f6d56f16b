// Objects shaped like the ones Veneer and Karpenter create, for the demo, tests and benchmarks.
import type { NodeObject, OverlayObject } from '../src/engine/index.ts';
import type { NodeClaimObject } from '../src/engine/node.ts';
import type { RequirementSpec } from '../src/engine/requirements.ts';

const onDemand = { key: 'karpenter.sh/capacity-type', operator: 'In', values: ['on-demand'] };

/**
 * The instance-family key Veneer's overlays name, per Karpenter cloud provider: Veneer writes AWS
 * keys; under the KWOK provider (kit/karpenter.ts) the same overlays must name KWOK's key to match
 * anything. The instance-type key is the well-known one under both.
 */
export const FAMILY_KEY = {
  aws: 'karpenter.k8s.aws/instance-family',
  kwok: 'karpenter.kwok.sh/instance-family',
} as const;
export type OverlayProvider = keyof typeof FAMILY_KEY;

/** A NodeOverlay as created: name and labels always there. */
export type VeneerOverlay = OverlayObject & {
  apiVersion: string;
  kind: string;
  metadata: { name: string; labels: Record<string, string> };
};

function veneerOverlay(
  name: string,
  weight: number,
  labels: Record<string, string>,
  requirements: RequirementSpec[],
): VeneerOverlay {
  return {
    apiVersion: 'karpenter.sh/v1alpha1',
    kind: 'NodeOverlay',
    metadata: { name, labels: { 'app.kubernetes.io/managed-by': 'veneer', ...labels } },
    spec: { price: '0.00', weight, requirements },
  };
}

/** The status Karpenter's NodeOverlay controller writes on an overlay it validated, as `kubectl get -o yaml` shows it. */
export function validatedByKarpenter<T extends OverlayObject>(o: T, at: string, generation = 1): T {
  const condition = (type: string) => ({
    type,
    status: 'True',
    reason: type,
    message: '',
    observedGeneration: generation,
    lastTransitionTime: at,
  });
  return {
    ...o,
    metadata: { ...o.metadata, generation },
    status: { conditions: [condition('Ready'), condition('ValidationSucceeded')] },
  };
}

export function computeSavingsPlan(provider: OverlayProvider = 'aws') {
  return veneerOverlay('cost-aware-compute-sp-global', 10, { 'veneer.io/capacity-type': 'compute-savings-plan' }, [
    onDemand,
    { key: FAMILY_KEY[provider], operator: 'Exists' },
  ]);
}

export function ec2InstanceSavingsPlan(family: string, region: string, provider: OverlayProvider = 'aws') {
  return veneerOverlay(
    `cost-aware-ec2-sp-${family}-${region}`,
    20,
    {
      'veneer.io/capacity-type': 'ec2-instance-savings-plan',
      'veneer.io/instance-family': family,
      'veneer.io/region': region,
    },
    [onDemand, { key: FAMILY_KEY[provider], operator: 'In', values: [family] }],
  );
}

/** The same for every provider: the instance-type key is well-known. */
export function reservedInstance(type: string, region: string) {
  return veneerOverlay(
    `cost-aware-ri-${type}-${region}`,
    30,
    {
      'veneer.io/capacity-type': 'reserved-instance',
      'veneer.io/instance-family': type.split('.')[0] ?? type,
      'veneer.io/instance-type': type,
      'veneer.io/region': region,
    },
    [onDemand, { key: 'node.kubernetes.io/instance-type', operator: 'In', values: [type] }],
  );
}

/**
 * A preference overlay as Veneer's preference generator makes it (pkg/preference, generator.go):
 * `pref-<nodepool>-<N>`, weight N, a price adjustment, scoped to its NodePool by
 * `karpenter.sh/nodepool`, labelled as a preference and with no capacity type.
 */
export function preferenceOverlay(
  nodePool: string,
  n: number,
  priceAdjustment: string,
  matchers: RequirementSpec[],
): VeneerOverlay {
  return {
    apiVersion: 'karpenter.sh/v1alpha1',
    kind: 'NodeOverlay',
    metadata: {
      name: `pref-${nodePool}-${n}`,
      labels: {
        'app.kubernetes.io/managed-by': 'veneer',
        'veneer.io/type': 'preference',
        'veneer.io/source-nodepool': nodePool,
        'veneer.io/preference-number': String(n),
      },
    },
    spec: {
      requirements: [{ key: 'karpenter.sh/nodepool', operator: 'In', values: [nodePool] }, ...matchers],
      priceAdjustment,
      weight: n,
    },
  };
}

/** Veneer's disabled mode: the label, and a first requirement no NodePool or instance type defines. */
export function disabled(o: VeneerOverlay): VeneerOverlay {
  return {
    ...o,
    metadata: { ...o.metadata, labels: { ...o.metadata.labels, 'veneer.io/disabled': 'true' } },
    spec: {
      ...o.spec,
      requirements: [{ key: 'veneer.io/disabled', operator: 'In', values: ['true'] }, ...(o.spec?.requirements ?? [])],
    },
  };
}

export interface NodeShape {
  name: string;
  capacityType?: 'on-demand' | 'spot';
  instanceType?: string;
  zone?: string;
  nodepool?: string;
  /** Full labels (after Karpenter's registration) or only the kubelet's. */
  stage?: 'kubelet' | 'registered';
  createdAt?: string;
  providerID?: string;
  extraLabels?: Record<string, string>;
}

export function instanceLabels(instanceType: string, zone: string): Record<string, string> {
  const [family = instanceType, size = ''] = instanceType.split('.');
  return {
    'node.kubernetes.io/instance-type': instanceType,
    'karpenter.k8s.aws/instance-family': family,
    'karpenter.k8s.aws/instance-size': size,
    'topology.kubernetes.io/zone': zone,
    'topology.kubernetes.io/region': zone.slice(0, -1),
  };
}

export function karpenterNode(shape: NodeShape): NodeObject & { apiVersion: string; kind: string } {
  const stage = shape.stage ?? 'registered';
  const labels: Record<string, string> = {
    'karpenter.sh/nodepool': shape.nodepool ?? 'default',
    'karpenter.sh/capacity-type': shape.capacityType ?? 'on-demand',
    'karpenter.k8s.aws/ec2nodeclass': 'default',
    'kubernetes.io/hostname': shape.name,
    'kubernetes.io/os': 'linux',
    'kubernetes.io/arch': 'amd64',
    ...(stage === 'registered'
      ? {
          ...instanceLabels(shape.instanceType ?? 'm5.xlarge', shape.zone ?? 'us-west-2a'),
          'karpenter.sh/registered': 'true',
        }
      : {}),
    ...shape.extraLabels,
  };
  return {
    apiVersion: 'v1',
    kind: 'Node',
    metadata: { name: shape.name, labels, ...(shape.createdAt ? { creationTimestamp: shape.createdAt } : {}) },
    spec: { providerID: shape.providerID ?? `aws:///${shape.zone ?? 'us-west-2a'}/i-${shape.name}` },
  };
}

export function nodeClaimFor(
  shape: NodeShape & { claimName: string; claimCreatedAt?: string },
): NodeClaimObject & { apiVersion: string; kind: string } {
  return {
    apiVersion: 'karpenter.sh/v1',
    kind: 'NodeClaim',
    metadata: {
      name: shape.claimName,
      labels: {
        'karpenter.sh/nodepool': shape.nodepool ?? 'default',
        'karpenter.sh/capacity-type': shape.capacityType ?? 'on-demand',
        ...instanceLabels(shape.instanceType ?? 'm5.xlarge', shape.zone ?? 'us-west-2a'),
      },
      ...(shape.claimCreatedAt ? { creationTimestamp: shape.claimCreatedAt } : {}),
    },
    status: {
      providerID: shape.providerID ?? `aws:///${shape.zone ?? 'us-west-2a'}/i-${shape.name}`,
      nodeName: shape.name,
    },
  };
}

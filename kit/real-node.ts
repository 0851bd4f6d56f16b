// Nodes as big as EKS serves them (about 20 KB with the managedFields the apiserver adds), in
// the shape `kubectl get node -o json` shows: ~50 images, five conditions, capacity and
// allocatable, nodeInfo, addresses, and the labels and annotations kubelet, the cloud provider
// and Karpenter write. Status churn patches what kubelets patch: condition heartbeats.
import type * as k8s from '@kubernetes/client-node';
import { instanceLabels, nodeClaimFor, type NodeShape } from './veneer.ts';

const IMAGE_REPOS = [
  'amazon/aws-node',
  'amazon-k8s-cni-init',
  'amazon/aws-network-policy-agent',
  'eks/kube-proxy',
  'eks/coredns',
  'eks/pause',
  'ebs-csi-driver/aws-ebs-csi-driver',
  'eks/csi-node-driver-registrar',
  'eks/livenessprobe',
  'datadog/agent',
  'fluent/fluent-bit',
  'prometheus/node-exporter',
  'grafana/promtail',
  'istio/proxyv2',
  'library/nginx',
  'bitnami/redis',
  'karpenter/controller',
  'cert-manager/cert-manager-controller',
  'external-dns/external-dns',
  'argoproj/argocd',
  'envoyproxy/envoy',
  'jaegertracing/jaeger-agent',
  'open-telemetry/opentelemetry-collector',
  'kube-state-metrics/kube-state-metrics',
  'aws-load-balancer-controller',
  'cluster-autoscaler',
  'metrics-server/metrics-server',
  'secrets-store-csi-driver',
  'node-problem-detector',
  'linkerd/proxy',
  'vault/vault-k8s',
  'kyverno/kyverno',
  'falcosecurity/falco',
  'calico/node',
  'cilium/cilium',
  'app/payments-api',
  'app/checkout-web',
  'app/search-indexer',
  'app/notifications-worker',
  'app/feed-ranker',
  'app/ledger-service',
  'app/identity-gateway',
  'app/image-resizer',
  'app/recommendations',
  'app/session-store',
  'app/fraud-scorer',
  'app/email-renderer',
  'app/geo-lookup',
  'app/audit-trail',
  'app/batch-exporter',
];

function digest(seed: string): string {
  let h = 2166136261;
  for (const c of seed) h = Math.imul(h ^ c.charCodeAt(0), 16777619) >>> 0;
  return Array.from({ length: 8 }, (_, i) => ((h * (i + 7)) >>> 0).toString(16).padStart(8, '0')).join('');
}

function images(): k8s.V1ContainerImage[] {
  return IMAGE_REPOS.map((repo, i) => {
    const registry =
      i < 9
        ? '602401143452.dkr.ecr.us-west-2.amazonaws.com'
        : i < 35
          ? 'public.ecr.aws'
          : '123456789012.dkr.ecr.us-west-2.amazonaws.com';
    const tag = `v1.${i % 30}.${(i * 7) % 11}-eksbuild.${(i % 3) + 1}`;
    return {
      names: [`${registry}/${repo}@sha256:${digest(repo)}`, `${registry}/${repo}:${tag}`],
      sizeBytes: 10_000_000 + i * 3_456_789,
    };
  });
}

const condition = (type: string, status: string, reason: string, message: string, at: string): k8s.V1NodeCondition => ({
  type,
  status,
  reason,
  message,
  lastHeartbeatTime: at as unknown as Date,
  lastTransitionTime: at as unknown as Date,
});

export function conditions(at: string): k8s.V1NodeCondition[] {
  return [
    condition('MemoryPressure', 'False', 'KubeletHasSufficientMemory', 'kubelet has sufficient memory available', at),
    condition('DiskPressure', 'False', 'KubeletHasNoDiskPressure', 'kubelet has no disk pressure', at),
    condition('PIDPressure', 'False', 'KubeletHasSufficientPID', 'kubelet has sufficient PID available', at),
    condition('Ready', 'True', 'KubeletReady', 'kubelet is posting ready status', at),
    condition('NetworkUnavailable', 'False', 'RouteCreated', 'RouteController created a route', at),
  ];
}

/** A registered Karpenter node of the given shape, as big as a real one. */
export function realNode(shape: NodeShape & { index: number }): k8s.V1Node {
  const zone = shape.zone ?? 'us-west-2a';
  const instanceType = shape.instanceType ?? 'm5.xlarge';
  const ip = `10.${(shape.index >> 16) & 255}.${(shape.index >> 8) & 255}.${shape.index & 255}`;
  const at = new Date().toISOString();
  const id = `i-0${digest(shape.name).slice(0, 16)}`;
  return {
    apiVersion: 'v1',
    kind: 'Node',
    metadata: {
      name: shape.name,
      labels: {
        ...instanceLabels(instanceType, zone),
        'beta.kubernetes.io/arch': 'amd64',
        'beta.kubernetes.io/instance-type': instanceType,
        'beta.kubernetes.io/os': 'linux',
        'failure-domain.beta.kubernetes.io/region': zone.slice(0, -1),
        'failure-domain.beta.kubernetes.io/zone': zone,
        'k8s.io/cloud-provider-aws': digest('cluster').slice(0, 32),
        'karpenter.k8s.aws/ec2nodeclass': 'default',
        'karpenter.k8s.aws/instance-category': instanceType[0] ?? 'm',
        'karpenter.k8s.aws/instance-cpu': '4',
        'karpenter.k8s.aws/instance-cpu-manufacturer': 'intel',
        'karpenter.k8s.aws/instance-ebs-bandwidth': '4750',
        'karpenter.k8s.aws/instance-encryption-in-transit-supported': 'false',
        'karpenter.k8s.aws/instance-generation': '5',
        'karpenter.k8s.aws/instance-hypervisor': 'nitro',
        'karpenter.k8s.aws/instance-memory': '16384',
        'karpenter.k8s.aws/instance-network-bandwidth': '1250',
        'karpenter.sh/capacity-type': shape.capacityType ?? 'on-demand',
        'karpenter.sh/initialized': 'true',
        'karpenter.sh/nodepool': shape.nodepool ?? 'default',
        'karpenter.sh/registered': 'true',
        'kubernetes.io/arch': 'amd64',
        'kubernetes.io/hostname': shape.name,
        'kubernetes.io/os': 'linux',
        'node.kubernetes.io/lifecycle': 'on-demand',
        'topology.ebs.csi.aws.com/zone': zone,
        'topology.k8s.aws/zone-id': `usw2-az${zone.at(-1) === 'a' ? 1 : 2}`,
        ...shape.extraLabels,
      },
      annotations: {
        'alpha.kubernetes.io/provided-node-ip': ip,
        'compatibility.karpenter.k8s.aws/cluster-name-tagged': 'true',
        'karpenter.k8s.aws/ec2nodeclass-hash': '15535182697325354914',
        'karpenter.k8s.aws/ec2nodeclass-hash-version': 'v4',
        'karpenter.sh/nodepool-hash': '6821555240594823858',
        'karpenter.sh/nodepool-hash-version': 'v3',
        'node.alpha.kubernetes.io/ttl': '0',
        'volumes.kubernetes.io/controller-managed-attach-detach': 'true',
      },
    },
    spec: { providerID: shape.providerID ?? `aws:///${zone}/${id}` },
    status: {
      addresses: [
        { type: 'InternalIP', address: ip },
        { type: 'InternalDNS', address: `ip-${ip.replaceAll('.', '-')}.us-west-2.compute.internal` },
        { type: 'Hostname', address: `ip-${ip.replaceAll('.', '-')}.us-west-2.compute.internal` },
      ],
      allocatable: {
        cpu: '3920m',
        'ephemeral-storage': '95551679124',
        'hugepages-1Gi': '0',
        'hugepages-2Mi': '0',
        memory: '15136204Ki',
        pods: '58',
      },
      capacity: {
        cpu: '4',
        'ephemeral-storage': '104845292Ki',
        'hugepages-1Gi': '0',
        'hugepages-2Mi': '0',
        memory: '16092620Ki',
        pods: '58',
      },
      conditions: conditions(at),
      daemonEndpoints: { kubeletEndpoint: { Port: 10250 } },
      images: images(),
      nodeInfo: {
        architecture: 'amd64',
        bootID: `${digest(`${shape.name}boot`).slice(0, 8)}-1c2d-4e5f-8a9b-${digest(shape.name).slice(0, 12)}`,
        containerRuntimeVersion: 'containerd://1.7.27',
        kernelVersion: '6.1.141-155.222.amzn2023.x86_64',
        kubeProxyVersion: '',
        kubeletVersion: 'v1.35.4-eks-4f4795d',
        machineID: digest(`${shape.name}machine`).slice(0, 32),
        operatingSystem: 'linux',
        osImage: 'Amazon Linux 2023.8.20250818',
        systemUUID: `ec2${digest(shape.name).slice(0, 5)}-a1b2-c3d4-e5f6-${digest(shape.name).slice(5, 17)}`,
      },
    },
  };
}

/** The strategic-merge status patch a kubelet sends to renew its conditions. */
export function heartbeatPatch(at = new Date().toISOString()): object {
  return {
    status: { conditions: conditions(at).map((c) => ({ type: c.type, lastHeartbeatTime: c.lastHeartbeatTime })) },
  };
}

/** The ~60 instance types a NodeClaim's requirements name after Karpenter's cut (MaxInstanceTypes), as a launch of a general-purpose pool writes them. */
const CANDIDATE_TYPES = ['c5', 'c5a', 'c6i', 'c6a', 'c7i', 'm5', 'm5a', 'm6i', 'm6a', 'm7i', 'r5', 'r6i'].flatMap((f) =>
  ['large', 'xlarge', '2xlarge', '4xlarge', '8xlarge'].map((s) => `${f}.${s}`),
);

/**
 * The NodeClaim Karpenter keeps for a node of `realNode`'s shape, as big as a real one (about 5 KB
 * as served): `nodeClaimFor`'s, with the requirements its scheduling wrote (the candidate types
 * among them), requests, the NodeClass, and a status with the instance's capacity, allocatable,
 * image and conditions.
 */
export function realNodeClaim(shape: NodeShape & { index: number; claimName: string }) {
  const node = realNode(shape);
  const at = new Date().toISOString();
  const pool = shape.nodepool ?? 'default';
  const base = nodeClaimFor({ ...shape, providerID: node.spec?.providerID ?? undefined });
  const condition = (type: string) => ({ type, status: 'True', reason: type, message: '', lastTransitionTime: at });
  return {
    ...base,
    metadata: {
      ...base.metadata,
      labels: {
        ...base.metadata?.labels,
        'karpenter.k8s.aws/ec2nodeclass': 'default',
        'kubernetes.io/arch': 'amd64',
        'kubernetes.io/os': 'linux',
      },
      annotations: {
        'compatibility.karpenter.k8s.aws/cluster-name-tagged': 'true',
        'karpenter.k8s.aws/ec2nodeclass-hash': '15535182697325354914',
        'karpenter.k8s.aws/ec2nodeclass-hash-version': 'v4',
        'karpenter.k8s.aws/tagged': 'true',
        'karpenter.sh/nodepool-hash': '6821555240594823858',
        'karpenter.sh/nodepool-hash-version': 'v3',
      },
      finalizers: ['karpenter.sh/termination'],
      ownerReferences: [
        { apiVersion: 'karpenter.sh/v1', kind: 'NodePool', name: pool, uid: 'pool-uid', blockOwnerDeletion: true },
      ],
    },
    spec: {
      expireAfter: '720h',
      nodeClassRef: { group: 'karpenter.k8s.aws', kind: 'EC2NodeClass', name: 'default' },
      requirements: [
        { key: 'karpenter.sh/nodepool', operator: 'In', values: [pool] },
        { key: 'karpenter.sh/capacity-type', operator: 'In', values: [shape.capacityType ?? 'on-demand'] },
        { key: 'karpenter.k8s.aws/ec2nodeclass', operator: 'In', values: ['default'] },
        { key: 'kubernetes.io/arch', operator: 'In', values: ['amd64'] },
        { key: 'kubernetes.io/os', operator: 'In', values: ['linux'] },
        { key: 'karpenter.k8s.aws/instance-category', operator: 'In', values: ['c', 'm', 'r'] },
        { key: 'karpenter.k8s.aws/instance-generation', operator: 'Gt', values: ['4'] },
        { key: 'topology.kubernetes.io/zone', operator: 'In', values: ['us-west-2a', 'us-west-2b', 'us-west-2c'] },
        { key: 'node.kubernetes.io/instance-type', operator: 'In', values: CANDIDATE_TYPES },
      ],
      resources: { requests: { cpu: '2150m', memory: '4628Mi', pods: '9' } },
    },
    status: {
      ...base.status,
      imageID: 'ami-0a1b2c3d4e5f60718',
      capacity: node.status?.capacity,
      allocatable: node.status?.allocatable,
      conditions: ['Launched', 'Registered', 'Initialized', 'Ready', 'Consolidatable'].map(condition),
      lastPodEventTime: at,
    },
  };
}

// The Node as a kubelet on an EKS AMI registers it and reports its status, and the taints the
// controllers that do not run here would remove.
import type * as k8s from '@kubernetes/client-node';
import type { Instance } from '@aws-sdk/client-ec2';
import { conditions, realNode } from '../../real-node.ts';
import type { Resources } from './instances.ts';

export interface Taint {
  key: string;
  value?: string;
  effect: string;
}

export const UNREGISTERED_TAINT: Taint = { key: 'karpenter.sh/unregistered', effect: 'NoExecute' };
/** Added by the kubelet when it runs with an external cloud provider, removed by the cloud controller once it has initialized the Node. */
export const UNINITIALIZED_TAINT: Taint = {
  key: 'node.cloudprovider.kubernetes.io/uninitialized',
  value: 'true',
  effect: 'NoSchedule',
};
/** Added by the apiserver's TaintNodesByCondition admission on CREATE, removed by the node lifecycle controller once the Node is Ready. */
export const NOT_READY_TAINT: Taint = { key: 'node.kubernetes.io/not-ready', effect: 'NoSchedule' };
/** The taints the node maker stands in for removing (the kube-controller-manager and the cloud controller do on EKS). */
const CONTROLLER_TAINTS = [NOT_READY_TAINT, UNINITIALIZED_TAINT];

const sameTaint = (a: Taint, b: Taint) => a.key === b.key && a.effect === b.effect;
const arch = (a: string | undefined) => (a === 'arm64' ? 'arm64' : 'amd64');

export interface KubeletNodeInput {
  instance: Instance;
  name: string;
  providerID: string;
  instanceType: string | undefined;
  zone: string;
  region: string;
  /** The node's index, which varies its images and IDs as kit/real-node.ts makes them. */
  index: number;
  kubeletVersion: string;
  claimLabels: Record<string, string>;
  claimTaints: Taint[];
  uninitializedTaint: boolean;
  resources: Resources;
}

/** The Node a kubelet registers on an EKS AMI: one CREATE, status included. */
export function kubeletNode(i: KubeletNodeInput): k8s.V1Node {
  const architecture = arch(i.instance.Architecture);
  const ip = i.instance.PrivateIpAddress ?? '10.0.0.1';
  const model = realNode({
    name: i.name,
    index: i.index,
    zone: i.zone,
    instanceType: i.instanceType ?? 'm5.large',
    providerID: i.providerID,
  });
  const labels = { ...i.claimLabels };
  // Karpenter writes these itself, at registration and initialization.
  delete labels['karpenter.sh/registered'];
  delete labels['karpenter.sh/initialized'];
  const taints: Taint[] = [UNREGISTERED_TAINT];
  for (const taint of [...i.claimTaints, ...(i.uninitializedTaint ? [UNINITIALIZED_TAINT] : [])]) {
    if (!taints.some((have) => sameTaint(have, taint))) taints.push(taint);
  }
  const at = new Date().toISOString();
  return {
    apiVersion: 'v1',
    kind: 'Node',
    metadata: {
      name: i.name,
      labels: {
        ...labels,
        'beta.kubernetes.io/arch': architecture,
        'beta.kubernetes.io/os': 'linux',
        'kubernetes.io/arch': architecture,
        'kubernetes.io/hostname': i.name,
        'kubernetes.io/os': 'linux',
        ...(i.instanceType ? { 'node.kubernetes.io/instance-type': i.instanceType } : {}),
        'topology.kubernetes.io/region': i.region,
        'topology.kubernetes.io/zone': i.zone,
      },
      annotations: {
        'alpha.kubernetes.io/provided-node-ip': ip,
        'volumes.kubernetes.io/controller-managed-attach-detach': 'true',
      },
    },
    spec: { providerID: i.providerID, taints: taints as k8s.V1Taint[] },
    status: {
      addresses: [
        { type: 'InternalIP', address: ip },
        { type: 'InternalDNS', address: i.name },
        { type: 'Hostname', address: i.name },
      ],
      capacity: i.resources.capacity,
      allocatable: i.resources.allocatable,
      // A kubelet's first status: its network plugin is not up yet.
      conditions: conditions(at).map((c) =>
        c.type === 'Ready'
          ? {
              ...c,
              status: 'False',
              reason: 'KubeletNotReady',
              message:
                'container runtime network not ready: NetworkReady=false reason:NetworkPluginNotReady message:Network plugin returns error: cni plugin not initialized',
            }
          : c,
      ),
      daemonEndpoints: model.status!.daemonEndpoints!,
      images: model.status!.images!,
      nodeInfo: {
        ...model.status!.nodeInfo!,
        architecture,
        kernelVersion: `6.1.141-155.222.amzn2023.${architecture === 'arm64' ? 'aarch64' : 'x86_64'}`,
        kubeletVersion: i.kubeletVersion,
      },
    },
  };
}

/** The kubelet's status once its network is up: Ready=True, with capacity and allocatable. */
export function readyStatus(resources: Resources): { status: k8s.V1NodeStatus } {
  const at = new Date().toISOString();
  return {
    status: {
      capacity: resources.capacity,
      allocatable: resources.allocatable,
      conditions: conditions(at).map((c) =>
        c.type === 'Ready'
          ? c
          : {
              type: c.type,
              status: c.status,
              reason: c.reason,
              message: c.message,
              lastHeartbeatTime: c.lastHeartbeatTime,
            },
      ),
    },
  };
}

/** The conditions the node lifecycle controller writes when the kubelet stopped posting status. */
export function unknownStatus(): { status: k8s.V1NodeStatus } {
  const at = new Date().toISOString();
  return {
    status: {
      conditions: conditions(at).map((c) => ({
        type: c.type,
        status: 'Unknown',
        reason: 'NodeStatusUnknown',
        message: 'Kubelet stopped posting node status.',
        lastTransitionTime: c.lastTransitionTime,
      })),
    },
  };
}

/** The node's taints without those the controllers remove once it is Ready, and which those were. */
export function withoutControllerTaints(taints: Taint[]): { keep: Taint[]; removed: Taint[] } {
  const keep = taints.filter((have) => !CONTROLLER_TAINTS.some((c) => sameTaint(c, have)));
  return { keep, removed: taints.filter((have) => !keep.includes(have)) };
}

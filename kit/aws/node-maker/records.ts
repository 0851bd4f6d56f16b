// What the node maker is told, and what it tells of each NodeClaim's instance and of itself.

export interface NodeMakerOptions {
  /** The local EC2 (moto), on loopback: `http://127.0.0.1:<port>`. */
  ec2Endpoint: string;
  /** From the providerID's appearance to the Node's CREATE (a booting instance). Default 0. */
  bootDelayMs?: number;
  /** From the CREATE to Ready=True (the CNI coming up). Default 0. */
  readyDelayMs?: number;
  /** Default us-east-1. */
  region?: string;
  /**
   * Between two heartbeats of a Node (its conditions' lastHeartbeatTime, a status PATCH the watcher
   * sees as a MODIFIED event). Default 30 s. A kubelet since 1.17 renews a Lease every 10 s and
   * posts its status only on a change or every 5 minutes (nodeStatusReportFrequency): 300_000 is
   * that churn; the default is more, so that a stale Node is never what a test sees.
   */
  heartbeatMs?: number;
  /** Between two reads of every tracked instance's state (the cloud controller's node monitor period is 5 s). Default 5 s. */
  instancePollMs?: number;
  /** Node CREATEs in flight at once, and as many Ready writes and taint removals after them. Default 32. */
  createConcurrency?: number;
  /** Whether the kubelet registers with node.cloudprovider.kubernetes.io/uninitialized (it does on EKS). Default true. */
  uninitializedTaint?: boolean;
}

/** What happened to one NodeClaim's instance, in epoch milliseconds. */
export interface NodeMade {
  nodeClaim: string;
  providerID: string;
  instanceId: string;
  /** The instance's PrivateDnsName, once read. */
  nodeName?: string;
  instanceType?: string;
  zone?: string;
  capacityType?: 'spot' | 'on-demand';
  /** When the node maker first saw the NodeClaim with its providerID (the boot delay counts from here). */
  providerIDSeenAt: number;
  /** When DescribeInstances answered with the instance. */
  describedAt?: number;
  /** When the CREATE was sent: providerIDSeenAt + boot delay, or later if CREATEs were queued. */
  createSentAt?: number;
  /** When the apiserver answered the CREATE (after every admission webhook). */
  nodeCreatedAt?: number;
  /** The Node's size (JSON bytes) as the apiserver answered the CREATE, managedFields included. */
  createdBytes?: number;
  /** The CREATE got AlreadyExists (a node maker started again over its own Nodes): the existing Node was taken over. */
  alreadyExisted?: boolean;
  /** When the status write with Ready=True was answered. */
  readyAt?: number;
  /** The controller taints removed (the not-ready taint only if the apiserver had added it). */
  taintsRemoved?: string[];
  /** When the node maker was done with the Node: Ready written and the controllers' taints removed. */
  settledAt?: number;
  heartbeats: number;
  /** Requests for this Node tried again after a transient failure. */
  retries?: number;
  /** When the instance was seen terminated or gone and the Node deleted (or found deleting / gone already). */
  goneAt?: number;
  /**
   * The instance went while its NodeClaim stood (not being deleted): nothing of Karpenter's disruption
   * or termination ended it, so its instance garbage collection did (an instance older than 30 s
   * whose providerID no NodeClaim in Karpenter's cache carried yet, as when its status writes lag
   * under load). Karpenter replaces such a NodeClaim only after its registration TTL (15 min).
   */
  collectedUnderClaim?: boolean;
  error?: string;
}

export interface NodeMakerStats {
  nodeClaimsSeen: number;
  nodesMade: number;
  heartbeats: number;
  heartbeatFailures: number;
  nodesDeleted: number;
  /** Taint removals that met a newer Node (Karpenter's registration edits the same list) and were retried. */
  taintConflicts: number;
  /** Requests tried again after a transient failure (no answer, 429, 5xx). */
  retries: number;
  describeCalls: number;
  informerRestarts: number;
  errors: number;
}

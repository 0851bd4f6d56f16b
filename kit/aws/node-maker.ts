// The node maker: what the kubelet and the cloud controller do for a launched EC2 instance, where no
// instance boots (moto). For each NodeClaim whose status has a providerID (`aws:///<zone>/<id>`) it
// reads the instance from the local EC2 (DescribeInstances), waits a boot delay counted from when
// the providerID appeared, and creates the Node as a kubelet registers it on EKS: one CREATE, named
// by the instance's PrivateDnsName, with spec.providerID, the NodeClaim's labels and the kubelet's
// (hostname, arch, os, instance type, zone, region), the taints the kubelet registers with
// (karpenter.sh/unregistered:NoExecute, the NodeClaim's taints and startup taints, and
// node.cloudprovider.kubernetes.io/uninitialized:NoSchedule, which every kubelet started with
// `--cloud-provider=external` adds), and a status as big as a real one (kit/real-node.ts: images,
// nodeInfo, conditions; addresses from the instance), Ready=False as a kubelet's first status is.
// It then reports Ready=True with capacity and allocatable through the status subresource, removes
// the taints the kube-controller-manager and the cloud controller would (not-ready, added by the
// apiserver's TaintNodesByCondition admission on CREATE; uninitialized), and renews the conditions'
// heartbeats. Karpenter's registration (karpenter.sh/registered, its finalizer, the owner reference,
// the unregistered taint) is left to Karpenter.
//
// Deletion follows the instance, not the NodeClaim, as on EKS: Karpenter deletes a registered
// NodeClaim's Node itself (its node termination flow, finalizer karpenter.sh/termination) before it
// terminates the instance, and for a NodeClaim that never registered it leaves the Node to "be
// garbage collected after the instance is terminated by CCM" (sigs.k8s.io/karpenter v1.14.3,
// nodeclaim/lifecycle/controller.go finalize). So a NodeClaim's deletion changes nothing here. When
// the instance is terminating or terminated (one instance poll tells), the kubelet is dead:
// heartbeats stop, the conditions turn Unknown (what the node lifecycle controller writes 40 s after
// the last heartbeat, here at once) and the Node is deleted unless it is already being deleted (the
// cloud controller's node lifecycle controller deletes NotReady Nodes whose instance is gone); an
// instance terminated before its boot delay is over never registers. A stopped instance's Node
// turns Unknown and stays. A Node deleted under a live instance is not made again (a kubelet
// registers only at start). No Lease is renewed (nothing here reads kube-node-lease) and no pod is
// run: pods bound to these Nodes stay Pending, and an evicted one stays Terminating.
//
// It runs in the test's process as its own user (a client certificate, see NODE_MAKER_USER).
import * as k8s from '@kubernetes/client-node';
import { type _InstanceType, DescribeInstancesCommand, DescribeInstanceTypesCommand, EC2Client, type Instance, type InstanceTypeInfo } from '@aws-sdk/client-ec2';
import type { ControlPlane } from '../control-plane.ts';
import type { NodeClaim } from '../karpenter.ts';
import { sleep } from '../process.ts';
import { conditions, heartbeatPatch, realNode } from '../real-node.ts';
import { assertLoopbackOnly } from './netns.ts';

/**
 * The node maker's user. It is in system:masters, as the KWOK kit runs Karpenter: a kubelet's own
 * identity (system:node:<name>, group system:nodes, the Node authorizer and NodeRestriction) would
 * need one certificate per node, and it also stands in for the cloud controller; the audit log
 * still tells its requests from everyone else's by this name.
 */
export const NODE_MAKER_USER = 'veneer-node-maker';

const NODECLAIM_API = { group: 'karpenter.sh', version: 'v1', plural: 'nodeclaims' };

export const UNREGISTERED_TAINT: k8s.V1Taint = { key: 'karpenter.sh/unregistered', effect: 'NoExecute' };
/** Added by the kubelet when it runs with an external cloud provider, removed by the cloud controller once it has initialized the Node. */
export const UNINITIALIZED_TAINT: k8s.V1Taint = { key: 'node.cloudprovider.kubernetes.io/uninitialized', value: 'true', effect: 'NoSchedule' };
/** Added by the apiserver's TaintNodesByCondition admission on CREATE, removed by the node lifecycle controller once the Node is Ready. */
export const NOT_READY_TAINT: k8s.V1Taint = { key: 'node.kubernetes.io/not-ready', effect: 'NoSchedule' };
/** The taints this stands in for removing (the kube-controller-manager and the cloud controller do on EKS). */
const CONTROLLER_TAINTS = [NOT_READY_TAINT, UNINITIALIZED_TAINT];

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

type Phase = 'describing' | 'booting' | 'creating' | 'running' | 'stopped' | 'gone' | 'failed';

interface Tracked {
  record: NodeMade;
  phase: Phase;
  instance?: Instance;
  claim: AwsNodeClaim;
  lastHeartbeatAt: number;
  heartbeatInFlight: boolean;
  describeTries: number;
  /** CREATEs that failed for good (the apiserver's answer, not only a transient error) and were begun again. */
  makeTries?: number;
  timer?: NodeJS.Timeout;
}

interface Taint {
  key: string;
  value?: string;
  effect: string;
}

/** The parts of a karpenter.sh/v1 NodeClaim the node maker reads. */
export type AwsNodeClaim = NodeClaim & {
  apiVersion?: string;
  kind?: string;
  metadata: NodeClaim['metadata'] & { resourceVersion?: string; deletionTimestamp?: string };
  spec?: { taints?: Taint[]; startupTaints?: Taint[] };
  status?: NonNullable<NodeClaim['status']> & { capacity?: Record<string, string>; allocatable?: Record<string, string> };
};

const strategicMerge = k8s.setHeaderOptions('Content-Type', k8s.PatchStrategy.StrategicMergePatch);
const mergePatch = k8s.setHeaderOptions('Content-Type', k8s.PatchStrategy.MergePatch);
const codeOf = (err: unknown) => (err as { code?: number }).code;
const message = (err: unknown) => (err instanceof Error ? err.message : String(err)).slice(0, 500);
/** No answer (a connection the apiserver closed, an HTTP/2 stream reset), too many requests, or a server error. */
const transient = (err: unknown) => {
  const code = codeOf(err);
  return code === undefined || code === 429 || code >= 500;
};

/** Runs at most `max` tasks at once, the rest in arrival order. */
class Limiter {
  private readonly max: number;
  private active = 0;
  private readonly waiting: (() => void)[] = [];

  constructor(max: number) {
    this.max = max;
  }

  async run<T>(task: () => Promise<T>): Promise<T> {
    if (this.active >= this.max) await new Promise<void>((resolve) => this.waiting.push(resolve));
    this.active++;
    try {
      return await task();
    } finally {
      this.active--;
      this.waiting.shift()?.();
    }
  }
}

/** `aws:///us-east-1a/i-0123` -> i-0123 (undefined for anything else). */
export function instanceIdOf(providerID: string): string | undefined {
  return /^aws:\/\/\/[^/]*\/(i-[0-9a-zA-Z]+)$/.exec(providerID)?.[1];
}

function assertLoopback(endpoint: string): void {
  const host = new URL(endpoint).hostname;
  if (!['127.0.0.1', 'localhost', '[::1]'].includes(host)) throw new Error(`node maker: the EC2 endpoint ${endpoint} is not on loopback`);
  // The network rule: anything that speaks an AWS API runs where only loopback exists, so that no
  // request can reach AWS or the instance metadata service.
  assertLoopbackOnly();
}

const arch = (a: string | undefined) => (a === 'arm64' ? 'arm64' : 'amd64');
const sameTaint = (a: Taint, b: Taint) => a.key === b.key && a.effect === b.effect;

/** Capacity and allocatable as the kubelet reports them on an EKS AMI, from the instance type (Karpenter's own formulas). */
export function resourcesFromInstanceType(info: InstanceTypeInfo | undefined): { capacity: Record<string, string>; allocatable: Record<string, string> } {
  const cpu = info?.VCpuInfo?.DefaultVCpus ?? 2;
  const mib = info?.MemoryInfo?.SizeInMiB ?? 8192;
  const enis = info?.NetworkInfo?.MaximumNetworkInterfaces;
  const ips = info?.NetworkInfo?.Ipv4AddressesPerInterface;
  const pods = enis && ips ? enis * (ips - 1) + 2 : 110;
  // kube-reserved CPU: 6% of the first core, 1% of the second, 0.5% of the next two, 0.25% above.
  const reservedMilli = [60, 10, 5, 5].slice(0, cpu).reduce((a, b) => a + b, 0) + Math.max(0, cpu - 4) * 2.5;
  // The hypervisor keeps 7.5% (VM_MEMORY_OVERHEAD_PERCENT); kube-reserved 11 MiB a pod + 255 MiB; eviction at 100 MiB.
  const memMiB = Math.floor(mib * (1 - 0.075));
  const storage = 20 * 1024 ** 3;
  return {
    capacity: { cpu: String(cpu), 'ephemeral-storage': `${storage / 1024}Ki`, 'hugepages-1Gi': '0', 'hugepages-2Mi': '0', memory: `${memMiB * 1024}Ki`, pods: String(pods) },
    allocatable: {
      cpu: `${Math.floor(cpu * 1000 - reservedMilli)}m`,
      'ephemeral-storage': String(Math.floor(storage * 0.9) - 1024 ** 3),
      'hugepages-1Gi': '0',
      'hugepages-2Mi': '0',
      memory: `${(memMiB - 11 * pods - 255 - 100) * 1024}Ki`,
      pods: String(pods),
    },
  };
}

export class NodeMaker {
  readonly user = NODE_MAKER_USER;
  private readonly core: k8s.CoreV1Api;
  private readonly custom: k8s.CustomObjectsApi;
  private readonly kc: k8s.KubeConfig;
  private readonly ec2: EC2Client;
  private readonly opts: Required<Omit<NodeMakerOptions, 'region'>> & { region: string };
  private readonly kubeletVersion: string;
  private readonly byInstance = new Map<string, Tracked>();
  private readonly byClaim = new Map<string, Tracked>();
  private readonly instanceTypes = new Map<string, Promise<InstanceTypeInfo | undefined>>();
  private readonly creates: Limiter;
  /** Ready writes and taint removals after the CREATEs. */
  private readonly statusWrites: Limiter;
  /** Heartbeats, deletions, and the rest. */
  private readonly small = new Limiter(8);
  private readonly inFlight = new Set<Promise<unknown>>();
  private readonly counters: NodeMakerStats = { nodeClaimsSeen: 0, nodesMade: 0, heartbeats: 0, heartbeatFailures: 0, nodesDeleted: 0, taintConflicts: 0, retries: 0, describeCalls: 0, informerRestarts: 0, errors: 0 };
  private readonly errorLog: string[] = [];
  private informer: k8s.Informer<k8s.KubernetesObject> | undefined;
  private describeQueue = new Set<string>();
  private describeTimer: NodeJS.Timeout | undefined;
  private describing = false;
  private readonly timers = new Set<NodeJS.Timeout>();
  private stopped = false;
  private nodeIndex = 0;

  private constructor(kc: k8s.KubeConfig, opts: NodeMakerOptions, kubeletVersion: string) {
    this.kc = kc;
    this.core = kc.makeApiClient(k8s.CoreV1Api);
    this.custom = kc.makeApiClient(k8s.CustomObjectsApi);
    this.kubeletVersion = kubeletVersion;
    this.opts = {
      ec2Endpoint: opts.ec2Endpoint,
      bootDelayMs: opts.bootDelayMs ?? 0,
      readyDelayMs: opts.readyDelayMs ?? 0,
      region: opts.region ?? 'us-east-1',
      heartbeatMs: opts.heartbeatMs ?? 30_000,
      instancePollMs: opts.instancePollMs ?? 5000,
      createConcurrency: opts.createConcurrency ?? 32,
      uninitializedTaint: opts.uninitializedTaint ?? true,
    };
    this.creates = new Limiter(this.opts.createConcurrency);
    this.statusWrites = new Limiter(this.opts.createConcurrency);
    this.ec2 = new EC2Client({
      endpoint: opts.ec2Endpoint,
      region: this.opts.region,
      // moto takes any keys; explicit ones keep the SDK from looking for credentials anywhere.
      credentials: { accessKeyId: 'testing', secretAccessKey: 'testing' },
      maxAttempts: 3,
    });
  }

  /** Starts watching NodeClaims as NODE_MAKER_USER; stops with the control plane. */
  static async start(cp: ControlPlane, opts: NodeMakerOptions): Promise<NodeMaker> {
    assertLoopback(opts.ec2Endpoint);
    process.env.AWS_EC2_METADATA_DISABLED = 'true';
    const cert = await cp.clientCertificate(NODE_MAKER_USER, ['system:masters']);
    const kc = new k8s.KubeConfig();
    kc.loadFromOptions({
      clusters: [{ name: 'test', server: cp.server, caData: Buffer.from(cp.caPem).toString('base64'), skipTLSVerify: false }],
      users: [{ name: NODE_MAKER_USER, certFile: cert.certPath, keyFile: cert.keyPath }],
      contexts: [{ name: 'test', cluster: 'test', user: NODE_MAKER_USER }],
      currentContext: 'test',
    });
    // The kubelet reports the control plane's own release, as an EKS AMI of the cluster's version does.
    const version = await cp.get('/version').then((r) => (JSON.parse(r.body) as { gitVersion?: string }).gitVersion, () => undefined);
    const maker = new NodeMaker(kc, opts, `${version ?? 'v1.35.4'}-eks-4f4795d`);
    cp.onStop(() => maker.stop());
    await maker.startInformer();
    maker.every(1000, () => maker.heartbeatDue());
    maker.every(maker.opts.instancePollMs, () => maker.pollInstances());
    // A safety net under the watch: a relist a minute finds any providerID a stalled watch missed.
    maker.every(60_000, () => maker.relist());
    return maker;
  }

  stats(): NodeMakerStats {
    return { ...this.counters };
  }

  /** One entry per NodeClaim seen with a providerID, in the order they were seen. */
  records(): NodeMade[] {
    return [...this.byClaim.values()].map((t) => ({ ...t.record }));
  }

  record(nodeClaim: string): NodeMade | undefined {
    const t = this.byClaim.get(nodeClaim);
    return t ? { ...t.record } : undefined;
  }

  /** The last errors (at most 50), oldest first. */
  errors(): string[] {
    return [...this.errorLog];
  }

  /** Waits until `count` Nodes are settled (Ready, the controllers' taints removed), or throws with the errors seen. */
  async waitForReady(count: number, timeoutMs = 60_000): Promise<NodeMade[]> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const ready = this.records().filter((r) => r.settledAt !== undefined);
      if (ready.length >= count) return ready;
      if (Date.now() > deadline) throw new Error(`node maker: ${ready.length} of ${count} nodes Ready after ${timeoutMs} ms; errors: ${this.errorLog.slice(-5).join(' | ') || 'none'}`);
      await sleep(100);
    }
  }

  async stop(): Promise<void> {
    if (this.stopped) return;
    this.stopped = true;
    for (const timer of this.timers) clearTimeout(timer); // intervals too
    this.timers.clear();
    if (this.describeTimer) clearTimeout(this.describeTimer);
    for (const t of this.byInstance.values()) if (t.timer) clearTimeout(t.timer);
    await this.informer?.stop();
    await Promise.allSettled([...this.inFlight]);
    this.ec2.destroy();
  }

  // -------------------------------------------------------------------------------------------
  // NodeClaims

  private async startInformer(): Promise<void> {
    const path = `/apis/${NODECLAIM_API.group}/${NODECLAIM_API.version}/${NODECLAIM_API.plural}`;
    const informer = k8s.makeInformer(this.kc, path, () => this.custom.listClusterCustomObject(NODECLAIM_API) as Promise<k8s.KubernetesListObject<k8s.KubernetesObject>>);
    let backoffMs = 500;
    const seen = (c: k8s.KubernetesObject) => {
      backoffMs = 500;
      this.observe(c as unknown as AwsNodeClaim);
    };
    informer.on('add', seen);
    informer.on('update', seen);
    // On any error but 410 the informer stops; stop() itself reports an AbortError.
    informer.on('error', (err) => {
      if (this.stopped) return;
      this.fail('NodeClaim watch', err);
      this.counters.informerRestarts++;
      this.after(backoffMs, () => void informer.start());
      backoffMs = Math.min(backoffMs * 2, 10_000);
    });
    this.informer = informer;
    await informer.start();
  }

  private async relist(): Promise<void> {
    const list = (await this.custom.listClusterCustomObject(NODECLAIM_API)) as { items: AwsNodeClaim[] };
    for (const c of list.items) this.observe(c);
  }

  private observe(claim: AwsNodeClaim): void {
    if (this.stopped) return;
    const providerID = claim.status?.providerID;
    const known = this.byClaim.get(claim.metadata.name);
    if (known) {
      known.claim = claim;
      return;
    }
    if (!providerID) return;
    const instanceId = instanceIdOf(providerID);
    if (!instanceId) return this.fail(`NodeClaim ${claim.metadata.name}`, new Error(`providerID ${providerID} is not aws:///<zone>/<instance-id>`));
    if (this.byInstance.has(instanceId)) return;
    const tracked: Tracked = {
      record: { nodeClaim: claim.metadata.name, providerID, instanceId, providerIDSeenAt: Date.now(), heartbeats: 0 },
      phase: 'describing',
      claim,
      lastHeartbeatAt: 0,
      heartbeatInFlight: false,
      describeTries: 0,
    };
    this.counters.nodeClaimsSeen++;
    this.byClaim.set(claim.metadata.name, tracked);
    this.byInstance.set(instanceId, tracked);
    this.queueDescribe(instanceId);
  }

  // -------------------------------------------------------------------------------------------
  // EC2

  /**
   * DescribeInstances of these ids, 200 a call; by InstanceIds (moto answers that faster than the
   * instance-id filter), by filter if one of them is unknown (EC2 then fails the whole call).
   */
  private async describe(ids: string[]): Promise<Map<string, Instance>> {
    const found = new Map<string, Instance>();
    for (let i = 0; i < ids.length; i += 200) {
      const chunk = ids.slice(i, i + 200);
      let token: string | undefined;
      let byFilter = false;
      do {
        this.counters.describeCalls++;
        let out;
        try {
          out = await this.ec2.send(new DescribeInstancesCommand(byFilter ? { Filters: [{ Name: 'instance-id', Values: chunk }], NextToken: token } : { InstanceIds: chunk, NextToken: token }));
        } catch (err) {
          if (byFilter || (err as { name?: string }).name !== 'InvalidInstanceID.NotFound') throw err;
          byFilter = true;
          token = undefined;
          continue;
        }
        for (const r of out.Reservations ?? []) for (const inst of r.Instances ?? []) if (inst.InstanceId) found.set(inst.InstanceId, inst);
        token = out.NextToken;
      } while (token);
    }
    return found;
  }

  /**
   * New providerIDs are read in as few calls as can be: one DescribeInstances in flight, taking every
   * id queued meanwhile (a burst of launches): moto scans every instance it holds on each call.
   */
  private queueDescribe(id: string): void {
    this.describeQueue.add(id);
    if (this.describeTimer || this.describing) return;
    this.describeTimer = setTimeout(() => this.pumpDescribe(), 20);
  }

  private pumpDescribe(): void {
    this.describeTimer = undefined;
    if (this.stopped || this.describing || this.describeQueue.size === 0) return;
    const ids = [...this.describeQueue];
    this.describeQueue = new Set();
    this.describing = true;
    this.track(this.describeNew(ids).finally(() => {
      this.describing = false;
      this.pumpDescribe();
    }));
  }

  private async describeNew(ids: string[]): Promise<void> {
    let found: Map<string, Instance>;
    try {
      found = await this.describe(ids);
    } catch (err) {
      this.fail('DescribeInstances', err);
      for (const id of ids) this.after(1000, () => this.queueDescribe(id));
      return;
    }
    const now = Date.now();
    for (const id of ids) {
      const t = this.byInstance.get(id);
      if (!t || t.phase !== 'describing') continue;
      const inst = found.get(id);
      if (!inst) {
        // EC2 is eventually consistent: a just-launched instance may not be listed yet.
        if (++t.describeTries >= 20) this.failTracked(t, `instance ${id} not found after ${t.describeTries} DescribeInstances`);
        else this.after(500, () => this.queueDescribe(id));
        continue;
      }
      t.instance = inst;
      Object.assign(t.record, {
        describedAt: now,
        nodeName: inst.PrivateDnsName || `ip-${(inst.PrivateIpAddress ?? '10.0.0.1').replaceAll('.', '-')}.ec2.internal`,
        instanceType: inst.InstanceType,
        zone: inst.Placement?.AvailabilityZone,
        capacityType: inst.InstanceLifecycle === 'spot' ? 'spot' : 'on-demand',
      });
      if (!this.alive(inst)) {
        this.gone(t);
        continue;
      }
      t.phase = 'booting';
      // Fetched now, used at the CREATE or the Ready write.
      void this.instanceType(inst.InstanceType).catch(() => undefined);
      const wait = Math.max(0, t.record.providerIDSeenAt + this.opts.bootDelayMs - now);
      t.timer = this.after(wait, () => this.track(this.creates.run(() => this.make(t))));
    }
  }

  private instanceType(name: string | undefined): Promise<InstanceTypeInfo | undefined> {
    if (!name) return Promise.resolve(undefined);
    let info = this.instanceTypes.get(name);
    if (!info) {
      info = this.ec2.send(new DescribeInstanceTypesCommand({ InstanceTypes: [name as _InstanceType] })).then((o) => o.InstanceTypes?.[0]);
      info.catch(() => this.instanceTypes.delete(name));
      this.instanceTypes.set(name, info);
    }
    return info;
  }

  private alive(inst: Instance): boolean {
    return inst.State?.Name === 'pending' || inst.State?.Name === 'running';
  }

  /**
   * Every tracked instance's state, as the cloud controller reads it. One DescribeInstances of the
   * instances that are not pending or running (moto answers that in milliseconds; describing every
   * tracked instance by id costs it about 6 ms an instance, which at 500 nodes every 5 s would keep
   * it busy), and one by id of the few whose kubelet is down, to see them come back. moto never
   * forgets an instance, so "gone from the listing" is not looked for.
   */
  private async pollInstances(): Promise<void> {
    const watched = [...this.byInstance.values()].filter((t) => t.phase === 'booting' || t.phase === 'creating' || t.phase === 'running' || t.phase === 'stopped');
    if (watched.length === 0) return;
    this.counters.describeCalls++;
    const down = new Map<string, Instance>();
    let token: string | undefined;
    do {
      const out = await this.ec2.send(new DescribeInstancesCommand({ Filters: [{ Name: 'instance-state-name', Values: ['shutting-down', 'terminated', 'stopping', 'stopped'] }], NextToken: token }));
      for (const r of out.Reservations ?? []) for (const inst of r.Instances ?? []) if (inst.InstanceId) down.set(inst.InstanceId, inst);
      token = out.NextToken;
    } while (token);
    const stopped = watched.filter((t) => t.phase === 'stopped' && !down.has(t.record.instanceId));
    const back = stopped.length > 0 ? await this.describe(stopped.map((t) => t.record.instanceId)) : new Map<string, Instance>();
    for (const t of watched) {
      const inst = down.get(t.record.instanceId) ?? back.get(t.record.instanceId);
      const state = inst?.State?.Name;
      if (state === 'terminated' || state === 'shutting-down') this.gone(t);
      else if (inst && !this.alive(inst) && t.phase === 'running') {
        // Stopped: the kubelet is down, the instance still exists, so the Node stays (NotReady).
        t.phase = 'stopped';
        this.track(this.small.run(() => this.writeUnknown(t)));
      } else if (inst && this.alive(inst) && t.phase === 'stopped') {
        t.phase = 'running';
        this.track(this.small.run(() => this.writeReady(t)));
      }
    }
  }

  // -------------------------------------------------------------------------------------------
  // Nodes

  /** The Node a kubelet registers on an EKS AMI: one CREATE, status included. */
  private nodeFor(t: Tracked, resources: { capacity: Record<string, string>; allocatable: Record<string, string> }): k8s.V1Node {
    const inst = t.instance!;
    const name = t.record.nodeName!;
    const zone = t.record.zone ?? `${this.opts.region}a`;
    const architecture = arch(inst.Architecture);
    const ip = inst.PrivateIpAddress ?? '10.0.0.1';
    const model = realNode({ name, index: this.nodeIndex++, zone, instanceType: t.record.instanceType ?? 'm5.large', providerID: t.record.providerID });
    const claimLabels = { ...t.claim.metadata.labels };
    // Karpenter writes these itself, at registration and initialization.
    delete claimLabels['karpenter.sh/registered'];
    delete claimLabels['karpenter.sh/initialized'];
    const taints: Taint[] = [UNREGISTERED_TAINT as Taint];
    for (const taint of [...(t.claim.spec?.taints ?? []), ...(t.claim.spec?.startupTaints ?? []), ...(this.opts.uninitializedTaint ? [UNINITIALIZED_TAINT as Taint] : [])]) {
      if (!taints.some((have) => sameTaint(have, taint))) taints.push(taint);
    }
    const at = new Date().toISOString();
    return {
      apiVersion: 'v1',
      kind: 'Node',
      metadata: {
        name,
        labels: {
          ...claimLabels,
          'beta.kubernetes.io/arch': architecture,
          'beta.kubernetes.io/os': 'linux',
          'kubernetes.io/arch': architecture,
          'kubernetes.io/hostname': name,
          'kubernetes.io/os': 'linux',
          ...(t.record.instanceType ? { 'node.kubernetes.io/instance-type': t.record.instanceType } : {}),
          'topology.kubernetes.io/region': this.opts.region,
          'topology.kubernetes.io/zone': zone,
        },
        annotations: {
          'alpha.kubernetes.io/provided-node-ip': ip,
          'volumes.kubernetes.io/controller-managed-attach-detach': 'true',
        },
      },
      spec: { providerID: t.record.providerID, taints: taints as k8s.V1Taint[] },
      status: {
        addresses: [
          { type: 'InternalIP', address: ip },
          { type: 'InternalDNS', address: name },
          { type: 'Hostname', address: name },
        ],
        capacity: resources.capacity,
        allocatable: resources.allocatable,
        // A kubelet's first status: its network plugin is not up yet.
        conditions: conditions(at).map((c) => c.type === 'Ready'
          ? { ...c, status: 'False', reason: 'KubeletNotReady', message: 'container runtime network not ready: NetworkReady=false reason:NetworkPluginNotReady message:Network plugin returns error: cni plugin not initialized' }
          : c),
        daemonEndpoints: model.status!.daemonEndpoints!,
        images: model.status!.images!,
        nodeInfo: {
          ...model.status!.nodeInfo!,
          architecture,
          kernelVersion: `6.1.141-155.222.amzn2023.${architecture === 'arm64' ? 'aarch64' : 'x86_64'}`,
          kubeletVersion: this.kubeletVersion,
        },
      },
    };
  }

  private async resourcesOf(t: Tracked): Promise<{ capacity: Record<string, string>; allocatable: Record<string, string> }> {
    const fromType = resourcesFromInstanceType(await this.instanceType(t.record.instanceType).catch(() => undefined));
    const status = t.claim.status;
    // Karpenter's NodeClaim holds what it expects the kubelet to report; the standard keys always present.
    return {
      capacity: { ...fromType.capacity, ...status?.capacity },
      allocatable: { ...fromType.allocatable, ...status?.allocatable },
    };
  }

  private async make(t: Tracked): Promise<void> {
    if (this.stopped || t.phase !== 'booting') return;
    t.phase = 'creating';
    const resources = await this.resourcesOf(t);
    const body = this.nodeFor(t, resources);
    let node: k8s.V1Node;
    try {
      // A kubelet retries its registration until it is answered; the record keeps the last attempt's times.
      node = await this.retrying(t, () => {
        t.record.createSentAt = Date.now();
        return this.core.createNode({ body });
      });
      t.record.nodeCreatedAt = Date.now();
      this.counters.nodesMade++;
    } catch (err) {
      if (codeOf(err) !== 409) {
        // A kubelet never gives up registering: after a failure the retries did not outlast (an
        // apiserver timing out under load), it begins again a few times before it is counted as failed.
        t.makeTries = (t.makeTries ?? 0) + 1;
        if (t.makeTries < 5 && !this.stopped) {
          t.phase = 'booting';
          t.timer = this.after(2000, () => this.track(this.creates.run(() => this.make(t))));
          return;
        }
        return this.failTracked(t, `CREATE node ${body.metadata!.name}: ${message(err)}`);
      }
      // A kubelet restarting gets AlreadyExists too (as does a CREATE retried after a timeout that
      // the apiserver carried out): it then carries on with the Node it has.
      node = await this.retrying(t, () => this.core.readNode({ name: body.metadata!.name! }));
      t.record.nodeCreatedAt = Date.now();
      t.record.alreadyExisted = true;
    }
    t.record.createdBytes = Buffer.byteLength(JSON.stringify(node));
    this.track(this.afterCreate(t, resources));
  }

  private async afterCreate(t: Tracked, resources: { capacity: Record<string, string>; allocatable: Record<string, string> }): Promise<void> {
    if (this.opts.readyDelayMs > 0) await sleep(this.opts.readyDelayMs);
    if (this.stopped) return;
    // The instance went while the CREATE was in flight: its Node goes as any other.
    const phase = t.phase as Phase; // gone() may have changed it meanwhile
    if (phase === 'gone') return this.removeNode(t);
    if (phase !== 'creating') return;
    t.phase = 'running';
    await this.statusWrites.run(() => this.writeReady(t, resources));
  }

  /** Ready=True with capacity and allocatable, then the controllers' taints off. */
  private async writeReady(t: Tracked, resources?: { capacity: Record<string, string>; allocatable: Record<string, string> }): Promise<void> {
    const name = t.record.nodeName!;
    const at = new Date().toISOString();
    const res = resources ?? (await this.resourcesOf(t));
    try {
      const patch = {
        status: {
          capacity: res.capacity,
          allocatable: res.allocatable,
          conditions: conditions(at).map((c) => (c.type === 'Ready' ? c : { type: c.type, status: c.status, reason: c.reason, message: c.message, lastHeartbeatTime: c.lastHeartbeatTime })),
        },
      };
      const node = await this.retrying(t, () => this.core.patchNodeStatus({ name, body: patch }, strategicMerge));
      t.record.readyAt ??= Date.now();
      t.lastHeartbeatAt = Date.now();
      await this.removeControllerTaints(t, node);
      t.record.settledAt ??= Date.now();
    } catch (err) {
      if (codeOf(err) === 404) return this.lost(t);
      this.failTracked(t, `Ready status of ${name}: ${message(err)}`, false);
    }
  }

  /** What the node lifecycle controller and the cloud controller remove once the Node is Ready; guarded by resourceVersion, as Karpenter edits the same list. */
  private async removeControllerTaints(t: Tracked, seen: k8s.V1Node): Promise<void> {
    const name = t.record.nodeName!;
    for (let attempt = 0; ; attempt++) {
      // First the Node as the status write answered it, then as read after a conflict.
      const node = attempt === 0 ? seen : await this.retrying(t, () => this.core.readNode({ name }));
      const taints = (node.spec?.taints ?? []) as Taint[];
      const keep = taints.filter((have) => !CONTROLLER_TAINTS.some((c) => sameTaint(c as Taint, have)));
      if (keep.length === taints.length) return;
      try {
        const body = { metadata: { resourceVersion: node.metadata?.resourceVersion }, spec: { taints: keep.length ? keep : null } };
        await this.retrying(t, () => this.core.patchNode({ name, body }, mergePatch));
        t.record.taintsRemoved = taints.filter((have) => !keep.includes(have)).map((x) => `${x.key}:${x.effect}`);
        return;
      } catch (err) {
        if (codeOf(err) !== 409 || attempt >= 10) throw err;
        this.counters.taintConflicts++;
      }
    }
  }

  private heartbeatDue(): void {
    const now = Date.now();
    for (const t of this.byInstance.values()) {
      if (t.phase !== 'running' || t.record.readyAt === undefined || t.heartbeatInFlight || now - t.lastHeartbeatAt < this.opts.heartbeatMs) continue;
      t.heartbeatInFlight = true;
      this.track(this.small.run(async () => {
        try {
          await this.core.patchNodeStatus({ name: t.record.nodeName!, body: heartbeatPatch() }, strategicMerge);
          t.lastHeartbeatAt = Date.now();
          t.record.heartbeats++;
          this.counters.heartbeats++;
        } catch (err) {
          this.counters.heartbeatFailures++;
          if (codeOf(err) === 404) this.lost(t);
          else this.fail(`heartbeat of ${t.record.nodeName}`, err);
          // A kubelet retries on its next period.
          t.lastHeartbeatAt = Date.now();
        } finally {
          t.heartbeatInFlight = false;
        }
      }));
    }
  }

  /** The Node was deleted under a live instance (Karpenter's termination, a test): the kubelet registers only at start, so it stays gone. */
  private lost(t: Tracked): void {
    if (t.phase === 'running' || t.phase === 'stopped') t.phase = 'gone';
  }

  /** The conditions the node lifecycle controller writes when the kubelet stopped posting status. */
  private async writeUnknown(t: Tracked): Promise<void> {
    const at = new Date().toISOString();
    const body = {
      status: {
        conditions: conditions(at).map((c) => ({
          type: c.type, status: 'Unknown', reason: 'NodeStatusUnknown', message: 'Kubelet stopped posting node status.', lastTransitionTime: c.lastTransitionTime,
        })),
      },
    };
    await this.core.patchNodeStatus({ name: t.record.nodeName!, body }, strategicMerge).catch((err) => {
      if (codeOf(err) !== 404) throw err;
    });
  }

  /** The instance is terminated or gone: the kubelet died with it; the cloud controller deletes its Node. */
  private gone(t: Tracked): void {
    const before = t.phase;
    t.phase = 'gone';
    t.record.goneAt = Date.now();
    if (t.timer) clearTimeout(t.timer);
    // Never registered, or its CREATE is in flight (make() then removes it).
    if (before === 'describing' || before === 'booting' || before === 'creating') return;
    this.track(this.small.run(() => this.removeNode(t)));
  }

  private async removeNode(t: Tracked): Promise<void> {
    const name = t.record.nodeName!;
    try {
      const node = await this.core.readNode({ name });
      if (node.spec?.providerID !== t.record.providerID || node.metadata?.deletionTimestamp) return;
      await this.writeUnknown(t);
      await this.core.deleteNode({ name });
      this.counters.nodesDeleted++;
    } catch (err) {
      if (codeOf(err) !== 404) this.fail(`deleting node ${name}`, err);
    }
  }

  // -------------------------------------------------------------------------------------------

  /** `call`, again after 0.25, 0.5, 1, 2, 4, 4... s while its failure is transient (at most 10 tries). */
  private async retrying<T>(t: Tracked, call: () => Promise<T>): Promise<T> {
    for (let attempt = 1; ; attempt++) {
      try {
        return await call();
      } catch (err) {
        if (!transient(err) || attempt >= 10 || this.stopped) throw err;
        t.record.retries = (t.record.retries ?? 0) + 1;
        this.counters.retries++;
        await sleep(Math.min(250 * 2 ** (attempt - 1), 4000));
      }
    }
  }

  private failTracked(t: Tracked, why: string, final = true): void {
    t.record.error = why;
    if (final) t.phase = 'failed';
    this.fail(t.record.nodeClaim, new Error(why));
  }

  private fail(what: string, err: unknown): void {
    this.counters.errors++;
    this.errorLog.push(`${new Date().toISOString()} ${what}: ${message(err)}`);
    if (this.errorLog.length > 50) this.errorLog.shift();
  }

  private track<T>(p: Promise<T>): void {
    const settled = p.catch((err) => this.fail('node maker', err)).finally(() => this.inFlight.delete(settled));
    this.inFlight.add(settled);
  }

  private after(ms: number, fn: () => void): NodeJS.Timeout {
    const timer = setTimeout(() => {
      this.timers.delete(timer);
      if (!this.stopped) fn();
    }, ms);
    this.timers.add(timer);
    return timer;
  }

  private every(ms: number, fn: () => Promise<void> | void): void {
    let running = false;
    const timer = setInterval(() => {
      if (this.stopped || running) return;
      running = true;
      this.track(Promise.resolve().then(fn).finally(() => (running = false)));
    }, ms);
    this.timers.add(timer);
  }
}

/** Starts the node maker beside `cp` (it stops with it). */
export function startNodeMaker(cp: ControlPlane, opts: NodeMakerOptions): Promise<NodeMaker> {
  return NodeMaker.start(cp, opts);
}

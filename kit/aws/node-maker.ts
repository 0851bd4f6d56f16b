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
import type { Instance } from '@aws-sdk/client-ec2';
import type { ControlPlane } from '../control-plane.ts';
import type { NodeClaim } from '../karpenter.ts';
import { sleep } from '../process.ts';
import {
  alive,
  InstanceReader,
  instanceIdOf,
  resourcesFromInstanceType,
  type Resources,
} from './node-maker/instances.ts';
import { kubeletNode, type Taint } from './node-maker/kubelet-node.ts';
import { NodeApi, type Retry } from './node-maker/node-api.ts';
import type { NodeMade, NodeMakerOptions, NodeMakerStats } from './node-maker/records.ts';
import { codeOf, Limiter, message, Tasks } from './node-maker/tasks.ts';

export type { NodeMade, NodeMakerOptions, NodeMakerStats };

/**
 * The node maker's user. It is in system:masters, as the KWOK kit runs Karpenter: a kubelet's own
 * identity (system:node:<name>, group system:nodes, the Node authorizer and NodeRestriction) would
 * need one certificate per node, and it also stands in for the cloud controller; the audit log
 * still tells its requests from everyone else's by this name.
 */
export const NODE_MAKER_USER = 'veneer-node-maker';

const NODECLAIM_API = { group: 'karpenter.sh', version: 'v1', plural: 'nodeclaims' };

type Phase = 'describing' | 'booting' | 'creating' | 'running' | 'stopped' | 'gone' | 'failed';

interface Tracked {
  record: NodeMade;
  phase: Phase;
  instance?: Instance;
  claim: AwsNodeClaim;
  lastHeartbeatAt: number;
  heartbeatInFlight: boolean;
  describeTries: number;
  /** CREATEs that failed after their retries and were begun again. */
  makeTries?: number;
  timer?: NodeJS.Timeout;
}

/** The parts of a karpenter.sh/v1 NodeClaim the node maker reads. */
export type AwsNodeClaim = NodeClaim & {
  apiVersion?: string;
  kind?: string;
  metadata: NodeClaim['metadata'] & { resourceVersion?: string; deletionTimestamp?: string };
  spec?: { taints?: Taint[]; startupTaints?: Taint[] };
  status?: NonNullable<NodeClaim['status']> & {
    capacity?: Record<string, string>;
    allocatable?: Record<string, string>;
  };
};

export class NodeMaker {
  readonly user = NODE_MAKER_USER;
  private readonly nodes: NodeApi;
  private readonly custom: k8s.CustomObjectsApi;
  private readonly kc: k8s.KubeConfig;
  private readonly opts: Required<Omit<NodeMakerOptions, 'region'>> & { region: string };
  private readonly kubeletVersion: string;
  private readonly tasks = new Tasks();
  private readonly instances: InstanceReader;
  private readonly byInstance = new Map<string, Tracked>();
  private readonly byClaim = new Map<string, Tracked>();
  private readonly creates: Limiter;
  /** Ready writes and taint removals after the CREATEs. */
  private readonly statusWrites: Limiter;
  /** Heartbeats, deletions, and the rest. */
  private readonly small = new Limiter(8);
  private readonly counters = {
    nodeClaimsSeen: 0,
    nodesMade: 0,
    heartbeats: 0,
    heartbeatFailures: 0,
    retries: 0,
    informerRestarts: 0,
  };
  private informer: k8s.Informer<k8s.KubernetesObject> | undefined;
  private nodeIndex = 0;

  private constructor(kc: k8s.KubeConfig, opts: NodeMakerOptions, kubeletVersion: string) {
    this.kc = kc;
    this.nodes = new NodeApi(kc);
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
    this.instances = new InstanceReader({
      endpoint: opts.ec2Endpoint,
      region: this.opts.region,
      tasks: this.tasks,
      described: (ids, found) => this.described(ids, found),
    });
  }

  /** Starts watching NodeClaims as NODE_MAKER_USER; stops with the control plane. */
  static async start(cp: ControlPlane, opts: NodeMakerOptions): Promise<NodeMaker> {
    const cert = await cp.clientCertificate(NODE_MAKER_USER, ['system:masters']);
    const kc = new k8s.KubeConfig();
    kc.loadFromOptions({
      clusters: [
        { name: 'test', server: cp.server, caData: Buffer.from(cp.caPem).toString('base64'), skipTLSVerify: false },
      ],
      users: [{ name: NODE_MAKER_USER, certFile: cert.certPath, keyFile: cert.keyPath }],
      contexts: [{ name: 'test', cluster: 'test', user: NODE_MAKER_USER }],
      currentContext: 'test',
    });
    // The kubelet reports the control plane's own release, as an EKS AMI of the cluster's version does.
    const version = await cp.get('/version').then(
      (r) => (JSON.parse(r.body) as { gitVersion?: string }).gitVersion,
      () => undefined,
    );
    const maker = new NodeMaker(kc, opts, `${version ?? 'v1.35.4'}-eks-4f4795d`);
    cp.onStop(() => maker.stop());
    await maker.startInformer();
    maker.tasks.every(1000, () => maker.heartbeatDue());
    maker.tasks.every(maker.opts.instancePollMs, () => maker.pollInstances());
    // A safety net under the watch: a relist a minute finds any providerID a stalled watch missed.
    maker.tasks.every(60_000, () => maker.relist());
    return maker;
  }

  stats(): NodeMakerStats {
    return {
      ...this.counters,
      nodesDeleted: this.nodes.nodesDeleted,
      taintConflicts: this.nodes.taintConflicts,
      describeCalls: this.instances.calls,
      errors: this.tasks.errors,
    };
  }

  /** One entry per NodeClaim seen with a providerID, in the order they were seen. */
  records(): NodeMade[] {
    return [...this.byClaim.values()].map((t) => ({ ...t.record }));
  }

  record(nodeClaim: string): NodeMade | undefined {
    const t = this.byClaim.get(nodeClaim);
    return t ? { ...t.record } : undefined;
  }

  /** How many tracked instances are in each phase: where a stalled burst stands. */
  phases(): Partial<Record<Phase, number>> {
    const counts: Partial<Record<Phase, number>> = {};
    for (const t of this.byInstance.values()) counts[t.phase] = (counts[t.phase] ?? 0) + 1;
    return counts;
  }

  /** The last errors (at most 50), oldest first. */
  errors(): string[] {
    return this.tasks.recentErrors();
  }

  /** Waits until `count` Nodes are settled (Ready, the controllers' taints removed), or throws with the errors seen. */
  async waitForReady(count: number, timeoutMs = 60_000): Promise<NodeMade[]> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const ready = this.records().filter((r) => r.settledAt !== undefined);
      if (ready.length >= count) return ready;
      if (Date.now() > deadline)
        throw new Error(
          `node maker: ${ready.length} of ${count} nodes Ready after ${timeoutMs} ms; errors: ${this.errors().slice(-5).join(' | ') || 'none'}`,
        );
      await sleep(100);
    }
  }

  async stop(): Promise<void> {
    if (this.tasks.stopped) return;
    const drained = this.tasks.stop();
    await this.informer?.stop();
    await drained;
    this.instances.destroy();
  }

  // -------------------------------------------------------------------------------------------
  // NodeClaims

  private async startInformer(): Promise<void> {
    const path = `/apis/${NODECLAIM_API.group}/${NODECLAIM_API.version}/${NODECLAIM_API.plural}`;
    const informer = k8s.makeInformer(
      this.kc,
      path,
      () =>
        this.custom.listClusterCustomObject(NODECLAIM_API) as Promise<k8s.KubernetesListObject<k8s.KubernetesObject>>,
    );
    let backoffMs = 500;
    const seen = (c: k8s.KubernetesObject) => {
      backoffMs = 500;
      this.observe(c as unknown as AwsNodeClaim);
    };
    informer.on('add', seen);
    informer.on('update', seen);
    // On any error but 410 the informer stops; stop() itself reports an AbortError.
    informer.on('error', (err) => {
      if (this.tasks.stopped) return;
      this.tasks.fail('NodeClaim watch', err);
      this.counters.informerRestarts++;
      this.tasks.after(backoffMs, () => void informer.start());
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
    if (this.tasks.stopped) return;
    const providerID = claim.status?.providerID;
    const known = this.byClaim.get(claim.metadata.name);
    if (known) {
      known.claim = claim;
      return;
    }
    if (!providerID) return;
    const instanceId = instanceIdOf(providerID);
    if (!instanceId) {
      this.tasks.fail(
        `NodeClaim ${claim.metadata.name}`,
        new Error(`providerID ${providerID} is not aws:///<zone>/<instance-id>`),
      );
      return;
    }
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
    this.instances.enqueue(instanceId);
  }

  // -------------------------------------------------------------------------------------------
  // Instances

  private described(ids: string[], found: Map<string, Instance>): void {
    const now = Date.now();
    for (const id of ids) {
      const t = this.byInstance.get(id);
      if (t?.phase !== 'describing') continue;
      const inst = found.get(id);
      if (!inst) {
        // EC2 is eventually consistent: a just-launched instance may not be listed yet.
        if (++t.describeTries >= 20)
          this.failTracked(t, `instance ${id} not found after ${t.describeTries} DescribeInstances`);
        else this.tasks.after(500, () => this.instances.enqueue(id));
        continue;
      }
      t.instance = inst;
      Object.assign(t.record, {
        describedAt: now,
        nodeName:
          inst.PrivateDnsName || `ip-${(inst.PrivateIpAddress ?? '10.0.0.1').replaceAll('.', '-')}.ec2.internal`,
        instanceType: inst.InstanceType,
        zone: inst.Placement?.AvailabilityZone,
        capacityType: inst.InstanceLifecycle === 'spot' ? 'spot' : 'on-demand',
      });
      if (!alive(inst)) {
        this.gone(t);
        continue;
      }
      t.phase = 'booting';
      // Fetched now, used at the CREATE or the Ready write.
      void this.instances.instanceType(inst.InstanceType).catch(() => undefined);
      const wait = Math.max(0, t.record.providerIDSeenAt + this.opts.bootDelayMs - now);
      t.timer = this.tasks.after(wait, () => this.tasks.track(this.creates.run(() => this.make(t))));
    }
  }

  /**
   * Every tracked instance's state, as the cloud controller reads it. One DescribeInstances of the
   * instances that are not pending or running, and one by id of the few whose kubelet is down, to
   * see them come back (describing every tracked instance by id costs moto about 6 ms an instance,
   * which at 500 nodes every 5 s would keep it busy). moto never forgets an instance, so "gone from
   * the listing" is not looked for.
   */
  private async pollInstances(): Promise<void> {
    const watched = [...this.byInstance.values()].filter(
      (t) => t.phase === 'booting' || t.phase === 'creating' || t.phase === 'running' || t.phase === 'stopped',
    );
    if (watched.length === 0) return;
    const down = await this.instances.down();
    const stopped = watched.filter((t) => t.phase === 'stopped' && !down.has(t.record.instanceId));
    const back =
      stopped.length > 0
        ? await this.instances.describe(stopped.map((t) => t.record.instanceId))
        : new Map<string, Instance>();
    for (const t of watched) {
      const inst = down.get(t.record.instanceId) ?? back.get(t.record.instanceId);
      const state = inst?.State?.Name;
      if (state === 'terminated' || state === 'shutting-down') this.gone(t);
      else if (inst && !alive(inst) && t.phase === 'running') {
        // Stopped: the kubelet is down, the instance still exists, so the Node stays (NotReady).
        t.phase = 'stopped';
        this.tasks.track(this.small.run(() => this.nodes.reportUnknown(t.record.nodeName!)));
      } else if (inst && alive(inst) && t.phase === 'stopped') {
        t.phase = 'running';
        this.tasks.track(this.small.run(() => this.writeReady(t)));
      }
    }
  }

  // -------------------------------------------------------------------------------------------
  // Nodes

  private async resourcesOf(t: Tracked): Promise<Resources> {
    const fromType = resourcesFromInstanceType(
      await this.instances.instanceType(t.record.instanceType).catch(() => undefined),
    );
    const status = t.claim.status;
    // Karpenter's NodeClaim holds what it expects the kubelet to report; the standard keys always present.
    return {
      capacity: { ...fromType.capacity, ...status?.capacity },
      allocatable: { ...fromType.allocatable, ...status?.allocatable },
    };
  }

  private async make(t: Tracked): Promise<void> {
    if (this.tasks.stopped || t.phase !== 'booting') return;
    t.phase = 'creating';
    const resources = await this.resourcesOf(t);
    const body = kubeletNode({
      instance: t.instance!,
      name: t.record.nodeName!,
      providerID: t.record.providerID,
      instanceType: t.record.instanceType,
      zone: t.record.zone ?? `${this.opts.region}a`,
      region: this.opts.region,
      index: this.nodeIndex++,
      kubeletVersion: this.kubeletVersion,
      claimLabels: t.claim.metadata.labels ?? {},
      claimTaints: [...(t.claim.spec?.taints ?? []), ...(t.claim.spec?.startupTaints ?? [])],
      uninitializedTaint: this.opts.uninitializedTaint,
      resources,
    });
    let registered: Awaited<ReturnType<typeof this.nodes.register>>;
    try {
      // A kubelet retries its registration until it is answered; the record keeps the last attempt's times.
      registered = await this.nodes.register(body, this.retry(t), () => (t.record.createSentAt = Date.now()));
    } catch (err) {
      // A kubelet never gives up registering: after a failure the retries did not outlast (an
      // apiserver timing out under load), it begins again with the kubelet's back-off (doubling to
      // 7 s), every failure counted and logged, until it is answered or stopped.
      if ((t.phase as Phase) === 'gone') return; // the instance went meanwhile: nothing to register
      t.makeTries = (t.makeTries ?? 0) + 1;
      t.record.error = `CREATE node ${body.metadata!.name} (try ${t.makeTries}): ${message(err)}`;
      this.tasks.fail(t.record.nodeClaim, new Error(t.record.error));
      t.phase = 'booting';
      const backoffMs = Math.min(100 * 2 ** t.makeTries, 7000);
      t.timer = this.tasks.after(backoffMs, () => this.tasks.track(this.creates.run(() => this.make(t))));
      return;
    }
    t.record.nodeCreatedAt = Date.now();
    if (registered.alreadyExisted) t.record.alreadyExisted = true;
    else this.counters.nodesMade++;
    t.record.createdBytes = Buffer.byteLength(JSON.stringify(registered.node));
    this.tasks.track(this.afterCreate(t, resources));
  }

  private async afterCreate(t: Tracked, resources: Resources): Promise<void> {
    if (this.opts.readyDelayMs > 0) await sleep(this.opts.readyDelayMs);
    if (this.tasks.stopped) return;
    // The instance went while the CREATE was in flight: its Node goes as any other.
    const phase = t.phase as Phase; // gone() may have changed it meanwhile
    if (phase === 'gone') return this.nodes.removeIfOurs(t.record.nodeName!, t.record.providerID);
    if (phase !== 'creating') return;
    t.phase = 'running';
    await this.statusWrites.run(() => this.writeReady(t, resources));
  }

  private async writeReady(t: Tracked, resources?: Resources): Promise<void> {
    const name = t.record.nodeName!;
    try {
      const removed = await this.nodes.reportReady(name, resources ?? (await this.resourcesOf(t)), this.retry(t));
      t.record.readyAt ??= Date.now();
      t.lastHeartbeatAt = Date.now();
      if (removed) t.record.taintsRemoved = removed;
      t.record.settledAt ??= Date.now();
    } catch (err) {
      if (codeOf(err) === 404) return this.lost(t);
      this.failTracked(t, `Ready status of ${name}: ${message(err)}`, false);
    }
  }

  private heartbeatDue(): void {
    const now = Date.now();
    for (const t of this.byInstance.values()) {
      if (
        t.phase !== 'running' ||
        t.record.readyAt === undefined ||
        t.heartbeatInFlight ||
        now - t.lastHeartbeatAt < this.opts.heartbeatMs
      )
        continue;
      t.heartbeatInFlight = true;
      this.tasks.track(
        this.small.run(async () => {
          try {
            await this.nodes.heartbeat(t.record.nodeName!);
            t.lastHeartbeatAt = Date.now();
            t.record.heartbeats++;
            this.counters.heartbeats++;
          } catch (err) {
            this.counters.heartbeatFailures++;
            if (codeOf(err) === 404) this.lost(t);
            else this.tasks.fail(`heartbeat of ${t.record.nodeName}`, err);
            // A kubelet retries on its next period.
            t.lastHeartbeatAt = Date.now();
          } finally {
            t.heartbeatInFlight = false;
          }
        }),
      );
    }
  }

  /** The Node was deleted under a live instance (Karpenter's termination, a test): the kubelet registers only at start, so it stays gone. */
  private lost(t: Tracked): void {
    if (t.phase === 'running' || t.phase === 'stopped') t.phase = 'gone';
  }

  /** The instance is terminated or gone: the kubelet died with it; the cloud controller deletes its Node. */
  private gone(t: Tracked): void {
    const before = t.phase;
    t.phase = 'gone';
    t.record.goneAt = Date.now();
    if (!t.claim.metadata.deletionTimestamp) t.record.collectedUnderClaim = true;
    if (t.timer) clearTimeout(t.timer);
    // Never registered, or its CREATE is in flight (make() then removes it).
    if (before === 'describing' || before === 'booting' || before === 'creating') return;
    this.tasks.track(
      this.small.run(() =>
        this.nodes
          .removeIfOurs(t.record.nodeName!, t.record.providerID)
          .catch((err) => this.tasks.fail(`deleting node ${t.record.nodeName}`, err)),
      ),
    );
  }

  /** Retries of this Node's requests, counted on its record. */
  private retry(t: Tracked): Retry {
    return (call) =>
      this.tasks.retrying(call, () => {
        t.record.retries = (t.record.retries ?? 0) + 1;
        this.counters.retries++;
      });
  }

  private failTracked(t: Tracked, why: string, final = true): void {
    t.record.error = why;
    if (final) t.phase = 'failed';
    this.tasks.fail(t.record.nodeClaim, new Error(why));
  }
}

/** Starts the node maker beside `cp` (it stops with it). */
export function startNodeMaker(cp: ControlPlane, opts: NodeMakerOptions): Promise<NodeMaker> {
  return NodeMaker.start(cp, opts);
}

// Real Karpenter beside a ControlPlane: its KWOK cloud provider (sigs.k8s.io/karpenter/kwok, as
// Karpenter's own scale tests run it), which "launches" an instance by creating its Node, and
// kube-scheduler, which marks pending pods Unschedulable (what Karpenter provisions for). Both are
// built by scripts/control-plane.sh; each dies with the test (kit/process.ts) and stops with the
// control plane. Karpenter's own CRDs are installed (not kit/crds) and nothing stands in for its
// NodeOverlay controller: real Karpenter writes the overlay statuses.
//
// Facts this relies on (checked here against v1.15.0): Karpenter provisions only pods whose
// PodScheduled condition is False/Unschedulable; KWOK launches the candidate with the cheapest RAW
// catalog price (overlay prices do not change its choice), so a test pins the instance type and
// capacity type it needs with a nodeSelector; the Node is created with every NodeClaim label
// (after the KWOKNodeClass's nodeRegistrationDelay); no kubelet ever runs, so nodes stay NotReady,
// pods never bind and NodeClaims never initialize (nothing is disrupted either).
import { readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import * as k8s from '@kubernetes/client-node';
import { binary, type ControlPlane, freePort } from './control-plane.ts';
import { installCRDFiles } from './karpenter-crds.ts';
import { ManagedProcess, sleep } from './process.ts';
import { launchWatcher, registerWebhooksAt, startClusterEnv, WATCHER_USER, type ClusterEnv, type WatcherEnvOptions } from './watcher-env.ts';
import type { RunningWatcher } from '../src/watcher.ts';
import type { JudgeVersion } from '../test/support/karpenter-oracle.ts';

/** The Karpenter version that runs (scripts/control-plane.sh builds it; `npm run test:matrix` also runs v1.14.1). */
export const KARPENTER_VERSION = (process.env.VENEER_KARPENTER_KWOK_VERSION ?? 'v1.15.0') as JudgeVersion;
export const KARPENTER_USER = 'karpenter';
/** The bootstrap RBAC of every cluster binds the scheduler's roles to this user. */
export const SCHEDULER_USER = 'system:kube-scheduler';
export const NODEPOOL_API = { group: 'karpenter.sh', version: 'v1', plural: 'nodepools' };
export const NODECLAIM_API = { group: 'karpenter.sh', version: 'v1', plural: 'nodeclaims' };
export const KWOK_NODECLASS_API = { group: 'karpenter.kwok.sh', version: 'v1alpha1', plural: 'kwoknodeclasses' };
/** The watcher's setting for clusters whose Karpenter runs the KWOK provider: overlays there name KWOK's keys. */
export const KWOK_WATCHER_FLAGS = { '--karpenter-provider': 'kwok' };
/** Karpenter's own annotation on NodeClaims and nodes launched from a type that had any price overlay. */
export const PRICE_OVERLAY_APPLIED = 'karpenter.sh/price-overlay-applied';

// ---------------------------------------------------------------------------------------------
// The instance-type catalog (INSTANCE_TYPES_FILE_PATH): AWS-shaped names, so that KWOK derives
// karpenter.kwok.sh/instance-family=m5 and instance-size=xlarge from `m5.xlarge`.

export const REGION = 'us-west-2';
export const ZONES = ['us-west-2a', 'us-west-2b', 'us-west-2c'] as const;
export type CapacityType = 'on-demand' | 'spot';

export interface NodeSelectorRequirement {
  key: string;
  operator: string;
  values?: string[];
}

/** One entry of KWOK's catalog file (kwok/cloudprovider/helpers.go InstanceTypeOptions). */
export interface KwokInstanceType {
  name: string;
  architecture: string;
  operatingSystems: string[];
  resources: Record<string, string>;
  offerings: { Price: number; Available: boolean; Requirements: NodeSelectorRequirement[] }[];
}

interface Family {
  name: string;
  arch: 'amd64' | 'arm64';
  gibPerCpu: number;
  /** On-demand price of one vCPU an hour (us-west-2, Linux). */
  perCpu: number;
}
const FAMILIES: Family[] = [
  { name: 'm5', arch: 'amd64', gibPerCpu: 4, perCpu: 0.048 },
  { name: 'c6i', arch: 'amd64', gibPerCpu: 2, perCpu: 0.0425 },
  { name: 'r6g', arch: 'arm64', gibPerCpu: 8, perCpu: 0.0504 },
  { name: 't3', arch: 'amd64', gibPerCpu: 4, perCpu: 0.0416 },
];
const SIZES = [['large', 2], ['xlarge', 4], ['2xlarge', 8]] as const;
/** Spot as a share of on-demand, per zone (each family a little dearer than the one before). */
const SPOT_SHARE = [0.38, 0.35, 0.41];

const inReq = (key: string, ...values: string[]): NodeSelectorRequirement => ({ key, operator: 'In', values });

/** Families m5, c6i, r6g, t3 in sizes large, xlarge, 2xlarge; on-demand and spot in three zones of us-west-2. */
export function awsLikeCatalog(): KwokInstanceType[] {
  return FAMILIES.flatMap((f, fi) => SIZES.map(([size, cpu]) => {
    const onDemand = Number((cpu * f.perCpu).toFixed(4));
    return {
      name: `${f.name}.${size}`,
      architecture: f.arch,
      operatingSystems: ['linux'],
      // Canonical quantities: KWOK's instance-cpu/instance-memory labels are their String().
      resources: { cpu: String(cpu), memory: `${cpu * f.gibPerCpu}Gi`, 'ephemeral-storage': '20Gi', pods: size === 'large' ? (f.name === 't3' ? '35' : '29') : '58' },
      offerings: ZONES.flatMap((zone, zi) => (['on-demand', 'spot'] as const).map((ct) => ({
        Price: ct === 'on-demand' ? onDemand : Number((onDemand * (SPOT_SHARE[zi]! + fi * 0.01)).toFixed(5)),
        Available: true,
        // Every key here becomes a node label: the region too, as AWS nodes carry it.
        Requirements: [inReq('karpenter.sh/capacity-type', ct), inReq('topology.kubernetes.io/zone', zone), inReq('topology.kubernetes.io/region', REGION)],
      }))),
    };
  }));
}

// ---------------------------------------------------------------------------------------------
// NodePools and KWOKNodeClasses.

export interface KwokNodePool {
  name: string;
  /** spec.template.metadata.labels */
  labels?: Record<string, string>;
  /** The KWOKNodeClass (default `default`). */
  nodeClass?: string;
  capacityTypes?: CapacityType[];
}

export function nodePoolObject(p: KwokNodePool) {
  return {
    apiVersion: 'karpenter.sh/v1',
    kind: 'NodePool',
    metadata: { name: p.name },
    spec: {
      template: {
        metadata: { labels: p.labels ?? {} },
        spec: {
          nodeClassRef: { group: 'karpenter.kwok.sh', kind: 'KWOKNodeClass', name: p.nodeClass ?? 'default' },
          requirements: nodePoolRequirements(p),
          expireAfter: 'Never',
        },
      },
      // Nodes never initialize without a kubelet, so nothing would be disrupted anyway: say it.
      disruption: { consolidationPolicy: 'WhenEmptyOrUnderutilized', consolidateAfter: 'Never' },
    },
  };
}

export function nodePoolRequirements(p: KwokNodePool): NodeSelectorRequirement[] {
  return [inReq('karpenter.sh/capacity-type', ...(p.capacityTypes ?? ['on-demand', 'spot'])), inReq('kubernetes.io/os', 'linux')];
}

export interface KarpenterOptions {
  catalog?: KwokInstanceType[];
  /** KWOKNodeClasses by name, with the delay before the Node's CREATE (`2s`: a booting kubelet). Default: `default`, no delay. */
  nodeClasses?: Record<string, { nodeRegistrationDelay?: string }>;
  /** Default: one pool `default` on the `default` class. */
  nodePools?: KwokNodePool[];
  /** Karpenter's LOG_LEVEL (default info; its log is in the control plane's directory). */
  logLevel?: string;
  startTimeoutMs?: number;
}

export interface ProcessUsage {
  rssMiB: number;
  peakRssMiB: number;
  cpuSeconds: number;
}

/** Resident and peak memory and CPU time of a running process, from /proc. */
export function usageOf(pid: number | undefined): ProcessUsage | undefined {
  if (pid === undefined) return undefined;
  try {
    const status = readFileSync(`/proc/${pid}/status`, 'utf8');
    const kib = (field: string) => Number(new RegExp(`^${field}:\\s+(\\d+) kB`, 'm').exec(status)?.[1] ?? 0);
    // Fields 14 and 15 of /proc/PID/stat (after the command in parentheses): utime, stime in ticks.
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    const ticks = Number(fields[11]) + Number(fields[12]);
    return { rssMiB: kib('VmRSS') / 1024, peakRssMiB: kib('VmHWM') / 1024, cpuSeconds: ticks / 100 };
  } catch {
    return undefined;
  }
}

/** A kubeconfig file for a client-certificate user of this control plane. */
async function certKubeconfig(cp: ControlPlane, user: string, groups: string[], file: string): Promise<string> {
  const cert = await cp.clientCertificate(user, groups);
  const kc = new k8s.KubeConfig();
  kc.loadFromOptions({
    clusters: [{ name: 'test', server: cp.server, caData: Buffer.from(cp.caPem).toString('base64'), skipTLSVerify: false }],
    users: [{ name: user, certFile: cert.certPath, keyFile: cert.keyPath }],
    contexts: [{ name: 'test', cluster: 'test', user }],
    currentContext: 'test',
  });
  return cp.writeKubeConfig(kc, file);
}

/** Karpenter's CRDs from the module version the controller was built from, and nothing else. */
export async function installKwokCRDs(cp: ControlPlane): Promise<void> {
  const dir = binary('karpenterKwokCrds');
  const files = readdirSync(dir).filter((f) => f.endsWith('.yaml')).sort().map((f) => join(dir, f));
  await installCRDFiles(cp, files);
}

export class Karpenter {
  readonly cp: ControlPlane;
  readonly catalog: KwokInstanceType[];
  readonly nodePools: KwokNodePool[];
  readonly controller: ManagedProcess;
  readonly scheduler: ManagedProcess;
  private readonly custom: k8s.CustomObjectsApi;

  private constructor(cp: ControlPlane, catalog: KwokInstanceType[], nodePools: KwokNodePool[], controller: ManagedProcess, scheduler: ManagedProcess) {
    this.cp = cp;
    this.catalog = catalog;
    this.nodePools = nodePools;
    this.controller = controller;
    this.scheduler = scheduler;
    this.custom = cp.adminKubeConfig().makeApiClient(k8s.CustomObjectsApi);
  }

  /**
   * Creates the KWOKNodeClasses and NodePools, then starts kube-scheduler and Karpenter (the CRDs
   * must be installed: installKwokCRDs, or startKarpenterEnv does it all).
   */
  static async start(cp: ControlPlane, opts: KarpenterOptions = {}): Promise<Karpenter> {
    const catalog = opts.catalog ?? awsLikeCatalog();
    const nodePools = opts.nodePools ?? [{ name: 'default' }];
    const custom = cp.adminKubeConfig().makeApiClient(k8s.CustomObjectsApi);
    for (const [name, spec] of Object.entries(opts.nodeClasses ?? { default: {} })) {
      await custom.createClusterCustomObject({
        ...KWOK_NODECLASS_API,
        body: { apiVersion: 'karpenter.kwok.sh/v1alpha1', kind: 'KWOKNodeClass', metadata: { name }, spec: spec.nodeRegistrationDelay ? { nodeRegistrationDelay: spec.nodeRegistrationDelay } : {} },
      });
    }
    for (const p of nodePools) await custom.createClusterCustomObject({ ...NODEPOOL_API, body: nodePoolObject(p) });

    const catalogPath = join(cp.dir, 'kwok-instance-types.json');
    writeFileSync(catalogPath, JSON.stringify(catalog, null, 1));
    const scheduler = new ManagedProcess('kube-scheduler', binary('kubeScheduler'), [
      `--kubeconfig=${await certKubeconfig(cp, SCHEDULER_USER, [], 'kubeconfig-scheduler')}`,
      '--leader-elect=false',
      '--secure-port=0',
    ], join(cp.dir, 'kube-scheduler.log'));
    const [metricsPort, healthPort] = [await freePort(), await freePort()];
    // Karpenter's own identity in system:masters: its chart's RBAC is not in the module, and the
    // audit log still tells its requests from the test's.
    const controller = new ManagedProcess('karpenter', binary('karpenterKwok'), [], join(cp.dir, 'karpenter.log'), {
      ...process.env,
      KUBECONFIG: await certKubeconfig(cp, KARPENTER_USER, ['system:masters'], 'kubeconfig-karpenter'),
      DISABLE_LEADER_ELECTION: 'true',
      // Both bind every interface (no option narrows them); nothing needs to reach them but the probe.
      METRICS_PORT: String(metricsPort),
      HEALTH_PROBE_PORT: String(healthPort),
      FEATURE_GATES: 'NodeOverlay=true',
      INSTANCE_TYPES_FILE_PATH: catalogPath,
      LOG_LEVEL: opts.logLevel ?? 'info',
    });
    const karpenter = new Karpenter(cp, catalog, nodePools, controller, scheduler);
    cp.onStop(() => karpenter.stop());
    scheduler.start();
    controller.start();
    const deadline = Date.now() + (opts.startTimeoutMs ?? 60_000);
    for (;;) {
      for (const p of [scheduler, controller]) if (!p.running) throw new Error(`${p.name} exited during start-up:\n${p.logTail()}`);
      const ready = await fetch(`http://127.0.0.1:${healthPort}/readyz`).then((r) => r.ok, () => false);
      if (ready) break;
      if (Date.now() > deadline) throw new Error(`karpenter was not ready in time:\n${controller.logTail()}`);
      await sleep(200);
    }
    return karpenter;
  }

  usage(): { karpenter: ProcessUsage | undefined; scheduler: ProcessUsage | undefined } {
    return { karpenter: usageOf(this.controller.pid), scheduler: usageOf(this.scheduler.pid) };
  }

  /** Karpenter stops first: it would otherwise act on a half-stopped cluster. */
  async stop(): Promise<void> {
    await this.controller.stop(3000);
    await this.scheduler.stop(3000);
  }

  async nodeClaims(): Promise<NodeClaim[]> {
    return ((await this.custom.listClusterCustomObject(NODECLAIM_API)) as { items: NodeClaim[] }).items;
  }

  /** Waits until `count` NodeClaims (of `pool`, if given) exist; returns them. */
  async waitForNodeClaims(count: number, pool?: string, timeoutMs = 60_000): Promise<NodeClaim[]> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const claims = (await this.nodeClaims()).filter((c) => pool === undefined || c.metadata.labels?.['karpenter.sh/nodepool'] === pool);
      if (claims.length >= count) return claims;
      if (Date.now() > deadline) throw new Error(`${claims.length} of ${count} NodeClaims after ${timeoutMs} ms`);
      await sleep(200);
    }
  }

  /** Waits until `count` Karpenter nodes (of `pool`, if given; registered by Karpenter, if asked) exist; returns them. */
  async waitForNodes(count: number, opts: { pool?: string; registered?: boolean; timeoutMs?: number } = {}): Promise<k8s.V1Node[]> {
    const core = this.cp.adminKubeConfig().makeApiClient(k8s.CoreV1Api);
    const deadline = Date.now() + (opts.timeoutMs ?? 60_000);
    for (;;) {
      const nodes = (await core.listNode()).items.filter((n) => {
        const labels = n.metadata?.labels ?? {};
        return labels['karpenter.sh/nodepool'] !== undefined && (opts.pool === undefined || labels['karpenter.sh/nodepool'] === opts.pool)
          && (!opts.registered || labels['karpenter.sh/registered'] === 'true');
      });
      if (nodes.length >= count) return nodes;
      if (Date.now() > deadline) throw new Error(`${nodes.length} of ${count} nodes after ${opts.timeoutMs ?? 60_000} ms`);
      await sleep(200);
    }
  }

  /** The catalog entry and offering index a launched node runs on (its type, capacity type and zone). */
  offeringOf(labels: Record<string, string>): { type: KwokInstanceType; offering: number } {
    const type = this.catalog.find((t) => t.name === labels['node.kubernetes.io/instance-type']);
    if (!type) throw new Error(`no instance type ${labels['node.kubernetes.io/instance-type']} in the catalog`);
    const offering = type.offerings.findIndex((o) => o.Requirements.every((r) => r.values?.[0] === labels[r.key]));
    if (offering < 0) throw new Error(`${type.name}: no offering for ${labels['karpenter.sh/capacity-type']} in ${labels['topology.kubernetes.io/zone']}`);
    return { type, offering };
  }
}

export interface NodeClaim {
  metadata: { name: string; creationTimestamp?: string; labels?: Record<string, string>; annotations?: Record<string, string> };
  status?: { providerID?: string; nodeName?: string; conditions?: { type: string; status: string; reason?: string }[] };
}

// ---------------------------------------------------------------------------------------------
// Pods that need a node each.

export interface PendingPod {
  name: string;
  /** Pins `node.kubernetes.io/instance-type` (KWOK would otherwise pick the cheapest raw price). */
  instanceType: string;
  capacityType?: CapacityType;
  nodePool?: string;
  /** Pins `topology.kubernetes.io/zone` (KWOK picks the cheapest zone, any of them for on-demand). */
  zone?: string;
}

/** A CPU request no two of which fit one node of the type (allocatable is capacity less 100m). */
export function cpuRequestFor(type: KwokInstanceType): string {
  return `${(Number(type.resources.cpu) * 1000) / 2 + 100}m`;
}

export function podObject(pod: PendingPod, catalog: KwokInstanceType[]): k8s.V1Pod {
  const type = catalog.find((t) => t.name === pod.instanceType);
  if (!type) throw new Error(`no instance type ${pod.instanceType} in the catalog`);
  return {
    metadata: { name: pod.name, labels: { app: 'needs-a-node' } },
    spec: {
      nodeSelector: {
        'node.kubernetes.io/instance-type': pod.instanceType,
        ...(pod.capacityType ? { 'karpenter.sh/capacity-type': pod.capacityType } : {}),
        ...(pod.nodePool ? { 'karpenter.sh/nodepool': pod.nodePool } : {}),
        ...(pod.zone ? { 'topology.kubernetes.io/zone': pod.zone } : {}),
      },
      containers: [{ name: 'app', image: 'registry.k8s.io/pause:3.10', resources: { requests: { cpu: cpuRequestFor(type), memory: '64Mi' } } }],
    },
  };
}

/** Creates the pods at once (as a Deployment scaling up would), in `namespace`. */
export async function createPendingPods(admin: k8s.KubeConfig, pods: PendingPod[], catalog: KwokInstanceType[], namespace = 'default'): Promise<void> {
  const core = admin.makeApiClient(k8s.CoreV1Api);
  await Promise.all(pods.map((p) => core.createNamespacedPod({ namespace, body: podObject(p, catalog) })));
}

// ---------------------------------------------------------------------------------------------
// The whole cluster: control plane, Karpenter's CRDs, the watcher's identity and certificates,
// Karpenter and kube-scheduler; startKarpenterWithWatcher adds the watcher on KWOK's keys with both webhooks.

export interface KarpenterEnv extends ClusterEnv {
  karpenter: Karpenter;
}

export async function startKarpenterEnv(opts: WatcherEnvOptions & { karpenter?: KarpenterOptions } = {}): Promise<KarpenterEnv> {
  const env = await startClusterEnv({ ...opts, installCRDs: installKwokCRDs });
  try {
    return { ...env, karpenter: await Karpenter.start(env.cp, opts.karpenter) };
  } catch (err) {
    await env.cp.stop();
    throw err;
  }
}

/** A Karpenter env with the watcher running on KWOK's keys and both webhooks registered; `stop` ends both. */
export async function startKarpenterWithWatcher(opts: WatcherEnvOptions & { karpenter?: KarpenterOptions } = {}): Promise<KarpenterEnv & { watcher: RunningWatcher; stop: () => Promise<void> }> {
  const env = await startKarpenterEnv(opts);
  try {
    const { watcher } = await launchWatcher(env.cp, env.certs, WATCHER_USER, KWOK_WATCHER_FLAGS);
    const stop = async () => {
      await watcher.stop();
      await env.cp.stop();
    };
    await registerWebhooksAt(env.admin, env.certs.caPem, watcher.webhookPort!, 5).catch(async (err) => {
      await stop();
      throw err;
    });
    return { ...env, watcher, stop };
  } catch (err) {
    await env.cp.stop();
    throw err;
  }
}

/** The instance types a burst cycles through: with m5.xlarge fifth, the first spot node (every fifth) is an m5.xlarge. */
export const BURST_TYPES = ['m5.large', 'c6i.large', 'c6i.xlarge', 'r6g.2xlarge', 'm5.xlarge', 't3.large'];

/** `count` pods in `pool`, a node each: BURST_TYPES in turn, every fifth spot. */
export function burstPods(pool: string, count: number): PendingPod[] {
  return Array.from({ length: count }, (_, i) => ({
    name: `${pool}-${i}`,
    nodePool: pool,
    instanceType: BURST_TYPES[i % BURST_TYPES.length]!,
    capacityType: (i % 5 === 4 ? 'spot' : 'on-demand') as CapacityType,
  }));
}

// What a real Karpenter controller beside a ControlPlane needs whatever its cloud provider (KWOK in
// kit/karpenter.ts, AWS in kit/aws/karpenter.ts): kube-scheduler, which marks pending pods
// Unschedulable (what Karpenter provisions for); the controller under its own identity, dead with the
// test (kit/process.ts) and stopped with the control plane; and the NodeClaims and nodes it makes.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import * as k8s from '@kubernetes/client-node';
import { binary, type ControlPlane, freePort } from './control-plane.ts';
import { ManagedProcess, sleep } from './process.ts';

export const KARPENTER_USER = 'karpenter';
/** The bootstrap RBAC of every cluster binds the scheduler's roles to this user. */
export const SCHEDULER_USER = 'system:kube-scheduler';
export const NODEPOOL_API = { group: 'karpenter.sh', version: 'v1', plural: 'nodepools' };
export const NODECLAIM_API = { group: 'karpenter.sh', version: 'v1', plural: 'nodeclaims' };
/** Karpenter's own annotation on NodeClaims and nodes launched from a type that had any price overlay. */
export const PRICE_OVERLAY_APPLIED = 'karpenter.sh/price-overlay-applied';

export type CapacityType = 'on-demand' | 'spot';

export interface NodeSelectorRequirement {
  key: string;
  operator: string;
  values?: string[];
}

export const inReq = (key: string, ...values: string[]): NodeSelectorRequirement => ({ key, operator: 'In', values });

export interface NodeClaim {
  metadata: {
    name: string;
    creationTimestamp?: string;
    labels?: Record<string, string>;
    annotations?: Record<string, string>;
  };
  spec?: { nodeClassRef?: { group: string; kind: string; name: string }; requirements?: NodeSelectorRequirement[] };
  status?: { providerID?: string; nodeName?: string; conditions?: { type: string; status: string; reason?: string }[] };
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
export async function certKubeconfig(cp: ControlPlane, user: string, groups: string[], file: string): Promise<string> {
  const cert = await cp.clientCertificate(user, groups);
  const kc = new k8s.KubeConfig();
  kc.loadFromOptions({
    clusters: [
      { name: 'test', server: cp.server, caData: Buffer.from(cp.caPem).toString('base64'), skipTLSVerify: false },
    ],
    users: [{ name: user, certFile: cert.certPath, keyFile: cert.keyPath }],
    contexts: [{ name: 'test', cluster: 'test', user }],
    currentContext: 'test',
  });
  return cp.writeKubeConfig(kc, file);
}

export interface ControllerLaunch {
  /** The process name, also its log's (`<name>.log` in the control plane's directory). */
  name: string;
  bin: string;
  /** The provider's own settings; the kit adds the kubeconfig, ports, leader election and the NodeOverlay gate. */
  env: NodeJS.ProcessEnv;
  startTimeoutMs?: number;
}

export interface ControllerProcesses {
  controller: ManagedProcess;
  scheduler: ManagedProcess;
  /** Karpenter's /metrics: what its consolidation passes decided, for a test to wait on rather than sleep. */
  metricsPort: number;
}

/** Starts kube-scheduler and the controller (the CRDs, node classes and NodePools must exist); resolves once the controller's /readyz answers. */
export async function launchController(cp: ControlPlane, opts: ControllerLaunch): Promise<ControllerProcesses> {
  const scheduler = new ManagedProcess(
    'kube-scheduler',
    binary('kubeScheduler'),
    [
      `--kubeconfig=${await certKubeconfig(cp, SCHEDULER_USER, [], 'kubeconfig-scheduler')}`,
      '--leader-elect=false',
      '--secure-port=0',
    ],
    join(cp.dir, 'kube-scheduler.log'),
  );
  const [metricsPort, healthPort] = [await freePort(), await freePort()];
  // Karpenter's own identity in system:masters: its chart's RBAC is not in the module, and the
  // audit log still tells its requests from the test's.
  const controller = new ManagedProcess(opts.name, opts.bin, [], join(cp.dir, `${opts.name}.log`), {
    ...process.env,
    KUBECONFIG: await certKubeconfig(cp, KARPENTER_USER, ['system:masters'], 'kubeconfig-karpenter'),
    DISABLE_LEADER_ELECTION: 'true',
    // Both bind every interface (no option narrows them); nothing needs to reach them but the probe.
    METRICS_PORT: String(metricsPort),
    HEALTH_PROBE_PORT: String(healthPort),
    FEATURE_GATES: 'NodeOverlay=true',
    ...opts.env,
  });
  scheduler.start();
  controller.start();
  const deadline = Date.now() + (opts.startTimeoutMs ?? 60_000);
  for (;;) {
    for (const p of [scheduler, controller])
      if (!p.running) throw new Error(`${p.name} exited during start-up:\n${p.logTail()}`);
    const ready = await fetch(`http://127.0.0.1:${healthPort}/readyz`).then(
      (r) => r.ok,
      () => false,
    );
    if (ready) break;
    if (Date.now() > deadline) throw new Error(`${opts.name} was not ready in time:\n${controller.logTail()}`);
    await sleep(200);
  }
  return { controller, scheduler, metricsPort };
}

/** A running Karpenter controller and kube-scheduler, and what they made. */
export class KarpenterController {
  readonly cp: ControlPlane;
  readonly controller: ManagedProcess;
  readonly scheduler: ManagedProcess;
  readonly metricsPort: number;
  protected readonly custom: k8s.CustomObjectsApi;

  /** Takes the processes launchController started, and stops them with the control plane. */
  protected constructor(cp: ControlPlane, processes: ControllerProcesses) {
    this.cp = cp;
    this.controller = processes.controller;
    this.scheduler = processes.scheduler;
    this.metricsPort = processes.metricsPort;
    this.custom = cp.adminKubeConfig().makeApiClient(k8s.CustomObjectsApi);
    cp.onStop(() => this.stop());
  }

  usage(): { karpenter: ProcessUsage | undefined; scheduler: ProcessUsage | undefined } {
    return { karpenter: usageOf(this.controller.pid), scheduler: usageOf(this.scheduler.pid) };
  }

  /** Karpenter stops first: it would otherwise act on a half-stopped cluster. */
  async stop(): Promise<void> {
    await this.controller.stop(3000);
    await this.scheduler.stop(3000);
  }

  /** The sum of Karpenter's samples of `name` whose labels include every one of `labels` (0 before the first). */
  async metric(name: string, labels: Record<string, string> = {}): Promise<number> {
    const text = await (await fetch(`http://127.0.0.1:${this.metricsPort}/metrics`)).text();
    let sum = 0;
    for (const m of text.matchAll(/^(\w+)(?:\{([^}]*)\})? (\S+)$/gm)) {
      if (m[1] !== name) continue;
      const has = Object.fromEntries([...(m[2] ?? '').matchAll(/(\w+)="([^"]*)"/g)].map((l) => [l[1], l[2]]));
      if (Object.entries(labels).every(([k, v]) => has[k] === v)) sum += Number(m[3]);
    }
    return sum;
  }

  async nodeClaims(): Promise<NodeClaim[]> {
    return ((await this.custom.listClusterCustomObject(NODECLAIM_API)) as { items: NodeClaim[] }).items;
  }

  /** Waits until `count` NodeClaims (of `pool`, if given) exist; returns them. */
  async waitForNodeClaims(count: number, pool?: string, timeoutMs = 60_000): Promise<NodeClaim[]> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const claims = (await this.nodeClaims()).filter(
        (c) => pool === undefined || c.metadata.labels?.['karpenter.sh/nodepool'] === pool,
      );
      if (claims.length >= count) return claims;
      if (Date.now() > deadline) throw new Error(`${claims.length} of ${count} NodeClaims after ${timeoutMs} ms`);
      await sleep(200);
    }
  }

  /** Waits until `count` Karpenter nodes (of `pool`, if given; registered by Karpenter, if asked) exist; returns them. */
  async waitForNodes(
    count: number,
    opts: { pool?: string; registered?: boolean; timeoutMs?: number } = {},
  ): Promise<k8s.V1Node[]> {
    const core = this.cp.adminKubeConfig().makeApiClient(k8s.CoreV1Api);
    const deadline = Date.now() + (opts.timeoutMs ?? 60_000);
    for (;;) {
      const nodes = (await core.listNode()).items.filter((n) => {
        const labels = n.metadata?.labels ?? {};
        return (
          labels['karpenter.sh/nodepool'] !== undefined &&
          (opts.pool === undefined || labels['karpenter.sh/nodepool'] === opts.pool) &&
          (!opts.registered || labels['karpenter.sh/registered'] === 'true')
        );
      });
      if (nodes.length >= count) return nodes;
      if (Date.now() > deadline)
        throw new Error(`${nodes.length} of ${count} nodes after ${opts.timeoutMs ?? 60_000} ms`);
      await sleep(200);
    }
  }
}

// ---------------------------------------------------------------------------------------------
// Pods that need a node each.

export interface PendingPod {
  name: string;
  /** Pins `node.kubernetes.io/instance-type` (unpinned, the provider chooses among every type that fits). */
  instanceType?: string;
  capacityType?: CapacityType;
  nodePool?: string;
  /** Pins `topology.kubernetes.io/zone`. */
  zone?: string;
  /** The CPU request (default: one that no two of fit one node of the pinned type; see cpuRequestFor). */
  cpu?: string;
  /** More node labels the pod asks for (an instance family, a generation). */
  nodeSelector?: Record<string, string>;
}

/** A CPU request no two of which fit one node of `vcpus` CPUs (allocatable is capacity less 100m). */
export function cpuRequestFor(vcpus: number): string {
  return `${(vcpus * 1000) / 2 + 100}m`;
}

/** The pod; `vcpusOf` gives the CPUs of the pinned instance type, for the default CPU request. */
export function podObject(pod: PendingPod, vcpusOf: (type: string) => number): k8s.V1Pod {
  const cpu = pod.cpu ?? (pod.instanceType ? cpuRequestFor(vcpusOf(pod.instanceType)) : undefined);
  if (cpu === undefined) throw new Error(`pod ${pod.name}: an unpinned pod needs a CPU request`);
  return {
    metadata: { name: pod.name, labels: { app: 'needs-a-node' } },
    spec: {
      nodeSelector: {
        ...(pod.instanceType ? { 'node.kubernetes.io/instance-type': pod.instanceType } : {}),
        ...(pod.capacityType ? { 'karpenter.sh/capacity-type': pod.capacityType } : {}),
        ...(pod.nodePool ? { 'karpenter.sh/nodepool': pod.nodePool } : {}),
        ...(pod.zone ? { 'topology.kubernetes.io/zone': pod.zone } : {}),
        ...pod.nodeSelector,
      },
      containers: [
        { name: 'app', image: 'registry.k8s.io/pause:3.10', resources: { requests: { cpu, memory: '64Mi' } } },
      ],
    },
  };
}

/** Creates the pods at once (as a Deployment scaling up would), in `namespace`. */
export async function createPods(
  admin: k8s.KubeConfig,
  pods: PendingPod[],
  vcpusOf: (type: string) => number,
  namespace = 'default',
): Promise<void> {
  const core = admin.makeApiClient(k8s.CoreV1Api);
  await Promise.all(pods.map((p) => core.createNamespacedPod({ namespace, body: podObject(p, vcpusOf) })));
}

/** The instance types a burst cycles through: with m5.xlarge fifth, the first spot node (every fifth) is an m5.xlarge. */
export const BURST_TYPES = ['m5.large', 'c6i.large', 'c6i.xlarge', 'r6g.2xlarge', 'm5.xlarge', 't3.large'];

/** `count` pods in `pool`, a node each: BURST_TYPES in turn, every fifth spot. */
export function burstPods(pool: string, count: number, types: readonly string[] = BURST_TYPES): PendingPod[] {
  return Array.from({ length: count }, (_, i) => ({
    name: `${pool}-${i}`,
    nodePool: pool,
    instanceType: types[i % types.length]!,
    capacityType: (i % 5 === 4 ? 'spot' : 'on-demand') as CapacityType,
  }));
}

// A fleet of Karpenter launches against a real apiserver and the checks every fault test makes
// afterwards: every node recorded, each record the one Karpenter's own precedence gives, and
// (from the audit log) never more than one record written per node.
import { type ChildProcess, spawn } from 'node:child_process';
import { join } from 'node:path';
import * as k8s from '@kubernetes/client-node';
import { computeSavingsPlan, ec2InstanceSavingsPlan, reservedInstance } from './veneer.ts';
import { KarpenterSim } from './karpenter-sim.ts';
import type { ControlPlane } from './control-plane.ts';
import { watcherFlags, type WebhookCerts } from './watcher-env.ts';
import { RUNTIME_NODE_FLAGS } from './node-flags.ts';

export const TYPES = ['m5.xlarge', 'm5.large', 'c6i.large', 'r6g.2xlarge'] as const;

/** The overlay Karpenter would apply to each type, given the three overlays of `createOverlays`. */
export const EXPECTED: Record<string, string> = {
  'm5.xlarge': 'cost-aware-ri-m5.xlarge-us-west-2',
  'm5.large': 'cost-aware-ec2-sp-m5-us-west-2',
  'c6i.large': 'cost-aware-compute-sp-global',
  'r6g.2xlarge': 'cost-aware-compute-sp-global',
};

export const OVERLAY_API = { group: 'karpenter.sh', version: 'v1alpha1', plural: 'nodeoverlays' };

export const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

export async function until(what: string, cond: () => Promise<boolean> | boolean, ms = 60_000): Promise<void> {
  const deadline = Date.now() + ms;
  while (!(await cond())) {
    if (Date.now() > deadline) throw new Error(`timed out after ${ms} ms waiting for ${what}`);
    await sleep(100);
  }
}

export const typeOf = (name: string) => TYPES[Number(name.split('-').at(-1)) % TYPES.length]!;

export class Fleet {
  readonly sim: KarpenterSim;
  readonly core: k8s.CoreV1Api;
  private readonly cp: ControlPlane;

  constructor(cp: ControlPlane, admin: k8s.KubeConfig) {
    this.cp = cp;
    this.sim = new KarpenterSim(admin);
    this.core = admin.makeApiClient(k8s.CoreV1Api);
  }

  async createOverlays(): Promise<void> {
    const custom = this.sim.custom;
    for (const o of [
      computeSavingsPlan(),
      ec2InstanceSavingsPlan('m5', 'us-west-2'),
      reservedInstance('m5.xlarge', 'us-west-2'),
    ]) {
      await custom.createClusterCustomObject({ ...OVERLAY_API, body: o });
    }
  }

  shape(prefix: string, i: number) {
    return { name: `${prefix}-${i}`, claimName: `${prefix}-claim-${i}`, instanceType: TYPES[i % TYPES.length] };
  }

  /** Every launch at once, as Karpenter does when a large batch of pods arrives. */
  async burst(prefix: string, count: number, from = 0): Promise<void> {
    await Promise.all(Array.from({ length: count }, (_, i) => this.sim.launch(this.shape(prefix, from + i))));
  }

  /** The same, each step retried as Karpenter and the kubelet retry, for faults that fail requests. */
  async persistentBurst(prefix: string, count: number, from = 0): Promise<void> {
    await Promise.all(
      Array.from({ length: count }, (_, i) => this.sim.launchPersistently(this.shape(prefix, from + i))),
    );
  }

  /** Launches nodes `concurrency` at a time until `stop()` is called; returns how many. */
  steady(prefix: string, concurrency = 4): { stop(): Promise<number> } {
    let running = true;
    let next = 0;
    const workers = Array.from({ length: concurrency }, async () => {
      while (running) await this.sim.launchPersistently(this.shape(prefix, next++));
    });
    return {
      stop: async () => {
        running = false;
        await Promise.all(workers);
        return next;
      },
    };
  }

  async labels(prefix: string): Promise<Map<string, Record<string, string>>> {
    const out = new Map<string, Record<string, string>>();
    for (const n of (await this.core.listNode()).items) {
      const name = n.metadata?.name ?? '';
      if (name.startsWith(`${prefix}-`)) out.set(name, n.metadata?.labels ?? {});
    }
    return out;
  }

  /** Who wrote each node's record, from its decision annotation. */
  async decidedBy(prefix: string): Promise<Map<string, string>> {
    const out = new Map<string, string>();
    for (const n of (await this.core.listNode()).items) {
      const name = n.metadata?.name ?? '';
      const story = n.metadata?.annotations?.['veneer.io/overlay-decision'];
      if (name.startsWith(`${prefix}-`))
        out.set(name, story ? (JSON.parse(story) as { decidedBy: string }).decidedBy : 'none');
    }
    return out;
  }

  async allRecorded(prefix: string, count: number): Promise<boolean> {
    const r = await this.labels(prefix);
    return r.size === count && [...r.values()].every((l) => l['veneer.io/overlay-influenced'] !== undefined);
  }

  /** Names of nodes whose record is missing or not the overlay Karpenter would have applied. */
  async wrongRecords(prefix: string): Promise<string[]> {
    const wrong: string[] = [];
    for (const [name, labels] of await this.labels(prefix)) {
      if (
        labels['veneer.io/overlay-influenced'] !== 'true' ||
        labels['veneer.io/matching-overlay'] !== EXPECTED[typeOf(name)]
      ) {
        wrong.push(`${name}: ${labels['veneer.io/matching-overlay'] ?? 'no record'}`);
      }
    }
    return wrong;
  }

  /**
   * Node PATCHes by the watcher identities, per node, from the audit log: those that succeeded, or
   * with `orUnknown` also those whose outcome the client never learnt (5xx, as the 504 of a write
   * whose client was killed mid-request: the apiserver may still have applied it).
   */
  watcherWrites(prefix: string, users: string[], orUnknown = false): Map<string, { user: string; at: number }[]> {
    const out = new Map<string, { user: string; at: number }[]>();
    for (const e of this.cp.auditEvents()) {
      const code = e.responseStatus?.code ?? 0;
      if (
        e.stage !== 'ResponseComplete' ||
        e.verb !== 'patch' ||
        e.objectRef?.resource !== 'nodes' ||
        (code !== 200 && !(orUnknown && code >= 500))
      )
        continue;
      if (!users.includes(e.user.username) || !e.objectRef.name?.startsWith(`${prefix}-`)) continue;
      out.set(e.objectRef.name, [
        ...(out.get(e.objectRef.name) ?? []),
        { user: e.user.username, at: Date.parse(e.stageTimestamp ?? '') },
      ]);
    }
    return out;
  }
}

export interface ServeProcess {
  child: ChildProcess;
  webhookPort: number;
  metricsPort: number;
  healthPort: number;
  output(): string;
  exited: Promise<number | null>;
}

/** The CLI as tests run it, from source. */
export const SOURCE_CLI = join(import.meta.dirname, '..', 'src', 'cli.ts');
/**
 * The CLI as the image runs it (`npm run build` first). What the benchmarks measure: from source,
 * Node's TypeScript stripping stays loaded and adds about 26 MB to the process's RSS.
 */
export const COMPILED_CLI = join(import.meta.dirname, '..', 'dist', 'cli.js');

/**
 * `veneer-node-watcher serve` as its own process, so that it can be killed like a pod; `nodeFlags`
 * go to Node; `env` is the pod's environment (default: this process's).
 */
export async function spawnServe(
  cp: ControlPlane,
  certs: WebhookCerts,
  user: string,
  flags: Record<string, string> = {},
  nodeFlags: string[] = [],
  cli = SOURCE_CLI,
  env: NodeJS.ProcessEnv = process.env,
): Promise<ServeProcess> {
  const all = await watcherFlags(certs, flags);
  const kubeconfig = cp.writeKubeConfig(cp.userKubeConfig(user), `kubeconfig-${user}`);
  // setpriv (it execs node, so the pid is the watcher's): the kernel ends the watcher when the
  // test process dies, however it dies; a test that crashed before its teardown left one running.
  const child = spawn(
    'setpriv',
    [
      '--pdeathsig',
      'KILL',
      '--',
      process.execPath,
      ...RUNTIME_NODE_FLAGS,
      ...nodeFlags,
      cli,
      'serve',
      ...Object.entries(all).flat(),
    ],
    {
      env: { ...env, KUBECONFIG: kubeconfig, POD_NAME: user },
      stdio: ['ignore', 'pipe', 'pipe'],
    },
  );
  let out = '';
  child.stdout?.on('data', (c) => (out += c));
  child.stderr?.on('data', (c) => (out += c));
  const exited = new Promise<number | null>((r) => child.once('exit', (code) => r(code)));
  return {
    child,
    webhookPort: Number(all['--webhook-port']),
    metricsPort: Number(all['--metrics-port']),
    healthPort: Number(all['--health-port']),
    output: () => out,
    exited,
  };
}

/** The sum of a metric's samples whose labels include `labels`, from a text exposition. */
export function counter(text: string, name: string, labels: Record<string, string>): number {
  const want = Object.entries(labels);
  let total = 0;
  for (const line of text.split('\n')) {
    if (!line.startsWith(`${name}{`) && !line.startsWith(`${name} `)) continue;
    if (want.every(([k, v]) => line.includes(`${k}="${v}"`))) total += Number(line.split(' ').at(-1));
  }
  return total;
}

export async function metricsOf(port: number): Promise<string> {
  return fetch(`http://127.0.0.1:${port}/metrics`).then(
    (r) => r.text(),
    () => '',
  );
}

/** Waits for a probe on the health port to answer 200. */
export async function waitReady(port: number, path = '/readyz', ms = 30_000): Promise<void> {
  await until(
    `${path} on ${port}`,
    () =>
      fetch(`http://127.0.0.1:${port}${path}`).then(
        (r) => r.status === 200,
        () => false,
      ),
    ms,
  );
}

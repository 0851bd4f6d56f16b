// Suites that need a real cluster: the watcher runs as its own process (so its memory is its
// own) under its least-privilege identity, with the apiserver's audit log counting its calls.
import { type ChildProcess, spawn } from 'node:child_process';
import { once } from 'node:events';
import { readFileSync } from 'node:fs';
import * as k8s from '@kubernetes/client-node';
import { veneerOverlaySet } from './decision.ts';
import { median, quantile, type SuiteResult } from './stats.ts';
import { RUNTIME_NODE_FLAGS } from '../kit/node-flags.ts';
import { COMPILED_CLI } from '../kit/fleet.ts';
import { karpenterNode } from '../kit/veneer.ts';
import {
  type ClusterEnv,
  startClusterEnv,
  WATCHER_AUDIT_POLICY,
  WATCHER_USER,
  watcherFlags,
} from '../kit/watcher-env.ts';

type Progress = (msg: string) => void;
export const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

function rssMb(pid: number): number {
  const m = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
  return Math.round((Number(m?.[1] ?? 0) / 1024) * 10) / 10;
}

async function pool<T>(items: T[], concurrency: number, fn: (item: T) => Promise<void>): Promise<void> {
  let next = 0;
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (next < items.length) await fn(items[next++]!);
    }),
  );
}

export async function scrape(port: number, name: string): Promise<number> {
  const text = await fetch(`http://127.0.0.1:${port}/metrics`).then((r) => r.text());
  return text
    .split('\n')
    .filter((l) => l.startsWith(name))
    .reduce((a, l) => a + Number(l.split(' ').at(-1)), 0);
}

const finite = (xs: number[]) => xs.filter((x) => !Number.isNaN(x));
export const p99 = (xs: number[]) => Math.round(quantile(finite(xs), 0.99));
export const p50 = (xs: number[]) => Math.round(quantile(finite(xs), 0.5));

export interface Burst {
  lat: number[];
  missing: number;
  createSeconds: number;
}

/**
 * A cluster with 1,000 Veneer-like overlays, the watcher as its own process (restartable with
 * other flags), and bursts of node creations timed from the create call to the record.
 */
export async function clusterHarness(env: ClusterEnv, progress: Progress) {
  const admin = env.admin;
  const core = admin.makeApiClient(k8s.CoreV1Api);
  const custom = admin.makeApiClient(k8s.CustomObjectsApi);
  progress('cluster: 1,000 Veneer-like overlays');
  const { overlays, types } = veneerOverlaySet(1000);
  await pool(
    overlays,
    20,
    async (o) =>
      void (await custom.createClusterCustomObject({
        group: 'karpenter.sh',
        version: 'v1alpha1',
        plural: 'nodeoverlays',
        body: o,
      })),
  );

  const flags = await watcherFlags(env.certs, {
    '--leader-election-enabled': 'false',
    '--max-concurrent-reconciles': '10',
    '--log-level': 'warn',
  });
  const kubeconfig = env.cp.writeKubeConfig(env.cp.userKubeConfig(WATCHER_USER), 'bench-watcher');
  let child: ChildProcess | undefined;
  const startWatcher = async (extra: Record<string, string>) => {
    if (child) {
      child.kill('SIGTERM');
      await once(child, 'exit');
    }
    child = spawn(
      process.execPath,
      [...RUNTIME_NODE_FLAGS, COMPILED_CLI, 'serve', ...Object.entries({ ...flags, ...extra }).flat()],
      {
        env: { ...process.env, KUBECONFIG: kubeconfig, NODE_OPTIONS: process.env.VENEER_BENCH_NODE_OPTIONS ?? '' },
        stdio: 'ignore',
      },
    );
    for (let i = 0; i < 600; i++) {
      if (
        await fetch(`http://127.0.0.1:${flags['--health-port']}/readyz`).then(
          (r) => r.ok,
          () => false,
        )
      )
        break;
      await sleep(100);
    }
    return child;
  };

  // The bench watches nodes itself: creation is when the create call returned, the record
  // when the watch first shows it.
  const created = new Map<string, number>();
  const recorded = new Map<string, number>();
  // A watch ends now and then (a run once lost 1,491 records to one that ended silently): it is
  // resumed from the last resourceVersion seen, so no event is missed or replayed.
  let lastRV: string | undefined;
  let watching = true;
  let watch: AbortController | undefined;
  const follow = async (): Promise<void> => {
    watch = await new k8s.Watch(admin).watch(
      '/api/v1/nodes',
      lastRV ? { resourceVersion: lastRV } : {},
      (_type, obj: k8s.V1Node) => {
        lastRV = obj.metadata?.resourceVersion ?? lastRV;
        const name = obj.metadata?.name ?? '';
        if (obj.metadata?.labels?.['veneer.io/overlay-influenced'] !== undefined && !recorded.has(name))
          recorded.set(name, Date.now());
      },
      () => {
        if (watching) void follow().catch(() => setTimeout(() => void follow(), 500));
      },
    );
  };
  await follow();
  const burst = async (prefix: string, n: number): Promise<Burst> => {
    const names = Array.from({ length: n }, (_, i) => `${prefix}-${i}`);
    const start = Date.now();
    await pool(names, 50, async (name) => {
      const i = Number(name.split('-').at(-1));
      await core.createNode({
        body: karpenterNode({ name, instanceType: types[i % types.length] ?? 'm5.large' }) as k8s.V1Node,
      });
      created.set(name, Date.now());
    });
    while (names.some((nm) => !recorded.has(nm)) && Date.now() - start < 300_000) await sleep(50);
    const lat = names.map((nm) => (recorded.get(nm) ?? Number.NaN) - (created.get(nm) ?? Number.NaN));
    return {
      lat,
      missing: names.filter((nm) => !recorded.has(nm)).length,
      createSeconds: (Math.max(...created.values()) - start) / 1000,
    };
  };
  const metricsPort = Number(flags['--metrics-port']);
  const settle = async () => {
    while ((await scrape(metricsPort, 'veneer_nodewatcher_nodes_pending')) > 0) await sleep(500);
    await sleep(2000);
  };
  const fill = async (prefix: string, n: number) => {
    await pool(
      Array.from({ length: n }, (_, i) => `${prefix}-${i}`),
      50,
      async (name) =>
        void (await core.createNode({ body: karpenterNode({ name, instanceType: 'm5.large' }) as k8s.V1Node })),
    );
    await settle();
  };
  return {
    startWatcher,
    burst,
    fill,
    metricsPort,
    pid: () => child?.pid ?? 0,
    stop: () => {
      watching = false;
      watch?.abort();
      child?.kill('SIGTERM');
    },
  };
}

/**
 * reconciler, api-calls and memory: webhook not registered, so every record is the reconciler's.
 * A warm-up burst, three bursts of 100 and two of 1,000 (median and spread of their p99s); the
 * API calls over the two 1,000-node bursts; RSS at 1,000 and 5,000 nodes. Node Events are off
 * here, as in every earlier run; what they add is measured apart, on a cluster of its own
 * (events.ts), in the same suite.
 */
export async function runClusterSuite(progress: Progress): Promise<SuiteResult> {
  const env = await startClusterEnv({ auditPolicy: WATCHER_AUDIT_POLICY });
  let h: Awaited<ReturnType<typeof clusterHarness>> | undefined;
  try {
    h = await clusterHarness(env, progress);
    const { burst, fill } = h;
    await h.startWatcher({ '--events-enabled': 'false' });
    progress('cluster: warm-up burst of 50 nodes');
    await burst('warm', 50);
    const b100: Burst[] = [];
    for (let r = 0; r < 3; r++) {
      progress(`cluster: 100 nodes at once (${r + 1} of 3)`);
      b100.push(await burst(`b100r${r}`, 100));
    }
    progress('cluster: up to 1,000 nodes for the first memory figure');
    await fill('fill', 1000 - 50 - 300);
    const rss1000 = rssMb(h.pid());
    const auditBefore = env.cp.auditEvents().length;
    const b1000: Burst[] = [];
    for (let r = 0; r < 2; r++) {
      progress(`cluster: 1,000 nodes at once (${r + 1} of 2)`);
      b1000.push(await burst(`b1000r${r}`, 1000));
    }
    const calls = env.cp
      .auditEvents()
      .slice(auditBefore)
      .filter((e) => e.user.username === WATCHER_USER && e.stage === 'ResponseComplete');
    const writes = calls.filter(
      (e) => ['patch', 'update', 'create'].includes(e.verb) && e.objectRef?.resource === 'nodes',
    ).length;
    const reads = calls.filter((e) => e.verb === 'get' || e.verb === 'list').length;
    progress('cluster: up to 5,000 nodes for the second memory figure');
    await fill('mem', 5000 - 3000);
    const rss5000 = rssMb(h.pid());

    const row = (size: number, reps: Burst[]) => {
      const p99s = reps.map((r) => p99(r.lat));
      return {
        burst: size,
        repetitions: reps.length,
        p50_ms: median(reps.map((r) => p50(r.lat))),
        p99_ms: median(p99s),
        p99_spread_ms: `${Math.min(...p99s)}-${Math.max(...p99s)}`,
        missing: reps.reduce((a, r) => a + r.missing, 0),
        create_s: median(reps.map((r) => r.createSeconds)),
      };
    };
    const per = (x: number) => Math.round((x / 2000) * 1000) / 1000;
    return {
      keys: {
        reconcile_p99_ms_100: median(b100.map((r) => p99(r.lat))),
        reconcile_p99_ms_1000: median(b1000.map((r) => p99(r.lat))),
        writes_per_node: per(writes),
        reads_per_node: per(reads),
        rss_mb_5000_nodes: rss5000,
        rss_growth_per_1000_nodes_mb: Math.round(((rss5000 - rss1000) / 4) * 10) / 10,
      },
      targets: {
        reconcile_p99_ms_100: '<= 500',
        reconcile_p99_ms_1000: '<= 2000',
        writes_per_node: '<= 1.0',
        reads_per_node: '0',
        rss_mb_5000_nodes: '<= 150',
        rss_growth_per_1000_nodes_mb: '<= 10',
      },
      table: [row(100, b100), row(1000, b1000)],
      raw: {
        latency_ms_100: b100.flatMap((r) => r.lat),
        latency_ms_1000: b1000.flatMap((r) => r.lat),
        watcher_writes_2000: writes,
        watcher_reads_2000: reads,
        rss_mb_1000_nodes: rss1000,
        rss_mb_5000_nodes: rss5000,
      },
    };
  } finally {
    h?.stop();
    await env.cp.stop();
  }
}

// `scale-100k` (`npm run bench -- scale-100k`; not in a plain `npm run bench`, nor in `npm test`):
// the watcher at EKS's largest scale. One real etcd (its quota raised) and kube-apiserver grow a
// cluster of real-size nodes (about 20 KB as served, four in five on-demand with a record, one in
// five spot) and their NodeClaims (about 5 KB) through the sizes of VENEER_SCALE_SIZES. A watcher
// started before the first node follows them all by watch; at each size a second one is started
// after the nodes exist, so that its first list is what is measured, then kubelet-like status
// churn runs at 300 patches a second. Beside the watchers, on the same events: a bare list+watch
// client (bench/bare-client.ts: whole nodes, parsed and dropped) started at the same moments,
// whose memory the watcher's is held to, and a do-nothing metadata watch (bench/watch-floor.ts),
// whose CPU per update is the floor. Where the machine cannot hold the largest size, the sizes
// it held give the slope per node and the projection. Then `report` runs live over the cluster.
import { spawn } from 'node:child_process';
import { join } from 'node:path';
import { freemem, totalmem } from 'node:os';
import { COMPILED_CLI, counter, metricsOf, sleep, spawnServe, until, waitReady } from '../kit/fleet.ts';
import { clientFor } from '../kit/control-plane.ts';
import { RUNTIME_NODE_FLAGS } from '../kit/node-flags.ts';
import { recordKeys, undecidedSelector } from '../src/engine/index.ts';
import { PARTIAL_METADATA_LIST } from '../src/kube/watch-stream.ts';
import { heartbeatPatch } from '../kit/real-node.ts';
import { startClusterEnv, WATCHER_USER } from '../kit/watcher-env.ts';
import { nodeAndClaim, OVERLAYS } from './scale-100k-cluster.ts';
import { proc, startReference, workers } from './scale.ts';
import type { SuiteResult } from './stats.ts';

type Progress = (msg: string) => void;
const SIZES = (process.env.VENEER_SCALE_SIZES ?? '20000,40000,60000,80000,100000').split(',').map(Number);
const CHURN_MS = Number(process.env.VENEER_SCALE_CHURN_MS ?? 60_000);
const CHURN_PER_S = 300;
const ROOT = join(import.meta.dirname, '..');
const round = (x: number, digits = 1) => Math.round(x * 10 ** digits) / 10 ** digits;
/** What the machine must keep free when the next size is reached: a size it cannot hold is projected instead. */
const MIN_FREE_GB = Number(process.env.VENEER_SCALE_MIN_FREE_GB ?? 2.5);
const GB = 2 ** 30;
/**
 * kube-apiserver's Go heap, held to this: with the default GOGC it grows to twice what is live
 * (4.4 GB at 18,000 nodes and their NodeClaims), which would end the run at half the nodes this
 * machine can hold. The watcher's figures do not depend on it.
 */
const APISERVER_MEMORY_LIMIT_GB = Math.floor(totalmem() / GB - 9);

interface Sample {
  size: number;
  createSeconds: number;
  before: { watcherMb: number; bareMb: number };
  after: { watcherMb: number; bareMb: number; watcherReadyS: number; bareListS: number };
  churn: {
    updatesPerS: number;
    watcherUsPerUpdate: number;
    floorUsPerUpdate: number;
    bareUsPerUpdate: number;
    watcherMb: number;
    bareMb: number;
    watcherCuts: number;
    watcherRestarts: number;
    floorCuts: number;
    bareCuts: number;
  };
  apiserverMb: number;
  etcdMb: number;
}

export async function runScale100kSuite(progress: Progress): Promise<SuiteResult> {
  // A cluster of 100,000 such nodes is about 2.6 GB in etcd: its 2 GiB default quota would refuse it.
  const env = await startClusterEnv({
    extraEtcdArgs: ['--quota-backend-bytes=17179869184'],
    apiServerEnv: { GOMEMLIMIT: `${APISERVER_MEMORY_LIMIT_GB}GiB` },
  });
  const pids = env.cp.pids();
  const admin = clientFor(env.admin);
  const samples: Sample[] = [];
  const running: { kill(): void }[] = [];
  try {
    const kubeconfig = env.cp.writeKubeConfig(env.cp.userKubeConfig(WATCHER_USER), 'kubeconfig-references');
    await workers(4, async (w) => {
      for (let i = w; i < OVERLAYS.length; i += 4)
        await admin.call('POST', '/apis/karpenter.sh/v1alpha1/nodeoverlays', { body: OVERLAYS[i] });
    });
    const watcher = async () => {
      const s = await spawnServe(
        env.cp,
        env.certs,
        WATCHER_USER,
        { '--leader-election-enabled': 'false', '--log-level': 'warn', '--events-enabled': 'false' },
        [],
        COMPILED_CLI,
      );
      running.push({ kill: () => s.child.kill('SIGKILL') });
      return s;
    };
    const bare = () => {
      const r = startReference(process.execPath, [join(ROOT, 'bench', 'bare-client.ts')], kubeconfig);
      running.push({ kill: () => r.child.kill('SIGKILL') });
      return r;
    };
    // Started before the first node: they follow the cluster as it grows.
    const first = await watcher();
    await waitReady(first.healthPort, '/readyz', 120_000);
    const bareFirst = bare();
    const floor = startReference(
      process.execPath,
      [...RUNTIME_NODE_FLAGS, join(ROOT, 'bench', 'watch-floor.ts')],
      kubeconfig,
    );
    running.push({ kill: () => floor.child.kill('SIGKILL') });
    const influencedOf = async (port: number) =>
      counter(await metricsOf(port), 'veneer_nodewatcher_nodes_influenced_current', {});
    let created = 0;
    let influenced = 0;
    const usedAtStart = totalmem() - freemem();
    for (const size of SIZES) {
      // What the machine used per node so far (apiserver, etcd, the clients), a fifth more for the next step.
      const perNode = created === 0 ? 250_000 : (totalmem() - freemem() - usedAtStart) / created;
      const needGb = (perNode * (size - created) * 1.2) / GB;
      if (freemem() / GB - needGb < MIN_FREE_GB) {
        progress(
          `scale-100k: ${round(freemem() / GB)} GB free of ${round(totalmem() / GB)}, ${size} nodes need about ${round(needGb)} more: stopping at ${created}`,
        );
        break;
      }
      progress(`scale-100k: creating nodes ${created} to ${size} (and their NodeClaims)`);
      const createStart = Date.now();
      let next = created;
      await workers(48, async () => {
        while (next < size) {
          const i = next++;
          const { node, claim, influenced: recorded } = nodeAndClaim(i);
          await admin.call('POST', '/apis/karpenter.sh/v1/nodeclaims', { body: claim });
          await admin.call('PATCH', `/apis/karpenter.sh/v1/nodeclaims/${claim.metadata.name}/status`, {
            body: { status: claim.status },
            contentType: 'application/merge-patch+json',
          });
          await admin.call('POST', '/api/v1/nodes', { body: node });
          if (recorded) influenced++;
          if (i % 5000 === 0 && i > created) progress(`scale-100k: ${i} nodes`);
        }
      });
      created = size;
      const createSeconds = (Date.now() - createStart) / 1000;
      await until(
        'the first watcher sees every record',
        async () => (await influencedOf(first.metricsPort)) === influenced,
        600_000,
      );
      await sleep(5000);
      const before = { watcherMb: proc(first.child.pid!).rssMb, bareMb: proc(bareFirst.pid).rssMb };
      progress(
        `scale-100k: ${size} nodes in ${round(createSeconds)} s; RSS: watcher ${round(before.watcherMb)} MB, bare client ${round(before.bareMb)} MB (both started before the first node)`,
      );

      // Started now: their first list is of every node.
      const listStart = Date.now();
      const late = await watcher();
      const bareLate = bare();
      await waitReady(late.healthPort, '/readyz', 600_000);
      const watcherReadyS = (Date.now() - listStart) / 1000;
      await until('the bare client listed', () => /listed \d+ nodes in \d+ ms/.test(bareLate.stderr()), 600_000);
      const bareListS = Number(/listed \d+ nodes in (\d+) ms/.exec(bareLate.stderr())?.[1]) / 1000;
      await sleep(10_000);
      const after = {
        watcherMb: proc(late.child.pid!).rssMb,
        bareMb: proc(bareLate.pid).rssMb,
        watcherReadyS,
        bareListS,
      };
      progress(
        `scale-100k: started after: watcher ready in ${round(watcherReadyS)} s at ${round(after.watcherMb)} MB; bare client listed in ${round(bareListS)} s, ${round(after.bareMb)} MB`,
      );

      const cuts = async () =>
        counter((await env.cp.get('/metrics')).body, 'apiserver_terminated_watchers_total', { resource: 'nodes' });
      const closed = async (port: number) =>
        counter(await metricsOf(port), 'veneer_nodewatcher_watch_restarts_total', { resource: 'nodes' });
      const cutsBefore = {
        apiserver: await cuts(),
        first: await closed(first.metricsPort),
        floor: floor.cuts(),
        bare: bareFirst.cuts() + bareLate.cuts(),
      };
      const cpuBefore = [first.child.pid!, floor.pid, bareFirst.pid].map((p) => proc(p).cpuMs);
      let patches = 0;
      const deadline = Date.now() + CHURN_MS;
      const churnStart = Date.now();
      await workers(30, async (w) => {
        for (let k = w; Date.now() < deadline; k += 30) {
          // Paced: the k-th patch of the window is due at k / CHURN_PER_S seconds.
          const due = churnStart + (k * 1000) / CHURN_PER_S;
          if (due > Date.now()) await sleep(due - Date.now());
          const i = Math.floor(Math.random() * created);
          const { node } = nodeAndClaim(i);
          await admin.call('PATCH', `/api/v1/nodes/${node.metadata!.name}/status`, {
            body: heartbeatPatch(),
            contentType: 'application/strategic-merge-patch+json',
          });
          patches++;
        }
      });
      await sleep(2000);
      const [mine, floorCpu, bareCpu] = [first.child.pid!, floor.pid, bareFirst.pid].map(
        (p, i) => ((proc(p).cpuMs - cpuBefore[i]!) * 1000) / patches,
      );
      const churn = {
        updatesPerS: round(patches / (CHURN_MS / 1000)),
        watcherUsPerUpdate: round(mine!),
        floorUsPerUpdate: round(floorCpu!),
        bareUsPerUpdate: round(bareCpu!),
        watcherMb: Math.max(proc(first.child.pid!).rssMb, proc(late.child.pid!).rssMb),
        bareMb: Math.max(proc(bareFirst.pid).rssMb, proc(bareLate.pid).rssMb),
        floorCuts: floor.cuts() - cutsBefore.floor,
        bareCuts: bareFirst.cuts() + bareLate.cuts() - cutsBefore.bare,
        // A watch the watcher itself ends and opens again (its timeoutSeconds, 5 to 10 minutes, as
        // client-go's) is no cut: the apiserver's own count of the watches it cut, less the references'.
        watcherRestarts: (await closed(first.metricsPort)) - cutsBefore.first,
        watcherCuts: 0,
      };
      churn.watcherCuts = Math.max(0, (await cuts()) - cutsBefore.apiserver - churn.floorCuts - churn.bareCuts);
      progress(
        `scale-100k: churn ${churn.updatesPerS}/s: CPU per update watcher ${churn.watcherUsPerUpdate} us, floor ${churn.floorUsPerUpdate} us, bare ${churn.bareUsPerUpdate} us; RSS watcher ${round(churn.watcherMb)} MB, bare ${round(churn.bareMb)} MB; watches cut: watcher ${churn.watcherCuts} (its restarts ${churn.watcherRestarts}), floor ${churn.floorCuts}, bare ${churn.bareCuts} (apiserver: ${(await cuts()) - cutsBefore.apiserver})`,
      );
      samples.push({
        size,
        createSeconds,
        before,
        after,
        churn,
        apiserverMb: proc(pids.apiserver).rssMb,
        etcdMb: proc(pids.etcd).rssMb,
      });
      late.child.kill('SIGKILL');
      bareLate.child.kill('SIGKILL');
    }
    const listFloor = await timeReportLists(admin);
    const report = { ...(await timeReport(kubeconfig)), listFloorSeconds: listFloor };
    progress(
      `scale-100k: report over ${created} nodes: ${round(report.seconds)} s, ${round(report.maxRssMb)} MB at most; the same lists alone: ${round(listFloor)} s`,
    );
    return summarize(samples, report);
  } finally {
    for (const r of running) r.kill();
    await admin.close();
    await env.cp.stop();
  }
}

/** `report` live over the cluster, compiled as shipped: its wall time and its peak RSS (the kernel's VmHWM, via time -f %M). */
async function timeReport(kubeconfig: string): Promise<{ seconds: number; maxRssMb: number }> {
  const start = Date.now();
  const child = spawn(
    '/usr/bin/time',
    ['-f', 'maxrss_kb %M', process.execPath, ...RUNTIME_NODE_FLAGS, COMPILED_CLI, 'report', '-o', 'json'],
    {
      env: { ...process.env, KUBECONFIG: kubeconfig },
      stdio: ['ignore', 'ignore', 'pipe'],
    },
  );
  let err = '';
  child.stderr.on('data', (c) => (err += c));
  const code = await new Promise<number | null>((r) => child.once('exit', r));
  if (code !== 0) throw new Error(`report exited ${code}: ${err.slice(-2000)}`);
  return { seconds: (Date.now() - start) / 1000, maxRssMb: Number(/maxrss_kb (\d+)/.exec(err)?.[1] ?? 0) / 1024 };
}

/**
 * The floor of `report`'s time: the lists it reads (NodeClaims whole, recorded nodes as metadata,
 * the nodes without a record whole), a page of 500 at a time, each page parsed and dropped. What
 * the apiserver takes to serve them, and the client to parse them, bounds any report.
 */
async function timeReportLists(admin: ReturnType<typeof clientFor>): Promise<number> {
  const start = Date.now();
  const all = async (path: string, query: Record<string, string> = {}, accept?: string) => {
    let token: string | undefined;
    do {
      const page = await admin.call<{ metadata: { continue?: string } }>('GET', path, {
        query: { ...query, limit: 500, continue: token },
        ...(accept ? { accept } : {}),
      });
      token = page.metadata.continue || undefined;
    } while (token);
  };
  await all('/apis/karpenter.sh/v1/nodeclaims');
  await all('/api/v1/nodes', { labelSelector: 'veneer.io/overlay-influenced' }, PARTIAL_METADATA_LIST);
  await all('/api/v1/nodes', { labelSelector: undecidedSelector(recordKeys('veneer.io')) });
  return (Date.now() - start) / 1000;
}

/** Least squares over the sizes: MB per 1,000 nodes, and the value at 100,000. */
function slope(points: [number, number][]): { perThousand: number; at100k: number } {
  const n = points.length;
  const mx = points.reduce((a, [x]) => a + x, 0) / n;
  const my = points.reduce((a, [, y]) => a + y, 0) / n;
  const b =
    points.reduce((a, [x, y]) => a + (x - mx) * (y - my), 0) / (points.reduce((a, [x]) => a + (x - mx) ** 2, 0) || 1);
  return { perThousand: round(b * 1000, 2), at100k: round(my + b * (100_000 - mx)) };
}

function summarize(
  samples: Sample[],
  report: { seconds: number; maxRssMb: number; listFloorSeconds: number },
): SuiteResult {
  const last = samples.at(-1)!;
  const watcher = (s: Sample) => Math.max(s.after.watcherMb, s.churn.watcherMb);
  const bareOf = (s: Sample) => Math.max(s.after.bareMb, s.churn.bareMb);
  const w = slope(samples.map((s) => [s.size, watcher(s)]));
  const b = slope(samples.map((s) => [s.size, bareOf(s)]));
  const keys: Record<string, number> = {
    scale_nodes_held: last.size,
    [`rss_mb_${last.size}_real_nodes`]: round(watcher(last)),
    [`rss_mb_${last.size}_bare_client`]: round(bareOf(last)),
    rss_mb_per_1000_nodes: w.perThousand,
    rss_mb_per_1000_nodes_bare_client: b.perThousand,
    rss_mb_100000_projected: w.at100k,
    first_list_s: round(last.after.watcherReadyS),
    first_list_s_bare_client: round(last.after.bareListS),
    churn_cpu_over_floor_at_scale: round(last.churn.watcherUsPerUpdate / last.churn.floorUsPerUpdate, 2),
    watch_cuts_steady_churn: last.churn.watcherCuts,
    report_s_at_scale: round(report.seconds),
    report_list_floor_s_at_scale: round(report.listFloorSeconds),
    report_rss_mb_at_scale: round(report.maxRssMb),
  };
  return {
    keys,
    targets: {
      [`rss_mb_${last.size}_real_nodes`]: `<= 300 and <= rss_mb_${last.size}_bare_client`,
      rss_mb_100000_projected: '<= 300',
      churn_cpu_over_floor_at_scale: '<= 1.25',
      watch_cuts_steady_churn: '0',
      report_s_at_scale: '<= 10',
      report_list_floor_s_at_scale: 'reported (the lists alone, parsed and dropped)',
      report_rss_mb_at_scale: '<= 300',
    },
    table: samples.map((s) => ({
      nodes: s.size,
      create_s: round(s.createSeconds),
      watcher_mb_followed: round(s.before.watcherMb),
      bare_mb_followed: round(s.before.bareMb),
      watcher_ready_s: round(s.after.watcherReadyS),
      watcher_mb_after_list: round(s.after.watcherMb),
      bare_list_s: round(s.after.bareListS),
      bare_mb_after_list: round(s.after.bareMb),
      updates_per_s: s.churn.updatesPerS,
      watcher_us_per_update: s.churn.watcherUsPerUpdate,
      floor_us_per_update: s.churn.floorUsPerUpdate,
      bare_us_per_update: s.churn.bareUsPerUpdate,
      watcher_mb_churn: round(s.churn.watcherMb),
      bare_mb_churn: round(s.churn.bareMb),
      watch_cuts_watcher_floor_bare: `${s.churn.watcherCuts}/${s.churn.floorCuts}/${s.churn.bareCuts}`,
      apiserver_mb: round(s.apiserverMb),
      etcd_mb: round(s.etcdMb),
    })),
    raw: { samples, report },
  };
}

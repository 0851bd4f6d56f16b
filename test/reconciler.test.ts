// The reconciler with no webhook registered: every node the webhook would have missed ends with
// the right record, one write per node, only the leader writing.
import t from 'tap';
import * as k8s from '@kubernetes/client-node';
import type { RunningWatcher } from '../src/watcher.ts';
import type { DecisionStory } from '../src/engine/index.ts';
import { computeSavingsPlan, ec2InstanceSavingsPlan, reservedInstance } from './support/veneer.ts';
import { KarpenterSim } from './support/karpenter-sim.ts';
import { launchWatcher, startClusterEnv, WATCHER_AUDIT_POLICY, WATCHER_USER, watcherFlags } from './support/watcher-env.ts';
import { type ChildProcess, spawn } from 'node:child_process';
import { join } from 'node:path';

const env = await startClusterEnv({ auditPolicy: WATCHER_AUDIT_POLICY, extraWatchers: ['veneer-watcher-a', 'veneer-watcher-b'] });
t.teardown(() => env.cp.stop());
const { admin, cp, certs } = env;
const sim = new KarpenterSim(admin);
const core = admin.makeApiClient(k8s.CoreV1Api);
const custom = admin.makeApiClient(k8s.CustomObjectsApi);
const overlayApi = { group: 'karpenter.sh', version: 'v1alpha1', plural: 'nodeoverlays' };
for (const o of [computeSavingsPlan(), ec2InstanceSavingsPlan('m5', 'us-west-2'), reservedInstance('m5.xlarge', 'us-west-2')]) {
  await custom.createClusterCustomObject({ ...overlayApi, body: o });
}

const TYPES = ['m5.xlarge', 'm5.large', 'c6i.large', 'r6g.2xlarge'] as const;
const EXPECTED: Record<string, string> = {
  'm5.xlarge': 'cost-aware-ri-m5.xlarge-us-west-2',
  'm5.large': 'cost-aware-ec2-sp-m5-us-west-2',
  'c6i.large': 'cost-aware-compute-sp-global',
  'r6g.2xlarge': 'cost-aware-compute-sp-global',
};
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

async function until(what: string, cond: () => Promise<boolean> | boolean, ms = 60_000): Promise<void> {
  const deadline = Date.now() + ms;
  while (!(await cond())) {
    if (Date.now() > deadline) throw new Error(`timed out after ${ms} ms waiting for ${what}`);
    await sleep(100);
  }
}

async function records(prefix: string): Promise<Map<string, Record<string, string>>> {
  const out = new Map<string, Record<string, string>>();
  for (const n of (await core.listNode()).items) {
    const name = n.metadata?.name ?? '';
    if (name.startsWith(prefix)) out.set(name, n.metadata?.labels ?? {});
  }
  return out;
}

async function allRecorded(prefix: string, count: number): Promise<boolean> {
  const r = await records(prefix);
  return r.size === count && [...r.values()].every((l) => l['veneer.io/overlay-influenced'] !== undefined);
}

async function burst(prefix: string, count: number): Promise<void> {
  await Promise.all(Array.from({ length: count }, (_, i) =>
    sim.launch({ name: `${prefix}-${i}`, claimName: `${prefix}-claim-${i}`, instanceType: TYPES[i % TYPES.length] })));
}

function checkRecords(t: { equal(a: unknown, b: unknown, msg: string): void }, r: Map<string, Record<string, string>>): void {
  let wrong = 0;
  for (const [name, labels] of r) {
    const i = Number(name.split('-').at(-1));
    const expected = EXPECTED[TYPES[i % TYPES.length]!];
    if (labels['veneer.io/matching-overlay'] !== expected || labels['veneer.io/overlay-influenced'] !== 'true') wrong++;
  }
  t.equal(wrong, 0, `all ${r.size} records name the overlay Karpenter would have applied`);
}

const auditBy = (user: string) => cp.auditEvents().filter((e) => e.user.username === user && e.stage === 'ResponseComplete');

let watcher: RunningWatcher | undefined;
t.teardown(() => watcher?.stop());

t.test('100 nodes launched at once: every one recorded, one write each, no per-node GET', async (t) => {
  const started = await launchWatcher(cp, certs, WATCHER_USER, { '--max-concurrent-reconciles': '10' });
  watcher = started.watcher;
  await until('leadership', () => started.watcher.metrics.leader.get().then((m) => m.values[0]?.value === 1));
  // Timestamps have one-second precision: launch in a later second than the watcher's first
  // sync, so that the decisions are exact.
  await sleep(1100);
  const start = Date.now();
  await burst('burst', 100);
  await until('100 records', () => allRecorded('burst', 100));
  t.comment(`100 nodes recorded ${Date.now() - start} ms after the burst began`);
  checkRecords(t, await records('burst'));
  const events = auditBy(WATCHER_USER).filter((e) => e.objectRef?.resource === 'nodes' && e.objectRef.name?.startsWith('burst'));
  const writes = events.filter((e) => e.verb === 'patch' && e.responseStatus?.code === 200);
  const conflicts = events.filter((e) => e.verb === 'patch' && e.responseStatus?.code === 409);
  const perNode = new Map<string, number>();
  for (const w of writes) perNode.set(w.objectRef!.name!, (perNode.get(w.objectRef!.name!) ?? 0) + 1);
  t.equal(writes.length, 100, 'exactly one successful write per node');
  t.ok([...perNode.values()].every((n) => n === 1), 'never two records for one node');
  t.equal(events.filter((e) => e.verb === 'get').length, 0, 'no per-node GET: decisions read the cache');
  t.comment(`write attempts: ${writes.length} successful, ${conflicts.length} refused by the resourceVersion guard (409) and retried`);
  const story = JSON.parse((await core.readNode({ name: 'burst-0' })).metadata?.annotations?.['veneer.io/overlay-decision'] ?? '{}') as DecisionStory;
  t.match(story, { decidedBy: 'reconciler', basis: 'exact' });
});

t.test('the apiserver restarted in the middle of a burst: every node still ends recorded', async (t) => {
  watcher ??= (await launchWatcher(cp, certs, WATCHER_USER)).watcher;
  let restartedAt = 0;
  const launch = (i: number) => sim.launchPersistently({ name: `restart-${i}`, claimName: `restart-claim-${i}`, instanceType: TYPES[i % TYPES.length] });
  await Promise.all(Array.from({ length: 15 }, (_, i) => launch(i)));
  await Promise.all([
    cp.restartApiServer().then(() => (restartedAt = Date.now())),
    ...Array.from({ length: 15 }, (_, i) => launch(15 + i)),
  ]);
  await until('30 records after the restart', () => allRecorded('restart', 30), 90_000).catch(async (err) => {
    const r = await records('restart');
    t.comment(`nodes: ${r.size}; unrecorded: ${[...r].filter(([, l]) => !l['veneer.io/overlay-influenced']).map(([n, l]) => `${n} registered=${l['karpenter.sh/registered']}`).join(', ')}`);
    throw err;
  });
  t.comment(`all recorded ${Date.now() - restartedAt} ms after the apiserver was back`);
  checkRecords(t, await records('restart'));
});

async function spawnWatcher(user: string): Promise<{ child: ChildProcess; metricsPort: number }> {
  const flags = await watcherFlags(certs);
  const kubeconfig = cp.writeKubeConfig(cp.userKubeConfig(user), `kubeconfig-${user}`);
  const child = spawn(process.execPath, [join(import.meta.dirname, '..', 'src', 'cli.ts'), 'serve', ...Object.entries(flags).flat()], {
    env: { ...process.env, KUBECONFIG: kubeconfig, POD_NAME: user },
    stdio: 'ignore',
  });
  t.teardown(() => void child.kill('SIGKILL'));
  return { child, metricsPort: Number(flags['--metrics-port']) };
}

const leads = async (metricsPort: number) =>
  /^veneer_nodewatcher_leader 1$/m.test(await fetch(`http://127.0.0.1:${metricsPort}/metrics`).then((r) => r.text(), () => ''));

t.test('two replicas: only the leader writes; when it dies the other takes over within the lease', async (t) => {
  await watcher?.stop(); // graceful: releases the lease
  const a = await spawnWatcher('veneer-watcher-a');
  await until('a leads', () => leads(a.metricsPort), 30_000);
  const b = await launchWatcher(cp, certs, 'veneer-watcher-b');
  t.teardown(() => b.watcher.stop());
  await burst('pair', 20);
  await until('20 records', () => allRecorded('pair', 20));
  const writesBy = (user: string, prefix: string) => auditBy(user).filter((e) => e.verb === 'patch' && e.objectRef?.resource === 'nodes' && e.objectRef.name?.startsWith(prefix) && e.responseStatus?.code === 200).length;
  t.equal(writesBy('veneer-watcher-a', 'pair'), 20, 'the leader wrote every record');
  t.equal(writesBy('veneer-watcher-b', 'pair'), 0, 'the follower wrote nothing');
  // A crash: SIGKILL, so the lease is not released and must expire.
  a.child.kill('SIGKILL');
  const killedAt = Date.now();
  await burst('failover', 10);
  await until('b leads', () => b.watcher.metrics.leader.get().then((m) => m.values[0]?.value === 1), 15_000);
  const tookOver = Date.now() - killedAt;
  await until('10 records after the failover', () => allRecorded('failover', 10));
  t.ok(tookOver <= 3000 + 2000, `B led ${tookOver} ms after A was killed (lease 3 s, retry 0.5 s)`);
  checkRecords(t, await records('failover'));
  t.equal(writesBy('veneer-watcher-b', 'failover'), 10, 'the new leader finished the work');
  t.equal(writesBy('veneer-watcher-a', 'failover'), 0);
});

t.test('nodes created while no watcher ran are recorded when one starts, approximately', async (t) => {
  await sleep(1100);
  await burst('offline', 4);
  await sleep(1100);
  const late = await launchWatcher(cp, certs, WATCHER_USER, { '--leader-election-enabled': 'false' });
  watcher = late.watcher; // the next test goes on with it; the file's teardown stops it
  await until('4 records', () => allRecorded('offline', 4));
  checkRecords(t, await records('offline'));
  const story = JSON.parse((await core.readNode({ name: 'offline-0' })).metadata?.annotations?.['veneer.io/overlay-decision'] ?? '{}') as DecisionStory;
  t.equal(story.basis, 'approximate', 'launched before the watcher had seen the overlays: the record says so');
});

t.test('an overlay created, changed and deleted while nodes launch: each record matches its launch time', async (t) => {
  watcher ??= (await launchWatcher(cp, certs, WATCHER_USER, { '--leader-election-enabled': 'false' })).watcher;
  const claims: { name: string; type: string; expect: string }[] = [];
  const claim = async (name: string, type: string, expect: string) => {
    await sim.createNodeClaim({ name, claimName: `${name}-claim`, instanceType: type });
    claims.push({ name, type, expect });
    await sleep(1100); // timestamps have one-second precision
  };
  const ri = reservedInstance('x1e.large', 'us-west-2');
  await claim('hist-before', 'x1e.large', 'cost-aware-compute-sp-global');
  await custom.createClusterCustomObject({ ...overlayApi, body: ri });
  await sleep(1100);
  await claim('hist-during', 'x1e.large', 'cost-aware-ri-x1e.large-us-west-2');
  const changed = { ...ri, spec: { ...ri.spec, requirements: [{ key: 'node.kubernetes.io/instance-type', operator: 'In', values: ['x2.large'] }] } };
  await custom.patchClusterCustomObject({ ...overlayApi, name: 'cost-aware-ri-x1e.large-us-west-2', body: { spec: changed.spec } }, k8s.setHeaderOptions('Content-Type', k8s.PatchStrategy.MergePatch));
  await sleep(1100);
  await claim('hist-changed-old-type', 'x1e.large', 'cost-aware-compute-sp-global');
  await claim('hist-changed-new-type', 'x2.large', 'cost-aware-ri-x1e.large-us-west-2');
  await custom.deleteClusterCustomObject({ ...overlayApi, name: 'cost-aware-ri-x1e.large-us-west-2' });
  await sleep(1100);
  await claim('hist-deleted', 'x2.large', 'cost-aware-compute-sp-global');
  // Only now do the nodes appear: every decision is about the past.
  await Promise.all(claims.map((c) => sim.kubeletCreate({ name: c.name, instanceType: c.type }).then(() => sim.register({ name: c.name, instanceType: c.type, claimName: `${c.name}-claim` }))));
  await until('history records', () => allRecorded('hist', claims.length));
  const r = await records('hist');
  for (const c of claims) t.equal(r.get(c.name)?.['veneer.io/matching-overlay'], c.expect, `${c.name}: ${c.expect}`);
});

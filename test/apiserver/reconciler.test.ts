// The reconciler with no webhook registered: every node the webhook would have missed ends with
// the right record, one write per node. Faults (restarts, failover) are in test/faults/.
import t from 'tap';
import * as k8s from '@kubernetes/client-node';
import type { RunningWatcher } from '../../src/commands/serve.ts';
import type { DecisionStory } from '../../src/engine/record.ts';
import { WEBHOOK_FIRST_MS } from '../../src/controllers/recorder/reconciler.ts';
import { reservedInstance } from '../../kit/veneer.ts';
import { Fleet, OVERLAY_API as overlayApi, sleep, until } from '../../kit/fleet.ts';
import { launchWatcher, startClusterEnv, WATCHER_AUDIT_POLICY, WATCHER_USER } from '../../kit/watcher-env.ts';

const env = await startClusterEnv({ auditPolicy: WATCHER_AUDIT_POLICY });
t.teardown(() => env.cp.stop());
const { admin, cp, certs } = env;
const fleet = new Fleet(cp, admin);
const { sim, core } = fleet;
const custom = sim.custom;
await fleet.createOverlays();
const burst = (prefix: string, count: number) => fleet.burst(prefix, count);
const allRecorded = (prefix: string, count: number) => fleet.allRecorded(prefix, count);
const records = (prefix: string) => fleet.labels(prefix);

const auditBy = (user: string) =>
  cp.auditEvents().filter((e) => e.user.username === user && e.stage === 'ResponseComplete');

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
  t.same(await fleet.wrongRecords('burst'), [], 'every record names the overlay Karpenter would have applied');
  const events = auditBy(WATCHER_USER).filter(
    (e) => e.objectRef?.resource === 'nodes' && e.objectRef.name?.startsWith('burst'),
  );
  const writes = events.filter((e) => e.verb === 'patch' && e.responseStatus?.code === 200);
  const conflicts = events.filter((e) => e.verb === 'patch' && e.responseStatus?.code === 409);
  const perNode = new Map<string, number>();
  for (const w of writes) perNode.set(w.objectRef!.name!, (perNode.get(w.objectRef!.name!) ?? 0) + 1);
  t.equal(writes.length, 100, 'exactly one successful write per node');
  t.ok(
    [...perNode.values()].every((n) => n === 1),
    'never two records for one node',
  );
  t.equal(events.filter((e) => e.verb === 'get').length, 0, 'no per-node GET: decisions read the cache');
  t.comment(
    `write attempts: ${writes.length} successful, ${conflicts.length} refused by the resourceVersion guard (409) and retried`,
  );
  const story = JSON.parse(
    (await core.readNode({ name: 'burst-0' })).metadata?.annotations?.['veneer.io/overlay-decision'] ?? '{}',
  ) as DecisionStory;
  t.match(story, { decidedBy: 'reconciler', basis: 'exact' });
});

t.test('nodes created while no watcher ran are recorded when one starts, approximately', async (t) => {
  await watcher?.stop();
  await sleep(1100);
  await burst('offline', 4);
  await sleep(1100);
  const late = await launchWatcher(cp, certs, WATCHER_USER, { '--leader-election-enabled': 'false' });
  watcher = late.watcher; // the next test goes on with it; the file's teardown stops it
  await until('4 records', () => allRecorded('offline', 4));
  t.same(await fleet.wrongRecords('offline'), [], 'every record names the overlay Karpenter would have applied');
  const story = JSON.parse(
    (await core.readNode({ name: 'offline-0' })).metadata?.annotations?.['veneer.io/overlay-decision'] ?? '{}',
  ) as DecisionStory;
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
  const changed = {
    ...ri,
    spec: {
      ...ri.spec,
      requirements: [{ key: 'node.kubernetes.io/instance-type', operator: 'In', values: ['x2.large'] }],
    },
  };
  await custom.patchClusterCustomObject(
    { ...overlayApi, name: 'cost-aware-ri-x1e.large-us-west-2', body: { spec: changed.spec } },
    k8s.setHeaderOptions('Content-Type', k8s.PatchStrategy.MergePatch),
  );
  await sleep(1100);
  await claim('hist-changed-old-type', 'x1e.large', 'cost-aware-compute-sp-global');
  await claim('hist-changed-new-type', 'x2.large', 'cost-aware-ri-x1e.large-us-west-2');
  await custom.deleteClusterCustomObject({ ...overlayApi, name: 'cost-aware-ri-x1e.large-us-west-2' });
  await sleep(1100);
  await claim('hist-deleted', 'x2.large', 'cost-aware-compute-sp-global');
  // Only now do the nodes appear: every decision is about the past.
  await Promise.all(
    claims.map((c) =>
      sim
        .kubeletCreate({ name: c.name, instanceType: c.type })
        .then(() => sim.register({ name: c.name, instanceType: c.type, claimName: `${c.name}-claim` })),
    ),
  );
  await until('history records', () => allRecorded('hist', claims.length));
  const r = await records('hist');
  for (const c of claims) t.equal(r.get(c.name)?.['veneer.io/matching-overlay'], c.expect, `${c.name}: ${c.expect}`);
});

t.test('a node Karpenter has not registered yet is left to the webhook for a moment, then recorded', async (t) => {
  // No webhook here: the reconciler must hold off, then do the work itself.
  await sim.createNodeClaim({ name: 'unregistered-0', claimName: 'unregistered-0-claim', instanceType: 'm5.xlarge' });
  await sleep(500); // the NodeClaim is in the watcher's cache: nothing else would hold the decision back
  const created = await sim.kubeletCreate({ name: 'unregistered-0', instanceType: 'm5.xlarge' });
  const createdAt = Date.parse(created.metadata?.creationTimestamp as unknown as string);
  await sleep(300);
  t.equal(
    (await fleet.decidedBy('unregistered')).get('unregistered-0'),
    'none',
    'no record while the registration may still come, with the webhook to record it inline',
  );
  await until(
    'a record',
    async () => (await fleet.decidedBy('unregistered')).get('unregistered-0') === 'reconciler',
    10_000,
  );
  const recordedAt = Date.now();
  t.ok(
    recordedAt - createdAt >= WEBHOOK_FIRST_MS - 1000,
    `recorded ${recordedAt - createdAt} ms after its creationTimestamp (which has whole seconds), once ${WEBHOOK_FIRST_MS} ms had passed`,
  );
});

// Nodes as big and as busy as real ones: a few hundred ~20 KB nodes are created, then kubelets'
// condition heartbeats are patched as fast as this machine allows. The apiserver must never have
// to cut the watcher's node watch for falling behind (its own counter says so), and nothing the
// watcher should record is missed. `npm run bench -- scale` is the full-size version.
import t from 'tap';
import * as k8s from '@kubernetes/client-node';
import { shareConnections } from '../../kit/shared-connections.ts';
import { computeSavingsPlan, reservedInstance } from '../../kit/veneer.ts';
import { counter, metricsOf, OVERLAY_API, sleep, spawnServe, until, waitReady } from '../../kit/fleet.ts';
import { heartbeatPatch, realNode } from '../../kit/real-node.ts';
import { startClusterEnv, WATCHER_USER } from '../../kit/watcher-env.ts';

const NODES = Number(process.env.VENEER_REAL_SIZE_NODES ?? 300);
const CHURN_MS = Number(process.env.VENEER_REAL_SIZE_CHURN_MS ?? 20_000);
const STRATEGIC = k8s.setHeaderOptions('Content-Type', k8s.PatchStrategy.StrategicMergePatch);

const env = await startClusterEnv();
t.teardown(() => env.cp.stop());
const admin = shareConnections(env.admin);
const core = admin.makeApiClient(k8s.CoreV1Api);
const custom = admin.makeApiClient(k8s.CustomObjectsApi);
for (const o of [computeSavingsPlan(), reservedInstance('m5.xlarge', 'us-west-2')])
  await custom.createClusterCustomObject({ ...OVERLAY_API, body: o });
const replica = await spawnServe(env.cp, env.certs, WATCHER_USER, {
  '--leader-election-enabled': 'false',
  '--log-level': 'warn',
});
t.teardown(() => void replica.child.kill('SIGKILL'));
await waitReady(replica.healthPort);

const terminatedWatchers = async () =>
  counter((await env.cp.get('/metrics')).body, 'apiserver_terminated_watchers_total', { resource: 'nodes' });
const watcherMetric = async (name: string, labels: Record<string, string>) =>
  counter(await metricsOf(replica.metricsPort), name, labels);

async function workers(n: number, work: (worker: number) => Promise<void>): Promise<void> {
  await Promise.all(Array.from({ length: n }, (_, i) => work(i)));
}

t.test(
  `${NODES} real-size nodes and ${CHURN_MS / 1000} s of status churn: no watch is cut, every node recorded`,
  async (t) => {
    const before = await terminatedWatchers();
    const names = Array.from({ length: NODES }, (_, i) => `real-${i}`);
    const sample = realNode({ name: 'sample', index: 0 });
    let next = 0;
    await workers(20, async () => {
      while (next < names.length) {
        const i = next++;
        await core.createNode({
          body: realNode({ name: names[i]!, index: i, instanceType: i % 2 ? 'm5.xlarge' : 'c6i.large' }),
        });
      }
    });
    const served = JSON.stringify(await core.readNode({ name: names[0]! })).length;
    t.ok(
      served >= 15_000,
      `a node is ${Math.round(served / 1024)} KB as served (the fixture alone ${Math.round(JSON.stringify(sample).length / 1024)} KB)`,
    );
    await until(
      'every node recorded',
      async () => (await watcherMetric('veneer_nodewatcher_nodes_labeled_total', {})) >= NODES,
      120_000,
    );

    let patches = 0;
    const deadline = Date.now() + CHURN_MS;
    await workers(20, async (w) => {
      for (let i = w; Date.now() < deadline; i += 20) {
        await core.patchNodeStatus({ name: names[i % names.length]!, body: heartbeatPatch() }, STRATEGIC);
        patches++;
      }
    });
    // An overloaded watcher is cut some time after it fell behind: give the apiserver that time.
    await sleep(3000);
    const cut = (await terminatedWatchers()) - before;
    const closed = await watcherMetric('veneer_nodewatcher_watch_restarts_total', {
      resource: 'nodes',
      reason: 'closed',
    });
    t.comment(`${patches} status patches in ${CHURN_MS / 1000} s (${Math.round(patches / (CHURN_MS / 1000))}/s)`);
    t.equal(cut, 0, 'apiserver_terminated_watchers_total{resource="nodes"} did not move');
    t.equal(closed, 0, 'the watcher saw no node watch closed');
    const nodes = await core.listNode();
    t.equal(
      nodes.items.filter((n) => n.metadata?.labels?.['veneer.io/overlay-influenced'] === undefined).length,
      0,
      'every node carries a record',
    );
  },
);

// The first list of a cache against real apiservers: a streaming list (a watch that begins with
// every object, the WatchList feature, on by default in Kubernetes 1.35) where it is served, and
// pages where it is not (the same apiserver with the feature gate off answers 422). Real-size
// nodes, and the apiserver's own counters say which it was.
import t, { type Test } from 'tap';
import * as k8s from '@kubernetes/client-node';
import { recordKeys } from '../../src/engine/record.ts';
import { createLogger } from '../../src/log.ts';
import { createMetrics } from '../../src/metrics.ts';
import { NodeCache } from '../../src/state/node-cache.ts';
import { clientFor, ControlPlane } from '../../kit/control-plane.ts';
import { counter, until } from '../../kit/fleet.ts';
import { realNode } from '../../kit/real-node.ts';

const NODES = 60;
const keys = recordKeys('veneer.io');

/** The apiserver's counts of node lists, by how they were served: pages (LIST) or streams (watch-list). */
async function nodeLists(cp: ControlPlane): Promise<{ pages: number; streams: number }> {
  const body = (await cp.get('/metrics')).body;
  return {
    pages: counter(body, 'apiserver_request_total', { resource: 'nodes', verb: 'LIST', code: '200' }),
    streams: counter(body, 'apiserver_watch_list_duration_seconds_count', { resource: 'nodes' }),
  };
}

async function scene(t: Test, featureGates: string[]) {
  const cp = await ControlPlane.start({ extraApiServerArgs: featureGates });
  t.teardown(() => cp.stop());
  const core = cp.adminKubeConfig().makeApiClient(k8s.CoreV1Api);
  for (let i = 0; i < NODES; i++) {
    const node = realNode({ name: `n-${i}`, index: i, capacityType: i % 3 === 0 ? 'spot' : 'on-demand' });
    // Every other node already recorded: the undecided view lists only the rest.
    if (i % 2 === 1) node.metadata!.labels![keys.influenced] = 'false';
    await core.createNode({ body: node });
  }
  const client = clientFor(cp.adminKubeConfig());
  t.teardown(() => client.close());
  const lines: string[] = [];
  const log = createLogger('info', { write: (line: string) => void lines.push(line) });
  const cache = new NodeCache({ client, metrics: createMetrics(), log, now: Date.now }, keys);
  const before = await nodeLists(cp);
  cache.all.start();
  cache.undecided.start();
  t.teardown(() => Promise.all([cache.all.stop(), cache.undecided.stop()]));
  await Promise.all([cache.all.synced, cache.undecided.synced]);
  const undecided = [...Array(NODES).keys()].filter((i) => i % 2 === 0 && i % 3 !== 0).length;
  t.equal(cache.all.store.size, NODES, 'every node in the metadata view');
  t.equal(cache.undecided.store.size, undecided, 'the on-demand nodes without a record in the whole view');
  await core.deleteNode({ name: 'n-1' });
  await core.createNode({ body: realNode({ name: 'after-sync', index: NODES }) });
  await until(
    'the watch goes on after the list',
    () => cache.all.store.has('after-sync') && !cache.all.store.has('n-1'),
  );
  t.pass('and goes on as a watch: a node created and one deleted after it');
  const after = await nodeLists(cp);
  return { lists: { pages: after.pages - before.pages, streams: after.streams - before.streams }, lines };
}

t.test('served: both node views list through a streaming list, no page asked for', async (t) => {
  const { lists, lines } = await scene(t, []);
  t.same(lists, { pages: 0, streams: 2 }, 'two watch-lists, no LIST');
  t.notOk(
    lines.some((l) => l.includes('streaming lists are not served')),
    'nothing said of a fallback',
  );
});

t.test('refused (WatchList=false answers 422): pages instead, said once per view', async (t) => {
  const { lists, lines } = await scene(t, ['--feature-gates=WatchList=false']);
  t.same(lists, { pages: 2, streams: 0 }, 'one paged list per view');
  t.equal(lines.filter((l) => l.includes('streaming lists are not served; listing in pages')).length, 2);
});

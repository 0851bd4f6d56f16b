// The watch machinery against a real apiserver: restarts, expiry, silence, relists, stop.
import t from 'tap';
import * as k8s from '@kubernetes/client-node';
import { createLogger } from '../../src/log.ts';
import { createMetrics } from '../../src/metrics.ts';
import type { ListPage } from '../../src/kube/list.ts';
import { Reflector } from '../../src/kube/reflector.ts';
import { clientFor, ControlPlane, viaPort } from '../../kit/control-plane.ts';
import { StallProxy } from '../support/stall-proxy.ts';

// Compaction every 2 s, and watches served by etcd itself (no watch cache), let a test make a
// resourceVersion expire (410 Gone) for real.
const cp = await ControlPlane.start({ extraApiServerArgs: ['--etcd-compaction-interval=2s', '--watch-cache=false'] });
t.teardown(() => cp.stop());
const kc = cp.adminKubeConfig();
const core = kc.makeApiClient(k8s.CoreV1Api);
const client = clientFor(kc);
t.teardown(() => client.close());
const log = createLogger('silent');

const until = async (what: string, cond: () => boolean | Promise<boolean>, ms = 30_000) => {
  const deadline = Date.now() + ms;
  while (!(await cond())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
};

function configMapReflector(
  opts: { watchdogMs?: number; relistIntervalMs?: number; firstResourceVersion?: string } = {},
) {
  const metrics = createMetrics();
  const events: string[] = [];
  const gaps: (number | undefined)[] = [];
  let lists = 0;
  const reflector = new Reflector<string>({
    resource: 'configmaps',
    client,
    watchPath: '/api/v1/namespaces/default/configmaps',
    listPage: async (token): Promise<ListPage> => {
      const list = await core.listNamespacedConfigMap({
        namespace: 'default',
        ...(token ? { _continue: token } : {}),
        limit: 2,
      });
      if (!token) lists++;
      const rv =
        lists === 1 && opts.firstResourceVersion ? opts.firstResourceVersion : (list.metadata?.resourceVersion ?? '');
      return { items: list.items, resourceVersion: rv, continueToken: list.metadata?._continue || undefined };
    },
    keyOf: (o) => (o as k8s.V1ConfigMap).metadata?.name ?? '',
    slim: (o) => (o as k8s.V1ConfigMap).data?.v ?? '',
    handlers: {
      upsert: (v) => events.push(`upsert ${v}`),
      remove: (v) => events.push(`remove ${v}`),
      listed: (_at, gapSince) => void gaps.push(gapSince),
    },
    metrics,
    log,
    backoffInitialMs: 100,
    backoffMaxMs: 1000,
    ...opts,
  });
  const restarts = async (reason: string) =>
    (await metrics.watchRestarts.get()).values
      .filter((v) => v.labels.reason === reason)
      .reduce((a, v) => a + v.value, 0);
  return { reflector, events, gaps, restarts, lists: () => lists };
}

const put = (name: string, v: string) =>
  core.createNamespacedConfigMap({ namespace: 'default', body: { metadata: { name }, data: { v } } });

t.test('lists in pages, then follows the watch; stop() is not a failure', async (t) => {
  for (let i = 0; i < 5; i++) await put(`seed-${i}`, `seed-${i}`);
  const r = configMapReflector();
  r.reflector.start();
  await r.reflector.synced;
  t.equal(r.reflector.store.size, 5, 'five objects over three pages');
  await put('live-1', 'live-1');
  await until('the watch event', () => r.reflector.store.has('live-1'));
  await core.deleteNamespacedConfigMap({ namespace: 'default', name: 'live-1' });
  await until('the delete', () => !r.reflector.store.has('live-1'));
  t.ok(r.events.includes('remove live-1'));
  await r.reflector.stop();
  t.equal(await r.restarts('error'), 0, 'stopping is not counted as an error');
  t.ok(r.reflector.lastEventAgeSeconds() < 30);
});

t.test('a silent watch is restarted by the watchdog without a relist', async (t) => {
  const r = configMapReflector({ watchdogMs: 700 });
  r.reflector.start();
  await r.reflector.synced;
  await until('an idle restart', async () => (await r.restarts('idle')) >= 1, 10_000);
  t.equal(r.lists(), 1, 'resumed from the last resourceVersion, no relist');
  await put('after-idle', 'after-idle');
  await until('an event after the restart', () => r.reflector.store.has('after-idle'));
  await r.reflector.stop();
});

t.test('a relist runs every relistInterval and repairs the store', async (t) => {
  const r = configMapReflector({ relistIntervalMs: 400 });
  r.reflector.start();
  await r.reflector.synced;
  await until('two more lists', () => r.lists() >= 3, 10_000);
  t.ok(r.reflector.store.has('after-idle'));
  await r.reflector.stop();
});

t.test('410 Gone: a resourceVersion the apiserver no longer has leads to a relist', async (t) => {
  const before = (await core.listNamespacedConfigMap({ namespace: 'default' })).metadata?.resourceVersion ?? '';
  for (let i = 0; i < 3; i++) await put(`churn-${i}`, `churn-${i}`);
  await new Promise((r) => setTimeout(r, 4500)); // at least one compaction past `before`
  const r = configMapReflector({ firstResourceVersion: before });
  r.reflector.start();
  await until('an expired watch', async () => (await r.restarts('expired')) >= 1, 15_000);
  await until('a second list', () => r.lists() >= 2);
  await put('after-expiry', 'after-expiry');
  await until('events flow again', () => r.reflector.store.has('after-expiry'));
  t.type(r.gaps[1], 'number', 'the relist after the expiry reports a gap');
  await r.reflector.stop();
});

t.test('the apiserver restarting mid-watch: the reflector comes back by itself', async (t) => {
  const r = configMapReflector();
  r.reflector.start();
  await r.reflector.synced;
  await cp.restartApiServer();
  await put('after-restart', 'after-restart');
  await until('the object created after the restart', () => r.reflector.store.has('after-restart'), 60_000);
  t.ok((await r.restarts('error')) + (await r.restarts('closed')) >= 1, 'the broken watch was counted');
  t.equal(r.gaps[0], undefined, 'the first list is no gap');
  await r.reflector.stop();
});

t.test('connections: API calls share one, each watch has its own', async (t) => {
  const proxy = new StallProxy(Number(new URL(cp.server).port));
  t.teardown(() => proxy.close());
  const own = clientFor(viaPort(cp.adminKubeConfig(), await proxy.listen()));
  t.teardown(() => own.close());
  for (let i = 0; i < 20; i++) await own.call('GET', '/api/v1/namespaces');
  t.equal(proxy.accepted, 1, '20 calls on one connection');
  const watches = [new AbortController(), new AbortController()];
  const streams = await Promise.all(
    watches.map((w) => own.stream('/api/v1/namespaces', { watch: true }, 'application/json', w.signal)),
  );
  await own.call('GET', '/api/v1/namespaces');
  t.equal(proxy.accepted, 3, 'two watches, a connection each; the next call back on the shared one');
  for (const w of watches) w.abort();
  t.equal(streams.length, 2);
  const answer = await own.call('GET', '/api/v1/namespaces/no-such-namespace').then(
    () => undefined,
    (e: unknown) => e,
  );
  t.match(
    answer,
    { name: 'ApiError', statusCode: 404, reason: 'NotFound', message: /^404 namespaces "no-such-namespace" not found/ },
    'a Status answer read as an ApiError',
  );
});

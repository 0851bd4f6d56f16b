// Whether the apiserver serves a Reflector's resource, as the caller hears it: a 404 on the list
// (a CRD not installed) says `false` once however often the list is retried, a list that succeeds
// says `true`; and the caches' readiness names the missing CRD. Against a real apiserver, with the
// CRDs installed while the watcher waits: test/apiserver/crds-served.test.ts.
import { PassThrough } from 'node:stream';
import t, { type Test } from 'tap';
import type { KubeClient } from '../../src/kube/client.ts';
import { ApiError } from '../../src/kube/client.ts';
import type { ListPage } from '../../src/kube/list.ts';
import { Reflector } from '../../src/kube/reflector.ts';
import { createLogger } from '../../src/log.ts';
import { createMetrics } from '../../src/metrics.ts';

/** A client whose watches hang until they are stopped: only the lists matter here. */
const hangingClient = {
  stream: (_path: string, _query: unknown, _accept: string, signal: AbortSignal) =>
    new Promise((_resolve, reject) => {
      if (signal.aborted) reject(signal.reason);
      signal.addEventListener('abort', () => reject(signal.reason), { once: true });
    }),
} as unknown as KubeClient;

const notFound = () =>
  new ApiError(
    404,
    JSON.stringify({ kind: 'Status', reason: 'NotFound', message: 'the server could not find the requested resource' }),
  );

function reflectorOver(t: Test, list: () => Promise<ListPage>, optional = false) {
  // The Reflector's back-off timers do not hold the process open; this does, while a test waits.
  const alive = setInterval(() => {}, 1000);
  t.teardown(() => clearInterval(alive));
  const said: boolean[] = [];
  const lines: { level: number; msg: string }[] = [];
  const log = createLogger('debug', { write: (s: string) => void lines.push(JSON.parse(s)) });
  const reflector = new Reflector<unknown>({
    resource: 'nodeoverlays',
    client: hangingClient,
    watchPath: '/apis/karpenter.sh/v1alpha1/nodeoverlays',
    listPage: list,
    keyOf: () => 'x',
    slim: (o) => o,
    handlers: { upsert: () => {}, remove: () => {} },
    metrics: createMetrics(),
    log,
    backoffInitialMs: 10,
    backoffMaxMs: 20,
    optional,
    servedChanged: (served) => said.push(served),
  });
  return { reflector, said, lines };
}

const until = async (what: string, cond: () => boolean) => {
  const deadline = Date.now() + 5000;
  while (!cond()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 5));
  }
};

t.test('a required resource: false once over many 404s, unsynced; true when the list succeeds', async (t) => {
  let lists = 0;
  let installed = false;
  const r = reflectorOver(t, async () => {
    lists++;
    if (!installed) throw notFound();
    return { items: [], resourceVersion: '1', continueToken: undefined };
  });
  t.equal(r.reflector.served, undefined, 'unknown before the first answer');
  r.reflector.start();
  await until('five lists', () => lists >= 5);
  t.same(r.said, [false], 'said once');
  t.equal(r.reflector.served, false);
  t.equal(r.reflector.isSynced, false, 'a required resource never counts as synced while missing');
  t.same(
    r.lines.filter((l) => l.level >= 40),
    [],
    'no warning at each retry: the caller says it (state/caches.ts logs the CRD once, as an error)',
  );
  t.ok(
    r.lines.some((l) => l.level === 20 && l.msg === 'list/watch failed; retrying'),
    'the retries at debug',
  );
  installed = true;
  await r.reflector.synced;
  t.same(r.said, [false, true]);
  t.equal(r.reflector.served, true);
  await r.reflector.stop();
});

t.test('served from the start: said once, true', async (t) => {
  const r = reflectorOver(t, async () => ({ items: [], resourceVersion: '1', continueToken: undefined }));
  r.reflector.start();
  await r.reflector.synced;
  t.same(r.said, [true]);
  await r.reflector.stop();
});

t.test('an optional resource: not served, and synced (empty) all the same', async (t) => {
  const r = reflectorOver(
    t,
    async () => {
      throw notFound();
    },
    true,
  );
  r.reflector.start();
  await r.reflector.synced;
  t.equal(r.reflector.served, false);
  t.same(r.said, [false]);
  t.ok(r.reflector.isSynced);
  await r.reflector.stop();
});

/** A client whose watches answer each in turn with the lines of `scripts`, then stay open until stopped. */
function scriptedClient(scripts: string[][], queries: Record<string, unknown>[]): KubeClient {
  return {
    stream: async (_path: string, query: Record<string, unknown>, _accept: string, signal: AbortSignal) => {
      queries.push(query);
      const lines = scripts.shift() ?? [];
      const body = new PassThrough();
      signal.addEventListener('abort', () => body.destroy(signal.reason), { once: true });
      // A script that ends with `close` is a watch the apiserver ended.
      body.write(
        lines
          .filter((l) => l !== 'close')
          .map((l) => `${l}\n`)
          .join(''),
      );
      if (lines.at(-1) === 'close') body.end();
      return body;
    },
  } as unknown as KubeClient;
}

const added = (name: string) => JSON.stringify({ type: 'ADDED', object: { metadata: { name, resourceVersion: '5' } } });
const bookmark = (end: boolean) =>
  JSON.stringify({
    type: 'BOOKMARK',
    object: {
      metadata: { resourceVersion: '9', ...(end ? { annotations: { 'k8s.io/initial-events-end': 'true' } } : {}) },
    },
  });

function streamingReflector(t: Test, scripts: string[][], list: () => Promise<ListPage>) {
  const alive = setInterval(() => {}, 1000);
  t.teardown(() => clearInterval(alive));
  const queries: Record<string, unknown>[] = [];
  const lines: { level: number; msg: string }[] = [];
  const metrics = createMetrics();
  const reflector = new Reflector<string>({
    resource: 'nodes',
    client: scriptedClient(scripts, queries),
    watchPath: '/api/v1/nodes',
    listPage: list,
    keyOf: (o) => (o as { metadata: { name: string } }).metadata.name,
    slim: (o) => (o as { metadata: { name: string } }).metadata.name,
    handlers: { upsert: () => {}, remove: () => {} },
    metrics,
    log: createLogger('debug', { write: (s: string) => void lines.push(JSON.parse(s)) }),
    backoffInitialMs: 10,
    backoffMaxMs: 20,
    streamingList: true,
  });
  return { reflector, queries, lines, metrics };
}

t.test('a streaming list cut before its closing bookmark is started again, never taken as complete', async (t) => {
  let lists = 0;
  const r = streamingReflector(
    t,
    [
      [added('a'), added('b'), 'close'],
      [added('a'), bookmark(true)],
    ],
    async () => {
      lists++;
      return { items: [], resourceVersion: '1', continueToken: undefined };
    },
  );
  r.reflector.start();
  await r.reflector.synced;
  t.same(
    [...r.reflector.store.keys()],
    ['a'],
    'the list is what the complete stream named: b, seen only before the cut, is gone',
  );
  t.equal(lists, 0, 'no page asked for');
  t.match(r.queries[0], { sendInitialEvents: true, resourceVersionMatch: 'NotOlderThan', allowWatchBookmarks: true });
  t.notOk('resourceVersion' in (r.queries[0] ?? {}), 'a consistent read: no resourceVersion');
  t.equal(r.queries.length, 2, 'asked again');
  t.ok(
    r.lines.some((l) => l.level === 40 && l.msg === 'list/watch failed; retrying'),
    'the cut said, as a failed list',
  );
  t.equal(
    (await r.metrics.watchRestarts.get()).values.find((v) => v.labels.reason === 'error')?.value,
    1,
    'and counted',
  );
  await r.reflector.stop();
});

t.test(
  'a watch that ignores sendInitialEvents (its first bookmark not the end of a list): pages instead',
  async (t) => {
    let lists = 0;
    const r = streamingReflector(t, [[bookmark(false)]], async () => {
      lists++;
      return { items: [{ metadata: { name: 'p' } }], resourceVersion: '1', continueToken: undefined };
    });
    r.reflector.start();
    await r.reflector.synced;
    t.equal(lists, 1, 'listed in pages');
    t.same([...r.reflector.store.keys()], ['p']);
    await until('the watch after the list', () => r.queries.length === 2);
    t.equal(r.queries[1]?.resourceVersion, '1', "then watched from the list's resourceVersion");
    t.ok(r.lines.some((l) => l.level === 30 && l.msg === 'streaming lists are not served; listing in pages'));
    await r.reflector.stop();
  },
);

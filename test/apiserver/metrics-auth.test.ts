// /metrics behind Kubernetes authentication and authorization, against the real apiserver,
// which answers the TokenReviews and SubjectAccessReviews itself: real ServiceAccount tokens
// from the TokenRequest API, RBAC deciding, the apiserver's own request counters as the proof
// that the cache keeps API calls per scrape near zero.
import t from 'tap';
import { loadConfig } from '../../src/config/load.ts';
import { createLogger } from '../../src/log.ts';
import { startWatcher } from '../../src/commands/serve.ts';
import { accessReviews, REVIEW_TIMEOUT_MS } from '../../src/kube/access-review.ts';
import { MetricsAuth } from '../../src/server/metrics-auth.ts';
import { clientFor, viaPort } from '../../kit/control-plane.ts';
import { counter } from '../../kit/fleet.ts';
import { StallProxy } from '../support/stall-proxy.ts';
import { scrape, tlsHandshake } from '../../kit/scrape.ts';
import { promtool } from '../support/prometheus.ts';
import { grantMetricsReader, startClusterEnv, WATCHER_USER, watcherFlags } from '../../kit/watcher-env.ts';

const env = await startClusterEnv();
t.teardown(() => env.cp.stop());
const { cp, admin, certs } = env;
let logged = '';
const { config } = loadConfig({ flags: await watcherFlags(certs, { '--metrics-secure': 'true' }) });
const watcher = await startWatcher({
  config,
  client: clientFor(cp.userKubeConfig(WATCHER_USER)),
  host: '127.0.0.1',
  identity: WATCHER_USER,
  log: createLogger('debug', {
    write: (line: string) => {
      logged += line;
    },
  }),
});
t.teardown(() => watcher.stop());
await watcher.caches?.synced();

await grantMetricsReader(admin, [{ kind: 'ServiceAccount', name: 'prometheus', namespace: 'monitoring' }]);
const tokens: string[] = [];
const mint = async (name: string) => {
  const token = await cp.serviceAccountToken('monitoring', name);
  tokens.push(token);
  return token;
};
const as = (token?: string) => scrape(watcher.metricsPort, { caPem: certs.caPem, ...(token ? { token } : {}) });
/** TokenReviews and SubjectAccessReviews the apiserver has served, from its own /metrics. */
const reviewsServed = async () => {
  const text = (await cp.get('/metrics')).body;
  return {
    tokenReviews: counter(text, 'apiserver_request_total', { resource: 'tokenreviews' }),
    accessReviews: counter(text, 'apiserver_request_total', { resource: 'subjectaccessreviews' }),
  };
};
const since = async (before: { tokenReviews: number; accessReviews: number }) => {
  const now = await reviewsServed();
  return {
    tokenReviews: now.tokenReviews - before.tokenReviews,
    accessReviews: now.accessReviews - before.accessReviews,
  };
};

t.test(
  '401 without a token or with a bad one, 403 without the right, the exposition with metrics-reader',
  async (t) => {
    const anonymous = await as();
    t.equal(anonymous.status, 401);
    t.equal(anonymous.headers['www-authenticate'], 'Bearer realm="veneer-node-watcher"');
    t.notMatch(anonymous.body, /veneer_nodewatcher/);
    t.equal((await as('not-a-real-token')).status, 401, 'a token the apiserver does not accept');
    const stranger = await as(await mint('stranger'));
    t.equal(stranger.status, 403, 'a ServiceAccount not bound to metrics-reader');
    t.match(stranger.body, /"system:serviceaccount:monitoring:stranger" may not get \/metrics/);
    t.notMatch(stranger.body, /veneer_nodewatcher/);
    const prometheus = await as(await mint('prometheus'));
    t.equal(prometheus.status, 200, 'a ServiceAccount bound to metrics-reader');
    t.match(prometheus.headers['content-type'], /^text\/plain; version=0.0.4/);
    t.match(prometheus.body, /^veneer_nodewatcher_metrics_auth_total\{result="forbidden"\} 1$/m);
    t.match(prometheus.body, /^veneer_nodewatcher_metrics_auth_total\{result="unauthenticated"\} 2$/m);
    const check = promtool(['check', 'metrics'], prometheus.body);
    t.equal(check.status, 0, check.stderr);
    t.equal(check.stdout.trim(), '', 'promtool has nothing to say about the exposition served behind auth');
  },
);

t.test(
  'the probes answer without a token; the metrics port serves GET /metrics and nothing else, over TLS 1.2+',
  async (t) => {
    for (const path of ['/healthz', '/readyz'])
      t.equal(
        (await fetch(`http://127.0.0.1:${watcher.healthPort}${path}`)).status,
        200,
        `${path}: plain HTTP, no token`,
      );
    t.equal(
      (await fetch(`http://127.0.0.1:${watcher.healthPort}/metrics`)).status,
      404,
      'no metrics on the probe port',
    );
    const token = await mint('prometheus');
    for (const path of ['/healthz', '/readyz', '/', '/metrics/'])
      t.equal(
        (await scrape(watcher.metricsPort, { caPem: certs.caPem, token, path })).status,
        404,
        `${path} on the metrics port`,
      );
    for (const method of ['HEAD', 'POST', 'PUT'])
      t.equal(
        (await scrape(watcher.metricsPort, { caPem: certs.caPem, token, method })).status,
        404,
        `${method} /metrics`,
      );
    t.equal(await tlsHandshake(watcher.metricsPort, certs.caPem, 'TLSv1.2'), 'TLSv1.2');
    t.match(await tlsHandshake(watcher.metricsPort, certs.caPem, 'TLSv1.1'), /^refused/);
  },
);

t.test('the cache: ten scrapes cost one TokenReview and one SubjectAccessReview, refusals too', async (t) => {
  const [prometheus, stranger] = [await mint('prometheus'), await mint('stranger')];
  let before = await reviewsServed();
  const started = performance.now();
  t.equal((await as(prometheus)).status, 200);
  const firstMs = performance.now() - started;
  t.same(await since(before), { tokenReviews: 1, accessReviews: 1 }, 'a new token: one of each');
  before = await reviewsServed();
  const cachedMs: number[] = [];
  for (let i = 0; i < 10; i++) {
    const s = performance.now();
    t.equal((await as(prometheus)).status, 200);
    cachedMs.push(performance.now() - s);
  }
  t.same(await since(before), { tokenReviews: 0, accessReviews: 0 }, 'ten more scrapes: no API call');
  before = await reviewsServed();
  for (let i = 0; i < 10; i++) t.equal((await as(stranger)).status, 403);
  for (let i = 0; i < 10; i++) t.equal((await as('still-not-a-token')).status, 401);
  t.same(
    await since(before),
    { tokenReviews: 2, accessReviews: 1 },
    'refusals are cached too: twenty refused scrapes, three calls',
  );
  cachedMs.sort((a, b) => a - b);
  t.comment(
    `scrape with a new token ${firstMs.toFixed(1)} ms; cached: median ${cachedMs[5]!.toFixed(1)} ms, max ${cachedMs[9]!.toFixed(1)} ms (each on a new TLS connection)`,
  );
});

t.test('the apiserver unreachable: 503 for a token not yet known, cached tokens still pass', async (t) => {
  const known = await mint('prometheus');
  t.equal((await as(known)).status, 200);
  const unknown = await mint('prometheus');
  await cp.stopApiServer();
  try {
    const started = Date.now();
    const refused = await as(unknown);
    t.equal(refused.status, 503, 'not 200, not a crash');
    t.equal(refused.headers['retry-after'], '5');
    t.ok(Date.now() - started < 6000, `answered in ${Date.now() - started} ms`);
    t.equal((await as(known)).status, 200, 'a token checked before the outage still scrapes');
  } finally {
    await cp.startApiServer();
  }
  let status = 0;
  for (let i = 0; i < 50 && status !== 200; i++) {
    status = (await as(unknown)).status;
    if (status !== 200) await new Promise((r) => setTimeout(r, 200));
  }
  t.equal(status, 200, 'the error was not cached: once the apiserver is back the token passes');
  t.match((await as(known)).body, /^veneer_nodewatcher_metrics_auth_total\{result="error"\} [1-9]/m);
});

t.test(
  'the apiserver silent (a connection dropped without a FIN): 503 within the review deadline, not a hung scrape',
  async (t) => {
    const proxy = new StallProxy(cp.port);
    const client = clientFor(viaPort(cp.userKubeConfig(WATCHER_USER), await proxy.listen()));
    t.teardown(() => proxy.close());
    const auth = new MetricsAuth({ reviews: accessReviews(client), allowTTLMs: 60_000, log: createLogger('silent') });
    t.match(
      await auth.check(`Bearer ${await mint('prometheus')}`),
      { result: 'allowed' },
      'through the proxy, while it passes traffic',
    );
    proxy.stall();
    const started = Date.now();
    t.same(await auth.check(`Bearer ${await mint('prometheus')}`), { result: 'error' });
    const took = Date.now() - started;
    t.ok(
      took >= REVIEW_TIMEOUT_MS - 100 && took < REVIEW_TIMEOUT_MS + 2000,
      `gave up after ${took} ms (deadline ${REVIEW_TIMEOUT_MS} ms)`,
    );
  },
);

t.test('no token ever reaches the log, even at debug', async (t) => {
  tokens.push('not-a-real-token', 'still-not-a-token');
  t.ok(tokens.length >= 10, `${tokens.length} tokens used`);
  for (const token of tokens)
    t.notOk(logged.includes(token) || logged.includes(token.split('.')[2] ?? token), 'token absent');
  t.match(logged, /"msg":"metrics scrape refused"/, 'refusals are logged at debug');
  t.match(logged, /cannot check a metrics scrape with the Kubernetes API/, 'the outage is logged at warn');
});

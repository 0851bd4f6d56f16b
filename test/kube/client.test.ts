// The watcher's own client on a connection that never answers, and how failures read. No
// apiserver is needed to be silent; everything else the client does is tested against the real
// one (reflector.test.ts, node-cache.test.ts, and every watcher test).
import t from 'tap';
import { createServer, type Socket } from 'node:net';
import { ApiError, KubeClient } from '../../src/kube/client.ts';
import { failureKind, httpStatus } from '../../src/kube/failures.ts';

const sockets: Socket[] = [];
let received = '';
const silent = createServer((s) => {
  sockets.push(s);
  s.on('data', (d) => (received += d));
});
await new Promise<void>((r) => silent.listen(0, '127.0.0.1', r));
t.teardown(
  () =>
    new Promise<void>((r) => {
      for (const s of sockets) s.destroy();
      silent.close(() => r());
    }),
);

const tls = { rejectUnauthorized: true };
const client = new KubeClient({
  server: `http://127.0.0.1:${(silent.address() as { port: number }).port}/`,
  tls: () => tls,
  authorization: async () => 'Bearer secret-token',
});
t.teardown(() => client.close());

t.test('a call on a connection that never answers fails at its deadline', async (t) => {
  const start = Date.now();
  const err = await client
    .call('PATCH', '/api/v1/nodes/n', {
      body: { metadata: { labels: { a: 'b' } } },
      contentType: 'application/merge-patch+json',
      timeoutMs: 300,
    })
    .then(
      () => undefined,
      (e: Error) => e,
    );
  const took = Date.now() - start;
  t.ok(err, 'the call failed');
  t.equal(err?.name, 'TimeoutError');
  t.ok(took >= 250 && took < 5000, `after ${took} ms (deadline 300 ms)`);
  t.equal(sockets.length, 1, 'the request did reach the endpoint');
  t.equal(httpStatus(err), undefined, 'no HTTP status');
  t.equal(failureKind(err), 'timeout', 'counted as a timeout');
  t.match(received, /^PATCH \/api\/v1\/nodes\/n HTTP\/1\.1/, 'the path joined to a server URL that ends in a slash');
  t.match(received, /content-type: application\/merge-patch\+json/i, 'with the patch type asked for');
  t.match(received, /authorization: Bearer secret-token/i, 'with the credentials');
});

t.test('failures read as a small fixed set of kinds', async (t) => {
  const answered = (code: number) =>
    new ApiError(code, JSON.stringify({ kind: 'Status', message: 'no', reason: 'Why' }));
  t.equal(httpStatus(answered(409)), 409);
  t.match(answered(409), { message: '409 no', reason: 'Why' });
  t.match(
    new ApiError(502, '<html>bad gateway</html>'),
    { message: '502 <html>bad gateway</html>', reason: undefined },
    'a body that is not a Status is quoted',
  );
  t.same(
    [409, 403, 422, 429, 503, 404, 302].map((c) => failureKind(answered(c))),
    ['conflict', 'forbidden', 'invalid', 'throttled', 'server_error', 'http_4xx', 'http_other'],
  );
  t.equal(failureKind(new TypeError('fetch failed')), 'network');
});

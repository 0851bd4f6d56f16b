// The client's own behaviour on a silent connection, with the real client code: an endpoint
// that accepts TCP and never answers (no apiserver is needed to be silent).
import t from 'tap';
import { createServer, type Socket } from 'node:net';
import * as k8s from '@kubernetes/client-node';
import { failureKind, httpStatus, withDeadline } from '../../src/kube/call-options.ts';

const sockets: Socket[] = [];
let received = '';
const silent = createServer((s) => {
  sockets.push(s);
  s.on('data', (d) => (received += d));
});
await new Promise<void>((r) => silent.listen(0, '127.0.0.1', r));
t.teardown(() => new Promise<void>((r) => { sockets.forEach((s) => s.destroy()); silent.close(() => r()); }));

const kc = new k8s.KubeConfig();
kc.loadFromOptions({
  clusters: [{ name: 'silent', server: `http://127.0.0.1:${(silent.address() as { port: number }).port}`, skipTLSVerify: true }],
  users: [{ name: 'nobody' }],
  contexts: [{ name: 'silent', cluster: 'silent', user: 'nobody' }],
  currentContext: 'silent',
});
const core = kc.makeApiClient(k8s.CoreV1Api);

t.test('a call on a connection that never answers fails at its deadline, keeping its other options', async (t) => {
  const start = Date.now();
  const mergePatch = withDeadline(k8s.setHeaderOptions('Content-Type', k8s.PatchStrategy.MergePatch), 300);
  const err = await core.patchNode({ name: 'n', body: { metadata: { labels: { a: 'b' } } } }, mergePatch).then(() => undefined, (e: Error) => e);
  const took = Date.now() - start;
  t.ok(err, 'the call failed');
  t.match(String(err?.name), /TimeoutError|AbortError/);
  t.ok(took >= 250 && took < 5000, `after ${took} ms (deadline 300 ms)`);
  t.equal(sockets.length, 1, 'the request did reach the endpoint');
  t.equal(httpStatus(err), undefined, 'no HTTP status: the DOMException code is not one');
  t.equal(failureKind(err), 'timeout', 'counted as a timeout');
  t.match(received, /content-type: application\/merge-patch\+json/i, 'with the Content-Type set by the other option');
});

t.test('failures read as a small fixed set of kinds', async (t) => {
  const answered = (code: number) => new k8s.ApiException(code, 'failed', {}, {});
  t.equal(httpStatus(answered(409)), 409);
  t.same([409, 403, 422, 429, 503, 404, 302].map((c) => failureKind(answered(c))), ['conflict', 'forbidden', 'invalid', 'throttled', 'server_error', 'http_4xx', 'http_other']);
  t.equal(failureKind(new TypeError('fetch failed')), 'network');
});

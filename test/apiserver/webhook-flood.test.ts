// A flood of the largest reviews the webhook accepts, all at once, against the watcher as its own
// process (the image's runtime flags, the compiled CLI when built): each is answered, allowed or
// 429 (the apiserver fails open on it), and the process's peak resident memory stays under the
// chart's memory limit. Without the in-flight cap every body is read and parsed at once.
import { existsSync, readFileSync } from 'node:fs';
import { request } from 'node:https';
import t from 'tap';
import { MAX_IN_FLIGHT } from '../../src/admission/server.ts';
import { COMPILED_CLI, SOURCE_CLI, spawnServe, waitReady } from '../../kit/fleet.ts';
import { startClusterEnv, WATCHER_USER } from '../../kit/watcher-env.ts';

const LIMIT_MIB = 640; // the chart's resources.limits.memory
const REVIEWS = 150;

const env = await startClusterEnv();
t.teardown(() => env.cp.stop());
const cli = existsSync(COMPILED_CLI) ? COMPILED_CLI : SOURCE_CLI;
const watcher = await spawnServe(env.cp, env.certs, WATCHER_USER, { '--leader-election-enabled': 'false' }, [], cli);
t.teardown(() => {
  watcher.child.kill('SIGKILL');
});
await waitReady(watcher.healthPort, '/healthz');

/** The kernel's high-water mark of the process's resident memory, in MiB. */
const peakMiB = () =>
  Number(/^VmHWM:\s+(\d+) kB$/m.exec(readFileSync(`/proc/${watcher.child.pid}/status`, 'utf8'))?.[1]) / 1024;

/** An UPDATE review near the 7 MiB the webhook accepts: a node of ~3.3 MiB, twice. */
function largestReview(): Buffer {
  const node = {
    metadata: {
      name: 'ip-10-0-99-1',
      labels: { 'karpenter.sh/nodepool': 'default', 'karpenter.sh/capacity-type': 'on-demand' },
      annotations: { 'example.com/blob': 'x'.repeat(3_450_000) },
    },
  };
  return Buffer.from(
    JSON.stringify({
      apiVersion: 'admission.k8s.io/v1',
      kind: 'AdmissionReview',
      request: {
        uid: 'flood',
        kind: { group: '', version: 'v1', kind: 'Node' },
        operation: 'UPDATE',
        object: node,
        oldObject: node,
      },
    }),
  );
}

const post = (body: Buffer) =>
  new Promise<number>((resolve) => {
    const req = request(
      {
        host: '127.0.0.1',
        port: watcher.webhookPort,
        path: '/mutate-node',
        method: 'POST',
        ca: env.certs.caPem,
        headers: { 'content-type': 'application/json', 'content-length': body.length },
        agent: false,
      },
      (res) => {
        res.resume();
        res.on('end', () => resolve(res.statusCode ?? 0));
      },
    );
    // A 429 is sent before the body is read; the server may close before all of it is written.
    req.on('error', () => resolve(-1));
    req.end(body);
  });

t.test(`${REVIEWS} reviews of 7 MiB at once: each answered, and the peak RSS under ${LIMIT_MIB} MiB`, async (t) => {
  const body = largestReview();
  t.ok(body.length > 6.5 * 1024 * 1024, `a review of ${(body.length / 1024 / 1024).toFixed(1)} MiB`);
  const before = peakMiB();
  const started = Date.now();
  const statuses = await Promise.all(Array.from({ length: REVIEWS }, () => post(body)));
  const peak = peakMiB();
  const count = (s: number) => statuses.filter((x) => x === s).length;
  t.comment(
    `${count(200)} allowed, ${count(429)} answered 429, ${count(-1)} cut while sending, in ${Date.now() - started} ms; peak RSS ${before.toFixed(0)} MiB before, ${peak.toFixed(0)} MiB after`,
  );
  t.same(
    statuses.filter((s) => s !== 200 && s !== 429 && s !== -1),
    [],
    'nothing but allowed or 429 (or a body cut short once its 429 was sent)',
  );
  t.ok(count(200) >= 1, 'reviews within the cap are answered');
  t.ok(count(429) + count(-1) >= REVIEWS - MAX_IN_FLIGHT, 'the rest are refused before their body is read');
  t.ok(peak < LIMIT_MIB, `peak RSS ${peak.toFixed(0)} MiB < ${LIMIT_MIB} MiB`);
  const healthy = await fetch(`http://127.0.0.1:${watcher.healthPort}/healthz`);
  t.equal(healthy.status, 200, 'and the process lives on');
});

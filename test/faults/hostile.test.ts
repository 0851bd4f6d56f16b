// Hostile input that is not a malformed body: clients that dribble, overlays built to be
// expensive or awkward, node labels that look like ours, and a key file that must never reach
// the log. A real `serve` process, registered with the real apiserver.
import t from 'tap';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { connect, type TLSSocket } from 'node:tls';
import { request } from 'node:https';
import { issueCert } from '../../kit/pki.ts';
import { counter, Fleet, metricsOf, OVERLAY_API, sleep, spawnServe, until, waitReady } from '../../kit/fleet.ts';
import {
  registerWebhooksAt,
  startClusterEnv,
  WATCHER_AUDIT_POLICY,
  WATCHER_USER,
  writeFileAtomic,
} from '../../kit/watcher-env.ts';
import { isValidLabelValue, toLabelValue } from '../../src/engine/labels.ts';
import { nodeReview } from '../support/reviews.ts';

const env = await startClusterEnv({ auditPolicy: WATCHER_AUDIT_POLICY });
t.teardown(() => env.cp.stop());
const { admin, cp, certs } = env;
const fleet = new Fleet(cp, admin);
await fleet.createOverlays();
// The replica logs at debug, the most it ever says, for the key check at the end.
const replica = await spawnServe(cp, certs, WATCHER_USER, {
  '--log-level': 'debug',
  '--leader-election-enabled': 'false',
});
t.teardown(() => void replica.child.kill('SIGKILL'));
await waitReady(replica.healthPort);
t.teardown(await registerWebhooksAt(admin, { caPem: certs.caPem, port: replica.webhookPort }));

const figures: string[] = [];
t.teardown(() => console.error(`hostile figures:\n  ${figures.join('\n  ')}`));

function review(uid: string): string {
  return nodeReview(uid, { labels: { 'karpenter.sh/nodepool': 'default' } });
}

function postReview(uid: string): Promise<{ status: number; ms: number }> {
  const start = performance.now();
  return new Promise((resolve, reject) => {
    const req = request(
      {
        host: '127.0.0.1',
        port: replica.webhookPort,
        path: '/mutate-node',
        method: 'POST',
        ca: certs.caPem,
        agent: false,
        headers: { 'content-type': 'application/json' },
      },
      (res) => {
        res.resume();
        res.on('end', () => resolve({ status: res.statusCode ?? 0, ms: performance.now() - start }));
      },
    );
    req.on('error', reject);
    req.end(review(uid));
  });
}

/** A TLS client that sends `head` and then one byte per second of `dribble`, never finishing. */
function slowClient(head: string, dribble: string): Promise<{ closedAfterMs: number }> {
  return new Promise((resolve) => {
    const start = Date.now();
    const socket: TLSSocket = connect({ host: '127.0.0.1', port: replica.webhookPort, ca: certs.caPem }, () => {
      socket.write(head);
      let i = 0;
      const timer = setInterval(() => {
        if (!socket.destroyed) socket.write(dribble[i++ % dribble.length]!);
      }, 1000);
      socket.on('close', () => {
        clearInterval(timer);
        resolve({ closedAfterMs: Date.now() - start });
      });
    });
    socket.on('error', () => {});
    socket.resume();
  });
}

t.test("slow clients are cut off by the server's timeouts and cannot crowd out the apiserver", async (t) => {
  const headers = 'POST /mutate-node HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n';
  const body = review('slow');
  const clients = [
    ...Array.from({ length: 50 }, () => slowClient(headers, `X-Slow: ${'a'.repeat(100)}`)),
    ...Array.from({ length: 50 }, () => slowClient(`${headers}Content-Length: ${body.length}\r\n\r\n`, body)),
  ];
  await sleep(2000);
  const during = await Promise.all(Array.from({ length: 20 }, (_, i) => postReview(`during-${i}`)));
  t.ok(
    during.every((r) => r.status === 200),
    'with 100 slow clients connected, reviews are still answered',
  );
  const slowestDuring = Math.round(Math.max(...during.map((r) => r.ms)));
  const closed = (await Promise.all(clients)).map((c) => c.closedAfterMs);
  const [headersCut, bodyCut] = [Math.max(...closed.slice(0, 50)), Math.max(...closed.slice(50))];
  // Headers get 5 s and the whole request 10 s; the server checks every second.
  t.ok(headersCut <= 8_000, `clients dribbling headers were cut off, the last after ${headersCut} ms`);
  t.ok(bodyCut <= 13_000, `clients dribbling a body were cut off, the last after ${bodyCut} ms`);
  figures.push(
    `slow clients: 50 dribbling headers cut within ${headersCut} ms, 50 dribbling bodies within ${bodyCut} ms; 20 reviews meanwhile, slowest ${slowestDuring} ms`,
  );
});

t.test('hostile overlays: a 253-character name, 20,000 values, 100 requirements with odd keys', async (t) => {
  const name = `cost-aware-${'x'.repeat(253 - 'cost-aware-'.length)}`;
  const types = Array.from({ length: 20_000 }, (_, i) => `z${i}.metal`);
  types.push('m6i.hostile');
  const odd = Array.from({ length: 98 }, (_, i) => ({
    key: `a-${i}.example.com/Odd_key.${i}-x`,
    operator: 'DoesNotExist',
  }));
  const body = {
    apiVersion: 'karpenter.sh/v1alpha1',
    kind: 'NodeOverlay',
    metadata: {
      name,
      labels: {
        'app.kubernetes.io/managed-by': 'veneer',
        'veneer.io/capacity-type': 'reserved-instance',
        'veneer.io/instance-type': 'm6i.hostile',
      },
    },
    spec: {
      weight: 10000,
      priceAdjustment: '-50%',
      requirements: [
        { key: 'karpenter.sh/capacity-type', operator: 'In', values: ['on-demand'] },
        { key: 'node.kubernetes.io/instance-type', operator: 'In', values: types },
        ...odd,
      ],
    },
  };
  await fleet.sim.custom.createClusterCustomObject({ ...OVERLAY_API, body });
  await sleep(1100); // timestamps have one-second precision
  const { registered } = await fleet.sim.launch({
    name: 'hostile-0',
    claimName: 'hostile-claim-0',
    instanceType: 'm6i.hostile',
  });
  const labels = registered.metadata?.labels ?? {};
  const recorded = labels['veneer.io/matching-overlay'] ?? '';
  t.equal(recorded, toLabelValue(name), 'the record names it, shortened with a hash');
  t.ok(isValidLabelValue(recorded) && recorded.length === 63, `a valid 63-character label value: ${recorded}`);
  const story = JSON.parse(registered.metadata?.annotations?.['veneer.io/overlay-decision'] ?? '{}') as {
    overlay?: string;
    decidedBy?: string;
  };
  t.equal(story.overlay, name, 'the annotation keeps the full name');
  t.equal(story.decidedBy, 'webhook', "decided inline, inside the webhook's deadline");
  const plain = (await fleet.sim.launch({ name: 'hostile-1', claimName: 'hostile-claim-1', instanceType: 'm5.xlarge' }))
    .registered;
  t.equal(
    plain.metadata?.labels?.['veneer.io/matching-overlay'],
    'cost-aware-ri-m5.xlarge-us-west-2',
    'other nodes are unaffected',
  );
  const metrics = await metricsOf(replica.metricsPort);
  t.equal(
    counter(metrics, 'veneer_nodewatcher_admission_requests_total', { outcome: 'deadline' }),
    0,
    'no review ran out of time',
  );
});

t.test('hostile node labels: lookalike keys and 63-character values are never overwritten', async (t) => {
  const theirs = {
    'veneer.io.evil/overlay-influenced': 'forged',
    'sub.veneer.io/matching-overlay': 'forged',
    'example.com/veneer.io-overlay-influenced': 'x',
    'karpenter.sh/nodepool': 'p'.repeat(63),
    'team.example.com/owner': 'o'.repeat(63),
  };
  const { registered } = await fleet.sim.launch({
    name: 'lookalike-0',
    claimName: 'lookalike-claim-0',
    instanceType: 'm5.xlarge',
    extraLabels: { ...theirs, 'veneer.io/team': 'payments' },
  });
  const labels = registered.metadata?.labels ?? {};
  t.equal(labels['veneer.io/overlay-influenced'], 'true', 'recorded');
  for (const [k, v] of Object.entries(theirs)) t.equal(labels[k], v, `${k} untouched`);
  t.notOk(
    'veneer.io/team' in labels,
    "a key of the watcher's label namespace it did not write is no record: gone with the decision, as NFD owns its namespace",
  );
  // A node that arrives carrying our key (a NodePool template's: the kubelet's --node-labels at
  // CREATE, the NodeClaim's labels again at registration): no record of the watcher's, so the
  // decision replaces it at CREATE, and the registration that copies it again gets the record back.
  await fleet.sim.launch({
    name: 'prelabeled-0',
    claimName: 'prelabeled-claim-0',
    instanceType: 'm5.xlarge',
    extraLabels: { 'veneer.io/overlay-influenced': 'false' },
  });
  const node = await fleet.core.readNode({ name: 'prelabeled-0' });
  t.match(
    node.metadata?.labels,
    { 'veneer.io/overlay-influenced': 'true', 'veneer.io/matching-overlay': 'cost-aware-ri-m5.xlarge-us-west-2' },
    "the watcher's decision, not the value someone else set",
  );
  t.equal(fleet.watcherWrites('prelabeled', [WATCHER_USER]).size, 0, 'written inline, no PATCH of the watcher');
});

t.test('the serving key never reaches the log, even at debug and when a rotation goes wrong', async (t) => {
  const next = await issueCert(certs.ca, join(cp.dir, 'logged'), 'serving', {
    commonName: 'veneer-node-watcher',
    usage: 'server',
    ipAddresses: ['127.0.0.1'],
  });
  const keys = [readFileSync(certs.serving.keyPath, 'utf8'), readFileSync(next.keyPath, 'utf8')];
  // A mismatched pair, then a truncated key, then the good pair: each failure is logged.
  writeFileAtomic(certs.serving.keyPath, keys[1]!);
  await sleep(500);
  writeFileSync(certs.serving.keyPath, keys[1]!.slice(0, 120));
  await sleep(500);
  writeFileAtomic(certs.serving.certPath, readFileSync(next.certPath, 'utf8'));
  writeFileAtomic(certs.serving.keyPath, keys[1]!);
  await until(
    'the new pair is served',
    async () =>
      counter(await metricsOf(replica.metricsPort), 'veneer_nodewatcher_cert_reloads_total', { result: 'success' }) >=
      1,
    15_000,
  );
  await postReview('after-rotation');
  const log = replica.output();
  t.match(log, /serving certificate not reloaded; keeping the current one/, 'the failed reloads were logged');
  t.notMatch(log, /PRIVATE KEY/, 'no PEM key block');
  const keyLines = keys.flatMap((k) => k.split('\n').filter((l) => l.length >= 16 && !l.startsWith('-----')));
  t.same(
    keyLines.filter((l) => log.includes(l)),
    [],
    'no line of key material, old or new',
  );
});

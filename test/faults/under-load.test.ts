// Operations that happen to every running Deployment, done while nodes keep launching: the
// leader dies, the certificate is rotated the way the kubelet updates a Secret volume, and a
// replica is told to stop (SIGTERM). None of them may cost a record, a review or a handshake.
import t from 'tap';
import { request } from 'node:https';
import { connect, type TLSSocket } from 'node:tls';
import { join } from 'node:path';
import { issueCert } from '../../kit/pki.ts';
import { SecretVolume, tlsFiles } from '../support/secret-volume.ts';
import { counter, Fleet, metricsOf, sleep, spawnServe, until, waitReady } from '../../kit/fleet.ts';
import { registerWebhooksAt, startClusterEnv, WATCHER_AUDIT_POLICY } from '../../kit/watcher-env.ts';
import { nodeReview } from '../support/reviews.ts';

const REPLICAS = ['veneer-watcher-a', 'veneer-watcher-b'];
const LEASE_MS = 3000;
const RETRY_MS = 500;

const env = await startClusterEnv({ auditPolicy: WATCHER_AUDIT_POLICY, extraWatchers: REPLICAS });
t.teardown(() => env.cp.stop());
const { admin, cp, certs } = env;
const fleet = new Fleet(cp, admin);
await fleet.createOverlays();

const figures: string[] = [];
t.teardown(() => console.error(`under-load figures:\n  ${figures.join('\n  ')}`));

const leads = async (port: number) => /^veneer_nodewatcher_leader 1$/m.test(await metricsOf(port));

t.test('leader failover under load: the gap is bounded by the lease, no node written twice', async (t) => {
  const a = await spawnServe(cp, certs, REPLICAS[0]!);
  t.teardown(() => void a.child.kill('SIGKILL'));
  await until('a leads', () => leads(a.metricsPort), 30_000);
  const b = await spawnServe(cp, certs, REPLICAS[1]!);
  t.teardown(() => void b.child.kill('SIGKILL'));
  await waitReady(b.healthPort);
  const load = fleet.steady('failover');
  await sleep(3000);
  a.child.kill('SIGKILL');
  const killedAt = Date.now();
  await until('b leads', () => leads(b.metricsPort), 15_000);
  const ledAfter = Date.now() - killedAt;
  await sleep(3000);
  const launched = await load.stop();
  await until(`${launched} records`, () => fleet.allRecorded('failover', launched), 30_000);
  t.same(await fleet.wrongRecords('failover'), [], 'every record names the overlay Karpenter would have applied');
  // a's write cut short by its SIGKILL is audited 504 and may still have been applied (nothing-lost.test.ts says why it counts).
  t.equal(fleet.watcherWrites('failover', REPLICAS, true).size, launched, 'every node written');
  const writes = fleet.watcherWrites('failover', REPLICAS);
  t.same(
    [...writes].filter(([, w]) => w.length > 1).map(([n]) => n),
    [],
    'no node written twice, by either replica',
  );
  const all = [...writes.values()].flat().sort((x, y) => x.at - y.at);
  const lastByA = Math.max(...all.filter((w) => w.user === REPLICAS[0]).map((w) => w.at));
  const firstByB = Math.min(...all.filter((w) => w.user === REPLICAS[1]).map((w) => w.at));
  t.ok(lastByA < firstByB, 'the replicas never wrote at the same time');
  t.ok(all.filter((w) => w.user === REPLICAS[0]).length > 0, 'a wrote before the kill');
  const gap = firstByB - lastByA;
  const fromKill = firstByB - killedAt;
  // The lease must expire (at most LEASE_MS after a's last renewal), b notices at its next retry,
  // then a write goes through an apiserver that is busy with the launches.
  t.ok(
    fromKill <= LEASE_MS + RETRY_MS + 2000,
    `b led ${ledAfter} ms and wrote ${fromKill} ms after a was killed (lease ${LEASE_MS} ms, retry ${RETRY_MS} ms)`,
  );
  figures.push(
    `failover: ${launched} nodes launched; b led ${ledAfter} ms and first wrote ${fromKill} ms after a was SIGKILLed; write gap ${gap} ms; 0 double writes`,
  );
  b.child.kill('SIGTERM');
  t.equal(await b.exited, 0, 'b stops cleanly on SIGTERM');
});

interface Reviewed {
  ok: number;
  refused: number;
  failures: string[];
  fingerprints: Set<string>;
}

/**
 * Reviews from `concurrency` clients, each on a new TLS connection (every one a handshake), until
 * `stop()` or until `sending()` turns false, as the endpoints controller stops routing to a
 * replica that is not ready. A refused connection or a 503 is a replica gone, not a failure.
 */
function reviewsOnNewConnections(
  port: number,
  concurrency = 4,
  sending: () => boolean = () => true,
): { stop(): Promise<Reviewed> } {
  const result: Reviewed = { ok: 0, refused: 0, failures: [], fingerprints: new Set() };
  let running = true;
  const one = (uid: string) =>
    new Promise<void>((resolve) => {
      const body = nodeReview(uid, {
        labels: { 'karpenter.sh/nodepool': 'default', 'karpenter.sh/capacity-type': 'on-demand' },
      });
      const req = request(
        {
          host: '127.0.0.1',
          port,
          path: '/mutate-node',
          method: 'POST',
          ca: certs.caPem,
          agent: false,
          headers: { 'content-type': 'application/json' },
        },
        (res) => {
          result.fingerprints.add((res.socket as TLSSocket).getPeerCertificate().fingerprint256);
          let data = '';
          res.on('data', (c) => (data += c));
          res.on('end', () => {
            if (res.statusCode === 200 && JSON.parse(data).response?.uid === uid) result.ok++;
            else if (res.statusCode === 503) result.refused++;
            else result.failures.push(`${res.statusCode} ${data.slice(0, 80)}`);
            resolve();
          });
        },
      );
      req.on('error', (e: NodeJS.ErrnoException) => {
        if (e.code === 'ECONNREFUSED') result.refused++;
        else result.failures.push(e.code ?? e.message);
        resolve();
      });
      req.end(body);
    });
  const workers = Array.from({ length: concurrency }, async (_, w) => {
    for (let i = 0; running && sending(); i++) await one(`w${w}-${i}`);
  });
  return {
    stop: async () => {
      running = false;
      await Promise.all(workers);
      return result;
    },
  };
}

t.test('certificate rotation under load: no failed handshake, no failed review, no restart', async (t) => {
  const volume = new SecretVolume(join(cp.dir, 'secret-volume'));
  volume.write(tlsFiles(certs.serving));
  const replica = await spawnServe(cp, certs, REPLICAS[0]!, {
    '--webhook-cert-file': volume.path('tls.crt'),
    '--webhook-key-file': volume.path('tls.key'),
    '--leader-election-enabled': 'false',
  });
  t.teardown(() => void replica.child.kill('SIGKILL'));
  await waitReady(replica.healthPort);
  t.teardown(await registerWebhooksAt(admin, { caPem: certs.caPem, port: replica.webhookPort }));
  const failOpens = async () =>
    counter((await cp.get('/metrics')).body, 'apiserver_admission_webhook_fail_open_count', {});
  const failOpensBefore = await failOpens();
  const reloadsBefore = counter(await metricsOf(replica.metricsPort), 'veneer_nodewatcher_cert_reloads_total', {
    result: 'success',
  });
  const clients = reviewsOnNewConnections(replica.webhookPort);
  const load = fleet.steady('rotation', 2);
  const rotations = 5;
  for (let i = 0; i < rotations; i++) {
    await sleep(600);
    volume.write(
      tlsFiles(
        await issueCert(certs.ca, join(cp.dir, `rotation-${i}`), 'serving', {
          commonName: 'veneer-node-watcher',
          usage: 'server',
          ipAddresses: ['127.0.0.1'],
          days: 30,
        }),
      ),
    );
  }
  await sleep(1000);
  const [reviewed, launched] = [await clients.stop(), await load.stop()];
  t.same(reviewed.failures, [], `${reviewed.ok} reviews, each on a new TLS connection: none failed`);
  t.ok(reviewed.fingerprints.size >= 3, `clients saw ${reviewed.fingerprints.size} certificates in turn`);
  const reloads =
    counter(await metricsOf(replica.metricsPort), 'veneer_nodewatcher_cert_reloads_total', { result: 'success' }) -
    reloadsBefore;
  t.equal(reloads, rotations, `${reloads} reloads, one per rotation`);
  t.equal(await failOpens(), failOpensBefore, 'the apiserver never failed to call the webhook');
  t.equal((await fleet.labels('rotation')).size, launched, 'every launch created its node');
  t.same(
    await fleet.wrongRecords('rotation'),
    [],
    `all ${launched} nodes launched during the rotations recorded rightly`,
  );
  t.same(
    [...(await fleet.decidedBy('rotation')).values()].filter((by) => by !== 'webhook'),
    [],
    'every one inline, by the webhook',
  );
  t.equal(replica.child.exitCode, null, 'the same process throughout: no restart');
  figures.push(
    `rotation: ${rotations} rotations in ${rotations * 0.6 + 1} s; ${reviewed.ok} reviews on new connections, 0 failed; ${launched} nodes recorded inline; ${reviewed.fingerprints.size} certificates seen`,
  );
});

t.test('SIGTERM under load: readiness off at once, every in-flight review answered, prompt exit', async (t) => {
  const replica = await spawnServe(cp, certs, REPLICAS[1]!, {
    '--leader-election-enabled': 'false',
    '--shutdown-delay': '1s',
  });
  t.teardown(() => void replica.child.kill('SIGKILL'));
  await waitReady(replica.healthPort);
  let notReadyAt = 0;
  const poller = (async () => {
    while (!notReadyAt) {
      const status = await fetch(`http://127.0.0.1:${replica.healthPort}/readyz`).then(
        (r) => r.status,
        () => 0,
      );
      if (status !== 200) notReadyAt = Date.now();
      await sleep(50);
    }
  })();
  const clients = reviewsOnNewConnections(replica.webhookPort, 8, () => notReadyAt === 0);
  // A connection opened and never used, as the apiserver dials spares: it must not hold the exit.
  const spare = connect({ host: '127.0.0.1', port: replica.webhookPort, ca: certs.caPem });
  spare.on('error', () => {});
  t.teardown(() => void spare.destroy());
  await sleep(500);
  const signalledAt = Date.now();
  replica.child.kill('SIGTERM');
  const code = await replica.exited;
  const tookMs = Date.now() - signalledAt;
  const [reviewed] = await Promise.all([clients.stop(), poller]);
  t.ok(notReadyAt - signalledAt < 500, `readiness failed ${notReadyAt - signalledAt} ms after the signal`);
  t.equal(code, 0, 'exit code 0');
  t.ok(
    tookMs >= 1000 && tookMs < 6000,
    `exited ${tookMs} ms after SIGTERM (shutdown delay 1 s, unused connections cut after 3 s of draining)`,
  );
  t.ok(reviewed.ok >= 10, `${reviewed.ok} reviews answered before and during shutdown`);
  t.same(reviewed.failures, [], 'no review was cut or failed');
  t.match(replica.output(), /shutting down: readiness off, draining in-flight reviews/);
  figures.push(
    `SIGTERM: readiness off after ${notReadyAt - signalledAt} ms, exit after ${tookMs} ms; ${reviewed.ok} reviews answered, ${reviewed.refused} refused after readiness failed, 0 cut`,
  );
});

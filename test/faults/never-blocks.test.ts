// The first promise: installing the watcher can never stop a node from joining. During bursts
// of Karpenter launches the webhook is killed, hangs, answers garbage, or presents a certificate
// the apiserver must refuse. Every request succeeds inside the webhook's timeoutSeconds, and the
// reconciler (another replica, as in a real Deployment) records every node afterwards.
import t, { type Test } from 'tap';
import { join } from 'node:path';
import * as k8s from '@kubernetes/client-node';
import { makeCA, issueCert } from '../../kit/pki.ts';
import { FaultServer, UNTRUSTED_VALUE, type Fault } from '../support/fault-server.ts';
import { counter, Fleet, metricsOf, spawnServe, until, waitReady } from '../../kit/fleet.ts';
import { launchWatcher, startClusterEnv, WATCHER_AUDIT_POLICY, WATCHER_USER } from '../../kit/watcher-env.ts';
import { mutatingWebhookConfiguration } from '../../kit/webhook-registration.ts';

const TIMEOUT_SECONDS = 2;
// The webhook call is capped by timeoutSeconds; the rest of a request is the apiserver's and
// etcd's own work, on a shared two-core machine.
const BOUND_MS = TIMEOUT_SECONDS * 1000 + 1000;
const BURST = 24;
const RECORDED_WITHIN_MS = 30_000;

const env = await startClusterEnv({ auditPolicy: WATCHER_AUDIT_POLICY, extraWatchers: ['veneer-watcher-a'] });
t.teardown(() => env.cp.stop());
const { admin, cp, certs } = env;
const fleet = new Fleet(cp, admin);
await fleet.createOverlays();
const admission = admin.makeApiClient(k8s.AdmissionregistrationV1Api);

// The reconciler replica: the leader, whose own webhook the apiserver never calls here.
const reconciler = await launchWatcher(cp, certs, WATCHER_USER);
t.teardown(() => reconciler.watcher.stop());
await until('leadership', () => reconciler.watcher.metrics.leader.get().then((m) => m.values[0]?.value === 1));

/** The mutating webhook, as the chart registers it, pointed at `port`. */
async function pointWebhooksAt(port: number): Promise<void> {
  const reg = {
    name: 'veneer-node-watcher',
    caBundle: certs.caPem,
    url: `https://127.0.0.1:${port}`,
    labelNamespace: 'veneer.io',
    timeoutSeconds: TIMEOUT_SECONDS,
  };
  const mutating = mutatingWebhookConfiguration(reg);
  try {
    const old = await admission.readMutatingWebhookConfiguration({ name: reg.name });
    await admission.replaceMutatingWebhookConfiguration({
      name: reg.name,
      body: { ...mutating, metadata: { ...mutating.metadata, resourceVersion: old.metadata?.resourceVersion } },
    });
  } catch (err) {
    if ((err as { code?: number }).code !== 404) throw err;
    await admission.createMutatingWebhookConfiguration({ body: mutating });
  }
}

/** Dry-run creates until the new target is called: the configuration is then in force. */
async function probeUntilCalled(calls: () => Promise<number> | number): Promise<void> {
  const before = await calls();
  await until(
    'the apiserver calls the new webhook target',
    async () => {
      await fleet.core.createNode({
        body: {
          metadata: {
            name: 'probe',
            labels: { 'karpenter.sh/nodepool': 'probe', 'karpenter.sh/capacity-type': 'on-demand' },
          },
        },
        dryRun: 'All',
      });
      return (await calls()) > before;
    },
    30_000,
  );
}

const failOpens = async () =>
  counter((await cp.get('/metrics')).body, 'apiserver_admission_webhook_fail_open_count', {
    name: 'record.nodes.veneer.io',
  });

/**
 * Launches `count` nodes, `concurrency` at a time, timing each request that passes admission
 * (the kubelet's CREATE and Karpenter's registration update). `onDone` sees the running count.
 */
async function timedBurst(
  prefix: string,
  count: number,
  onDone: (done: number) => void = () => {},
  concurrency = 8,
): Promise<number[]> {
  const took: number[] = [];
  let next = 0;
  let done = 0;
  const timed = async (fn: () => Promise<unknown>) => {
    const start = performance.now();
    await fn();
    took.push(performance.now() - start);
  };
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (next < count) {
        const shape = fleet.shape(prefix, next++);
        await fleet.sim.createNodeClaim(shape);
        await timed(() => fleet.sim.kubeletCreate(shape));
        await timed(() => fleet.sim.register(shape));
        onDone(++done);
      }
    }),
  );
  return took;
}

/** After the fault: every node recorded, rightly, and never twice. */
async function everyNodeRecordedOnce(t: Test, prefix: string): Promise<number> {
  const start = Date.now();
  await until(`${BURST} ${prefix} records`, () => fleet.allRecorded(prefix, BURST), RECORDED_WITHIN_MS);
  const recordedAfter = Date.now() - start;
  t.same(await fleet.wrongRecords(prefix), [], 'every record names the overlay Karpenter would have applied');
  const writes = fleet.watcherWrites(prefix, [WATCHER_USER, 'veneer-watcher-a']);
  t.same(
    [...writes].filter(([, w]) => w.length > 1).map(([n]) => n),
    [],
    'no node recorded twice',
  );
  const inline = [...(await fleet.labels(prefix)).keys()].filter((n) => !writes.has(n)).length;
  t.equal(
    inline + writes.size,
    BURST,
    'each node recorded exactly once: inline by the webhook or by one reconciler write',
  );
  return recordedAfter;
}

const figures: string[] = [];
t.teardown(() => console.error(`never-blocks figures:\n  ${figures.join('\n  ')}`));

t.test('the webhook process is SIGKILLed in the middle of a burst', async (t) => {
  const replica = await spawnServe(cp, certs, 'veneer-watcher-a');
  t.teardown(() => void replica.child.kill('SIGKILL'));
  await waitReady(replica.healthPort);
  await pointWebhooksAt(replica.webhookPort);
  const reviews = async () =>
    counter(await metricsOf(replica.metricsPort), 'veneer_nodewatcher_admission_requests_total', { webhook: 'mutate' });
  await probeUntilCalled(reviews);
  const failOpensBefore = await failOpens();
  let killedAt = 0;
  const took = await timedBurst('kill', BURST, (done) => {
    if (done === BURST / 3 && !killedAt) {
      replica.child.kill('SIGKILL');
      killedAt = Date.now();
    }
  });
  t.ok(killedAt > 0, 'killed mid-burst');
  t.ok(Math.max(...took) < BOUND_MS, `slowest request ${Math.round(Math.max(...took))} ms (bound ${BOUND_MS} ms)`);
  t.ok((await failOpens()) > failOpensBefore, 'after the kill the apiserver called the dead webhook and failed open');
  const after = await everyNodeRecordedOnce(t, 'kill');
  const inline = [...(await fleet.labels('kill')).keys()].filter(
    (n) => !fleet.watcherWrites('kill', [WATCHER_USER]).has(n),
  ).length;
  t.ok(inline > 0, `${inline} nodes were recorded inline before the kill`);
  figures.push(
    `SIGKILL: slowest request ${Math.round(Math.max(...took))} ms; ${inline}/${BURST} inline; all recorded ${after} ms after the burst`,
  );
});

const faults: [string, Fault, () => Promise<{ certPath: string; keyPath: string }>][] = [
  ['accepts connections and never answers', 'hang', async () => certs.serving],
  ['answers garbage (not JSON, truncated, wrong uid, bad patch, 500, HTML)', 'garbage', async () => certs.serving],
  [
    'presents an expired certificate',
    'certificate',
    () =>
      issueCert(certs.ca, join(cp.dir, 'expired'), 'expired', {
        commonName: 'veneer-node-watcher',
        usage: 'server',
        ipAddresses: ['127.0.0.1'],
        days: -1,
      }),
  ],
  [
    'presents a certificate signed by another CA',
    'certificate',
    async () => {
      const foreign = await makeCA(join(cp.dir, 'foreign-ca'), 'someone else');
      return issueCert(foreign, join(cp.dir, 'foreign-ca'), 'serving', {
        commonName: 'veneer-node-watcher',
        usage: 'server',
        ipAddresses: ['127.0.0.1'],
      });
    },
  ],
];

for (const [i, [what, fault, certificate]] of faults.entries()) {
  t.test(`the webhook ${what}`, async (t) => {
    const server = new FaultServer(fault);
    t.teardown(() => server.close());
    await pointWebhooksAt(await server.listen(await certificate()));
    await probeUntilCalled(() => server.calls);
    const failOpensBefore = await failOpens();
    const prefix = `fault${i}`;
    const took = await timedBurst(prefix, BURST);
    const slowest = Math.round(Math.max(...took));
    t.ok(slowest < BOUND_MS, `slowest request ${slowest} ms (bound ${BOUND_MS} ms)`);
    t.ok((await failOpens()) - failOpensBefore >= BURST, 'every CREATE called the webhook and failed open');
    const labels = await fleet.labels(prefix);
    t.notOk(
      [...labels.values()].some((l) => l['veneer.io/overlay-influenced'] === UNTRUSTED_VALUE),
      'nothing the faulty endpoint sent reached a node',
    );
    const after = await everyNodeRecordedOnce(t, prefix);
    figures.push(`${fault} (${what}): slowest request ${slowest} ms; all recorded ${after} ms after the burst`);
  });
}

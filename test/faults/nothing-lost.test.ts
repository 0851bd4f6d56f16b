// The second promise: every on-demand Karpenter node ends with a true record, whatever happens
// to the watcher or the control plane in the middle of a burst. No webhook is registered here,
// so every record is the reconciler's; the audit log proves no node is ever written twice.
import t, { type Test } from 'tap';
import { Fleet, metricsOf, sleep, spawnServe, until, waitReady } from '../../kit/fleet.ts';
import { StallProxy } from '../support/stall-proxy.ts';
import { HTTP2_PING_INTERVAL_MS } from '../../src/kube/client.ts';
import { launchWatcher, startClusterEnv, WATCHER_AUDIT_POLICY, WATCHER_USER } from '../../kit/watcher-env.ts';

/** The bound this suite holds the watcher to: every node recorded this long after recovery. */
const RECORDED_WITHIN_MS = 30_000;
const BURST = 30;

const env = await startClusterEnv({ auditPolicy: WATCHER_AUDIT_POLICY });
t.teardown(() => env.cp.stop());
const { admin, cp, certs } = env;
const fleet = new Fleet(cp, admin);
await fleet.createOverlays();

const figures: string[] = [];
t.teardown(() => console.error(`nothing-lost figures:\n  ${figures.join('\n  ')}`));

/** After recovery: every node recorded in time, rightly, by exactly one write. */
async function everyNodeRecordedOnce(t: Test, prefix: string, recoveredAt: number): Promise<number> {
  await until(`${BURST} ${prefix} records`, () => fleet.allRecorded(prefix, BURST), RECORDED_WITHIN_MS).catch(
    async (err) => {
      const unrecorded = [...(await fleet.labels(prefix))]
        .filter(([, l]) => !l['veneer.io/overlay-influenced'])
        .map(([n]) => n);
      t.comment(`unrecorded: ${unrecorded.join(', ')}`);
      throw err;
    },
  );
  const took = Date.now() - recoveredAt;
  t.same(await fleet.wrongRecords(prefix), [], 'every record names the overlay Karpenter would have applied');
  // The apiserver logs a request's ResponseComplete after it has answered: a record can be
  // visible a moment before the audit line of its write is.
  await until(
    'every write in the audit log',
    () => fleet.watcherWrites(prefix, [WATCHER_USER], true).size >= BURST,
    5_000,
  ).catch(() => {});
  // A write cut short by a SIGKILL is audited 504 and may still have been applied: it counts as
  // the watcher's. Two applied writes cannot hide behind it: each is guarded by the
  // resourceVersion it decided on, so a later write succeeds only if the earlier one was not applied.
  t.equal(fleet.watcherWrites(prefix, [WATCHER_USER], true).size, BURST, 'every node was written by the watcher');
  const writes = fleet.watcherWrites(prefix, [WATCHER_USER]);
  t.same(
    [...writes].filter(([, w]) => w.length > 1).map(([n]) => n),
    [],
    'no node written twice',
  );
  return took;
}

/** A persistent burst with `fault` injected once `at` launches have started. */
async function burstWithFault(prefix: string, at: number, fault: () => Promise<void>): Promise<number> {
  let recoveredAt = 0;
  const first = fleet.persistentBurst(prefix, at);
  await first;
  await Promise.all([fault().then(() => (recoveredAt = Date.now())), fleet.persistentBurst(prefix, BURST - at, at)]);
  return recoveredAt;
}

t.test('the watcher SIGKILLed and started again in the middle of a burst', async (t) => {
  const first = await spawnServe(cp, certs, WATCHER_USER);
  t.teardown(() => void first.child.kill('SIGKILL'));
  await waitReady(first.healthPort);
  await until(
    'leadership',
    async () => /^veneer_nodewatcher_leader 1$/m.test(await metricsOf(first.metricsPort)),
    30_000,
  );
  let second: Awaited<ReturnType<typeof spawnServe>> | undefined;
  t.teardown(() => void second?.child.kill('SIGKILL'));
  const recoveredAt = await burstWithFault('killed', 10, async () => {
    first.child.kill('SIGKILL');
    await first.exited;
    second = await spawnServe(cp, certs, WATCHER_USER);
    await waitReady(second.healthPort);
  });
  const took = await everyNodeRecordedOnce(t, 'killed', recoveredAt);
  figures.push(
    `watcher SIGKILLed and restarted: all ${BURST} recorded ${took} ms after the new process was ready (the old lease, 3 s, had to expire first)`,
  );
  second!.child.kill('SIGTERM');
  t.equal(await second!.exited, 0, 'the new process stops cleanly');
});

t.test('the apiserver restarted in the middle of a burst', async (t) => {
  const { watcher } = await launchWatcher(cp, certs, WATCHER_USER);
  t.teardown(() => watcher.stop());
  const recoveredAt = await burstWithFault('apiserver', 15, () => cp.restartApiServer());
  const took = await everyNodeRecordedOnce(t, 'apiserver', recoveredAt);
  figures.push(`apiserver restarted: all recorded ${took} ms after it was back`);
});

t.test('etcd stopped for 5 s and resumed in the middle of a burst', async (t) => {
  const { watcher } = await launchWatcher(cp, certs, WATCHER_USER);
  t.teardown(() => watcher.stop());
  const recoveredAt = await burstWithFault('etcd', 15, async () => {
    await cp.stopEtcd();
    await sleep(5000);
    await cp.startEtcd();
  });
  const took = await everyNodeRecordedOnce(t, 'etcd', recoveredAt);
  figures.push(`etcd stopped 5 s: all recorded ${took} ms after it was back`);
});

t.test('every connection to the apiserver goes silent without an error', async (t) => {
  const proxy = new StallProxy(Number(new URL(cp.server).port));
  t.teardown(() => proxy.close());
  const port = await proxy.listen();
  const watchdogMs = 5000;
  const { watcher } = await launchWatcher(cp, certs, WATCHER_USER, {}, { apiServerPort: port, watchdogMs });
  t.teardown(() => watcher.stop());
  await until('leadership', () => watcher.metrics.leader.get().then((m) => m.values[0]?.value === 1));
  // A first wave keeps the connection pool warm, so that writes too meet a silent connection.
  await fleet.persistentBurst('stall', 10);
  await until('the first wave recorded', async () =>
    [...(await fleet.labels('stall')).values()].every((l) => l['veneer.io/overlay-influenced']),
  );
  // Silence everything open, several times while the second wave is written, so that watches,
  // lease renewals and record writes in flight all meet the fault; the HTTP/2 PING finds it.
  let stalledAt = 0;
  await Promise.all([
    fleet.persistentBurst('stall', BURST - 10, 10),
    (async () => {
      for (let i = 0; i < 6; i++, await sleep(300)) {
        proxy.stall();
        stalledAt = Date.now();
      }
    })(),
  ]);
  // Watches, lease renewals and writes share one HTTP/2 connection, so that is what goes silent.
  t.ok(proxy.stalled >= 1, `${proxy.stalled} connection(s) silenced`);
  const took = await everyNodeRecordedOnce(t, 'stall', stalledAt);
  figures.push(
    `all connections stalled: all recorded ${took} ms after the stall (HTTP/2 PING every ${HTTP2_PING_INTERVAL_MS} ms)`,
  );
});

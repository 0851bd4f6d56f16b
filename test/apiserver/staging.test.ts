// Staging an install on a real apiserver: observe mode watches, counts and reports and writes
// nothing (the audit log says so), and the records written once it records are the ones its
// report showed; a selector that selects none of the cluster's overlays holds every record, on
// both paths and loudly, instead of recording overlay-influenced=false on every node.
import { execFile } from 'node:child_process';
import { join } from 'node:path';
import { promisify } from 'node:util';
import t from 'tap';
import type { RunningWatcher } from '../../src/commands/serve.ts';
import { WEBHOOK_FIRST_MS } from '../../src/controllers/recorder/reconciler.ts';
import type { Report } from '../../src/engine/index.ts';
import { createLogger } from '../../src/log.ts';
import { counter, EXPECTED, Fleet, metricsOf, OVERLAY_API, sleep, typeOf, until } from '../../kit/fleet.ts';
import { mergePatch } from '../../kit/karpenter-sim.ts';
import {
  launchWatcher,
  recordsOnCreate,
  registerWebhooksAt,
  startClusterEnv,
  WATCHER_AUDIT_POLICY,
  WATCHER_USER,
} from '../../kit/watcher-env.ts';

const env = await startClusterEnv({ auditPolicy: WATCHER_AUDIT_POLICY });
t.teardown(() => env.cp.stop());
const { admin, cp, certs } = env;
const fleet = new Fleet(cp, admin);
await fleet.createOverlays();

let watcher: RunningWatcher | undefined;
t.teardown(() => watcher?.stop());

const gauge = async (name: string, labels: Record<string, string> = {}) =>
  counter(await metricsOf(watcher!.metricsPort), name, labels);
/** Every write the watcher's identity made, but to its own Lease. */
const writesBesidesTheLease = () =>
  cp
    .auditEvents()
    .filter(
      (e) =>
        e.user.username === WATCHER_USER &&
        e.stage === 'ResponseComplete' &&
        !['get', 'list', 'watch'].includes(e.verb) &&
        e.objectRef?.resource !== 'leases',
    )
    .map((e) => `${e.verb} ${e.objectRef?.resource}/${e.objectRef?.name ?? ''}`);
/** Nodes that carry any key of the record's label namespace. */
const recorded = async (prefix: string) =>
  [...(await fleet.labels(prefix))].filter(([, labels]) => Object.keys(labels).some((k) => k.startsWith('veneer.io/')));

const cli = join(import.meta.dirname, '..', '..', 'src', 'cli.ts');
const liveReport = async (): Promise<Report> =>
  JSON.parse(
    (
      await promisify(execFile)(process.execPath, [cli, 'report', '-o', 'json'], {
        env: { ...process.env, KUBECONFIG: cp.writeKubeConfig() },
      })
    ).stdout,
  ) as Report;

t.test('observe: the caches, the metrics and the report, and no webhook, record or Event', async (t) => {
  ({ watcher } = await launchWatcher(cp, certs, WATCHER_USER, { '--mode': 'observe' }));
  t.equal(watcher.webhookPort, undefined, 'no webhook listener');
  const ready = await fetch(`http://127.0.0.1:${watcher.healthPort}/readyz`);
  t.equal(ready.status, 200, 'ready without a webhook');
  // A launch in a later second than the caches' first sync, so that the report's decisions are exact.
  await sleep(1100);
  await fleet.burst('observed', 8);
  await until(
    'the watcher sees 8 nodes without a record',
    async () => (await gauge('veneer_nodewatcher_nodes_pending')) === 8,
  );
  // Past the time the reconciler would have taken over from the webhook, and a leadership's worth.
  await sleep(WEBHOOK_FIRST_MS + 3000);
  t.equal(await gauge('veneer_nodewatcher_leader'), 1, 'it leads (the counters count once)');
  t.equal(await gauge('veneer_nodewatcher_records_held', { reason: 'observe' }), 1, 'records_held says why');
  t.same(writesBesidesTheLease(), [], 'the audit log: nothing written but its Lease');
  t.same(await recorded('observed'), [], 'no node carries a record');

  const report = await liveReport();
  t.equal(report.totals.pending, 8, 'the report counts the 8 nodes as not recorded yet');
  const wouldWin = Object.fromEntries(report.overlays.map((o) => [o.overlay, o.wonWithoutRecord]));
  const expected: Record<string, number> = {};
  for (let i = 0; i < 8; i++)
    expected[EXPECTED[typeOf(`observed-${i}`)]!] = (expected[EXPECTED[typeOf(`observed-${i}`)]!] ?? 0) + 1;
  t.match(wouldWin, expected, 'and says which overlay each would be recorded with');
  await watcher.stop();
  watcher = undefined;
});

t.test('record: the records written are the ones the report showed', async (t) => {
  ({ watcher } = await launchWatcher(cp, certs, WATCHER_USER));
  await until('8 records', () => fleet.allRecorded('observed', 8));
  t.same(await fleet.wrongRecords('observed'), [], 'every record names the overlay Karpenter applied');
  const report = await liveReport();
  t.equal(report.totals.pending, 0);
  t.equal(report.totals.influenced, 8);
  await watcher.stop();
  watcher = undefined;
});

t.test('a selector that selects none of the overlays: every record held, loudly, until it selects one', async (t) => {
  const lines: string[] = [];
  const log = createLogger('info', { write: (line: string) => void lines.push(line) });
  ({ watcher } = await launchWatcher(cp, certs, WATCHER_USER, { '--overlay-selector': 'team=cost' }, { log }));
  const heldAnswers = async () =>
    counter(await metricsOf(watcher!.metricsPort), 'veneer_nodewatcher_admission_requests_total', {
      webhook: 'mutate',
      outcome: 'held',
      dry_run: 'false',
    });
  // In force once the apiserver asks it: its answer carries no record while held.
  await registerWebhooksAt(admin, {
    caPem: certs.caPem,
    port: watcher.webhookPort!,
    inForce: async (core, probe) => {
      await recordsOnCreate(core, 'veneer.io', probe);
      return (
        counter(await metricsOf(watcher!.metricsPort), 'veneer_nodewatcher_admission_requests_total', {
          webhook: 'mutate',
          outcome: 'held',
          dry_run: 'true',
        }) > 0
      );
    },
  });
  await until(
    'the hold',
    async () => (await gauge('veneer_nodewatcher_records_held', { reason: 'no_overlay_selected' })) === 1,
  );
  const held = lines.map((l) => JSON.parse(l) as { level: number; msg: string; overlays?: number });
  t.match(
    held.find((l) => l.msg.startsWith('records held')),
    { level: 50, overlays: 3 },
    'an error in the log says why and how many overlays the selector missed',
  );
  await sleep(1100);
  await fleet.burst('held', 4);
  t.ok((await heldAnswers()) >= 4, 'the webhook allowed each launch as it was');
  await until(
    'the watcher sees 4 nodes without a record',
    async () => (await gauge('veneer_nodewatcher_nodes_pending')) === 4,
  );
  await sleep(WEBHOOK_FIRST_MS + 2000);
  t.same(await recorded('held'), [], 'the reconciler wrote nothing either');
  t.same(
    writesBesidesTheLease().filter((w) => w.startsWith('patch nodes/held')),
    [],
    'the audit log: no write to a held node',
  );

  // The overlays Veneer made get the label the selector asks for: the hold ends by itself.
  for (const name of new Set(Object.values(EXPECTED)))
    await fleet.sim.custom.patchClusterCustomObject(
      { ...OVERLAY_API, name, body: { metadata: { labels: { team: 'cost' } } } },
      mergePatch,
    );
  await until('4 records', () => fleet.allRecorded('held', 4));
  t.equal(await gauge('veneer_nodewatcher_records_held', { reason: 'no_overlay_selected' }), 0, 'held no more');
  t.ok(
    lines.some((l) => l.includes('records resume')),
    'the log says the records resume',
  );
  await sleep(1100);
  await fleet.burst('after', 4);
  await until('4 more records', () => fleet.allRecorded('after', 4));
  t.same(await fleet.wrongRecords('after'), [], 'a launch after the selector selects is recorded as Karpenter applied');
});

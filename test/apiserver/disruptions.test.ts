// Recorded nodes that Karpenter's disruption removed, against a real apiserver: the watcher sees the
// NodeClaim's DisruptionReason condition (as Karpenter's disruption queue sets it on a candidate)
// and then the Node's deletion, and counts it by the reason and by the state of the overlay the
// record names at that moment: unchanged, its price changed, deleted (with the NodeClaim gone
// before the Node, the order a watch may deliver them in). A deletion without the mark, and a mark
// Karpenter cleared, are not disruptions.
import t from 'tap';
import * as k8s from '@kubernetes/client-node';
import type { RunningWatcher } from '../../src/commands/serve.ts';
import { computeSavingsPlan, reservedInstance } from '../../kit/veneer.ts';
import { KarpenterSim, mergePatch } from '../../kit/karpenter-sim.ts';
import { OVERLAY_API, sleep, until } from '../../kit/fleet.ts';
import { launchWatcher, startClusterEnv, WATCHER_USER } from '../../kit/watcher-env.ts';
import { promtool } from '../support/prometheus.ts';

const env = await startClusterEnv();
t.teardown(() => env.cp.stop());
const { admin, cp, certs } = env;
const sim = new KarpenterSim(admin);
const core = admin.makeApiClient(k8s.CoreV1Api);
const RI = 'cost-aware-ri-m5.xlarge-us-west-2';
const SP = 'cost-aware-compute-sp-global';
for (const o of [reservedInstance('m5.xlarge', 'us-west-2'), computeSavingsPlan()])
  await sim.custom.createClusterCustomObject({ ...OVERLAY_API, body: o });

let watcher: RunningWatcher | undefined;
t.teardown(() => watcher?.stop());
const CLAIMS = { group: 'karpenter.sh', version: 'v1', plural: 'nodeclaims' };
const mark = (node: string, reason: string | undefined) =>
  sim.custom.patchClusterCustomObjectStatus(
    {
      ...CLAIMS,
      name: `${node}-claim`,
      body: {
        status: {
          conditions: reason
            ? [
                {
                  type: 'DisruptionReason',
                  status: 'True',
                  reason,
                  message: reason,
                  lastTransitionTime: new Date().toISOString().replace(/\.\d+Z$/, 'Z'),
                },
              ]
            : [],
        },
      },
    },
    mergePatch,
  );
const counts = async () =>
  Object.fromEntries(
    (await watcher!.metrics.recordedDisruptions.get()).values
      .filter((v) => v.value > 0)
      .map((v) => [`${v.labels.reason} ${v.labels.overlay_state}`, v.value]),
  );

t.test('removed while marked: counted by reason and by what became of the overlay', async (t) => {
  watcher = (await launchWatcher(cp, certs, WATCHER_USER)).watcher;
  await until('leadership', () => watcher!.metrics.leader.get().then((m) => m.values[0]?.value === 1));
  await sleep(1100); // launches in a later second than the overlays: exact decisions
  const launches: [string, string][] = [
    ['unchanged', 'm5.xlarge'],
    ['repriced', 'm5.xlarge'],
    ['deleted-overlay', 'c6i.large'],
    ['not-marked', 'm5.xlarge'],
    ['mark-cleared', 'm5.xlarge'],
  ];
  for (const [name, instanceType] of launches) await sim.launch({ name, claimName: `${name}-claim`, instanceType });
  await until('5 records', async () =>
    (await core.listNode()).items.every((n) => n.metadata?.labels?.['veneer.io/matching-overlay'] !== undefined),
  );
  const total = async () => Object.values(await counts()).reduce((a, b) => a + b, 0);

  await mark('unchanged', 'Underutilized');
  await sleep(300);
  await core.deleteNode({ name: 'unchanged' });
  await until('the first counted', async () => (await total()) === 1);
  t.same(await counts(), { 'underutilized counting': 1 }, 'the overlay as it was at the launch');

  await mark('repriced', 'Drifted');
  await sim.custom.patchClusterCustomObject(
    { ...OVERLAY_API, name: RI, body: { spec: { price: '0.01' } } },
    mergePatch,
  );
  await sleep(500);
  await core.deleteNode({ name: 'repriced' });
  await until('the second counted', async () => (await total()) === 2);
  t.same(await counts(), { 'underutilized counting': 1, 'drifted changed': 1 }, 'the overlay repriced since');

  await mark('deleted-overlay', 'Underutilized');
  await sim.custom.deleteClusterCustomObject({ ...OVERLAY_API, name: SP });
  await sleep(300);
  await sim.custom.deleteClusterCustomObject({ ...CLAIMS, name: 'deleted-overlay-claim' });
  await sleep(300);
  await core.deleteNode({ name: 'deleted-overlay' });
  await until('the third counted', async () => (await total()) === 3);
  t.same(
    await counts(),
    { 'underutilized counting': 1, 'drifted changed': 1, 'underutilized gone': 1 },
    'the overlay deleted, the NodeClaim gone before the Node',
  );

  await mark('mark-cleared', 'Underutilized');
  await sleep(300);
  await mark('mark-cleared', undefined);
  await sleep(300);
  await core.deleteNode({ name: 'mark-cleared' });
  await core.deleteNode({ name: 'not-marked' });
  await sleep(1500);
  t.equal(await total(), 3, 'a deletion without the mark, or after Karpenter cleared it, is not a disruption');

  const events = admin.makeApiClient(k8s.EventsV1Api);
  const onOverlays = async () =>
    (await events.listNamespacedEvent({ namespace: 'default' })).items
      .filter((e) => e.regarding?.kind === 'NodeOverlay')
      .map((e) => `${e.regarding?.name} ${e.reason} ${e.related?.name}`)
      .sort();
  await until('the churn told on the overlays', async () => (await onOverlays()).length === 2);
  t.same(
    await onOverlays(),
    [`${SP} NodeDisruptedAfterDeletion deleted-overlay`, `${RI} NodeDisruptedAfterChange repriced`],
    'an Event on each overlay whose change or deletion was followed by the disruption of a node it priced; none for the unchanged one',
  );

  const text = await watcher.metrics.registry.metrics();
  t.equal(
    text.split('\n').filter((l) => l.startsWith('veneer_nodewatcher_recorded_disruptions_total{')).length,
    15,
    'every reason and state has its series',
  );
  const check = promtool(['check', 'metrics'], text);
  t.equal(check.status, 0, check.stderr);
  t.equal(check.stdout.trim(), '', 'promtool has nothing to say of the exposition');
  t.notMatch(text, /unchanged|repriced|deleted-overlay/, 'no node names');
});

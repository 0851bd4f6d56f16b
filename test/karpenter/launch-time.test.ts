// Which moment a record is decided for: Karpenter decides a launch when it creates the NodeClaim;
// the Node comes later (here: KWOK creates it within seconds, or 2 s later with a registration
// delay; on AWS the kubelet registers 30 s or more later). An overlay deleted in between must not
// change the record: Karpenter priced the launch with it. Real Karpenter launches m5.xlarge nodes
// under a Reserved Instance overlay (and a Compute Savings Plan under it); once every NodeClaim
// exists, the RI overlay is deleted, before (most of) the Nodes are created.
//   - A node the watcher links to its NodeClaim (providerID; KWOK's NodeClaim has it once the
//     launch returned) is decided as of the NodeClaim's creation: the RI, as Karpenter decided.
//   - A node created before its NodeClaim shows the providerID (KWOK without a delay creates the
//     Node at once) cannot be dated by its NodeClaim at CREATE. Karpenter may have launched it up
//     to 15 minutes before the Node appeared, so once an overlay changed in that window the
//     watcher waits for the registration, whose ownerReference names the NodeClaim. Before this,
//     8-10 of 20 such nodes were recorded under the Compute Savings Plan with basis "exact".
import t from 'tap';
import * as k8s from '@kubernetes/client-node';
import type { DecisionStory } from '../../src/engine/record.ts';
import { OVERLAY_API, until } from '../../kit/fleet.ts';
import { createPendingPods, REGION, startKarpenterWithWatcher, KARPENTER_VERSION } from '../../kit/karpenter.ts';
import { computeSavingsPlan, reservedInstance } from '../../kit/veneer.ts';
import { KarpenterJudge } from '../judges/karpenter-oracle.ts';
import { kwokJudgeCase } from '../judges/kwok-judge.ts';
import { expectOverlaysCounted } from '../support/expectations.ts';

t.setTimeout(240_000);
const PER_POOL = 20;
const POOLS = [
  { name: 'instant', nodeClass: 'instant' },
  { name: 'booting', nodeClass: 'booting' },
];
const env = await startKarpenterWithWatcher({
  karpenter: { nodeClasses: { instant: {}, booting: { nodeRegistrationDelay: '2s' } }, nodePools: POOLS },
});
t.teardown(env.stop);
const { watcher } = env;
const custom = env.admin.makeApiClient(k8s.CustomObjectsApi);
const core = env.admin.makeApiClient(k8s.CoreV1Api);
const RI = reservedInstance('m5.xlarge', REGION);
const CSP = computeSavingsPlan('kwok');
await expectOverlaysCounted({ custom, overlays: [RI, CSP], metrics: () => watcher.metrics.registry.metrics() });

const pods = POOLS.flatMap((p) =>
  Array.from({ length: PER_POOL }, (_, i) => ({
    name: `${p.name}-${i}`,
    nodePool: p.name,
    instanceType: 'm5.xlarge',
    capacityType: 'on-demand' as const,
  })),
);
await createPendingPods(env.admin, pods, env.karpenter.catalog);
await env.karpenter.waitForNodeClaims(pods.length);
const nodesBefore = (await core.listNode()).items.length;
await custom.deleteClusterCustomObject({ ...OVERLAY_API, name: RI.metadata.name });
const deletedAt = Date.now();
t.comment(`${pods.length} NodeClaims existed when the RI overlay was deleted; ${nodesBefore} of their Nodes did`);
await until(
  'every node recorded',
  async () =>
    (await core.listNode()).items.filter((n) => n.metadata?.labels?.['veneer.io/overlay-influenced']).length ===
    pods.length,
  60_000,
);

const nodes = (await core.listNode()).items.map((n) => ({
  name: n.metadata?.name ?? '',
  pool: n.metadata?.labels?.['karpenter.sh/nodepool'],
  story: JSON.parse(n.metadata?.annotations?.['veneer.io/overlay-decision'] ?? '{}') as DecisionStory,
}));
const judge = new KarpenterJudge(KARPENTER_VERSION);
t.teardown(() => judge.close());
// What Karpenter's store applied when it created the NodeClaims: both overlays were validated then.
const decided = await judge.judge(
  kwokJudgeCase(
    env.karpenter.catalog,
    env.karpenter.nodePools,
    [RI, CSP],
    [{ nodePool: 'instant', instanceType: 'm5.xlarge', offering: 0 }],
  ),
);
t.equal(decided.applied[0], RI.metadata.name, "Karpenter's own code priced these launches with the RI overlay");

const linked = nodes.filter((n) => n.story.characteristicsFrom === 'node+nodeclaim');
const alone = nodes.filter((n) => n.story.characteristicsFrom === 'node');
const summary = (list: typeof nodes) =>
  POOLS.map((p) => `${p.name} ${list.filter((n) => n.pool === p.name).length}`).join(', ');
t.comment(`decided with the NodeClaim: ${summary(linked)}; from the node alone: ${summary(alone)}`);
t.ok(linked.length > 0, 'some nodes were linked to their NodeClaim (the booting path)');

t.test('linked to its NodeClaim: decided as of the launch, the RI', async (t) => {
  t.same(
    linked.filter((n) => n.story.overlay !== RI.metadata.name).map((n) => `${n.name}: ${n.story.overlay}`),
    [],
  );
});

t.test('decided from the node alone only where no overlay changed in the 15 minutes before the Node', async (t) => {
  const wrong = alone.filter((n) => n.story.overlay !== RI.metadata.name);
  t.comment(
    `${alone.length} records decided from the node alone (all before the delete), ${wrong.length} naming another overlay than Karpenter applied`,
  );
  t.same(
    wrong.map((n) => `${n.name}: ${n.story.overlay} (evaluatedAt ${n.story.evaluatedAt}, basis ${n.story.basis})`),
    [],
    'they name the overlay Karpenter applied',
  );
  // Creation timestamps have whole seconds: a node stamped with a later second than the delete came after it.
  const after = Math.floor(deletedAt / 1000) * 1000 + 1000;
  t.same(
    alone.filter((n) => Date.parse(n.story.evaluatedAt) >= after).map((n) => n.name),
    [],
    'no node created after the delete was decided without its NodeClaim',
  );
});

// A replacement told from a provisioning launch, against a real apiserver: the NodeClaims are
// written as Karpenter's disruption queue writes them (the candidate's DisruptionReason condition,
// then the replacement NodeClaim, later the DisruptionLaunching Event on it in `default`); the
// rest of Karpenter is the kit's stand-in (kit/karpenter-sim.ts), as in every webhook test. Real
// Karpenter consolidating on the local EC2 is test/aws/replacement.test.ts. The replaced node is
// gone before the Event comes (Karpenter deletes it once the replacement is initialized): the
// watcher keeps its mark. Without the right to read those Events, launches read as before and the
// watcher warns once.
import t from 'tap';
import * as k8s from '@kubernetes/client-node';
import type { RunningWatcher } from '../../src/commands/serve.ts';
import { LAUNCHING_EVENT_WAIT_MS, MARK_WINDOW_MS } from '../../src/engine/disruption/queue.ts';
import { createLogger } from '../../src/log.ts';
import { reservedInstance } from '../../kit/veneer.ts';
import { KarpenterSim, mergePatch } from '../../kit/karpenter-sim.ts';
import { OVERLAY_API, sleep, until } from '../../kit/fleet.ts';
import { launchWatcher, registerWebhooksAt, startClusterEnv, WATCHER_USER } from '../../kit/watcher-env.ts';

const env = await startClusterEnv();
t.teardown(() => env.cp.stop());
const { admin, cp, certs } = env;
const sim = new KarpenterSim(admin);
const core = admin.makeApiClient(k8s.CoreV1Api);
await sim.custom.createClusterCustomObject({ ...OVERLAY_API, body: reservedInstance('m5.xlarge', 'us-west-2') });
const CLAIMS = { group: 'karpenter.sh', version: 'v1', plural: 'nodeclaims' };
const seconds = (ms = Date.now()) => new Date(ms).toISOString().replace(/\.\d+Z$/, 'Z');

let watcher: RunningWatcher | undefined;
t.teardown(() => watcher?.stop());

const markDisrupted = (claimName: string, reason: string) =>
  sim.custom.patchClusterCustomObjectStatus(
    {
      ...CLAIMS,
      name: claimName,
      body: {
        status: {
          conditions: [
            { type: 'DisruptionReason', status: 'True', reason, message: reason, lastTransitionTime: seconds() },
          ],
        },
      },
    },
    mergePatch,
  );

/** What Karpenter's recorder writes for disruptionevents.Launching: an Event on the cluster-scoped NodeClaim, in default. */
async function launchingEvent(claimName: string, reason: string): Promise<void> {
  const claim = (await sim.custom.getClusterCustomObject({ ...CLAIMS, name: claimName })) as {
    metadata: { uid: string };
  };
  await core.createNamespacedEvent({
    namespace: 'default',
    body: {
      metadata: { name: `${claimName}.${Date.now().toString(16)}`, namespace: 'default' },
      involvedObject: { apiVersion: 'karpenter.sh/v1', kind: 'NodeClaim', name: claimName, uid: claim.metadata.uid },
      reason: 'DisruptionLaunching',
      message: `Launching NodeClaim: ${reason}`,
      type: 'Normal',
      source: { component: 'karpenter' },
      firstTimestamp: new Date(),
      lastTimestamp: new Date(),
      count: 1,
    },
  });
}

const story = async (name: string) => {
  const node = await core.readNode({ name });
  const annotation = node.metadata?.annotations?.['veneer.io/overlay-decision'];
  return annotation === undefined ? undefined : (JSON.parse(annotation) as { effect?: Record<string, unknown> });
};

t.test('a replacement is recorded with what it replaced, once Karpenter says it is one', async (t) => {
  watcher = (await launchWatcher(cp, certs, WATCHER_USER)).watcher;
  await until('leadership', () => watcher!.metrics.leader.get().then((m) => m.values[0]?.value === 1));
  await sim.launch({ name: 'old', claimName: 'old-claim', instanceType: 'c6i.xlarge' });
  await until('the old node recorded', async () => (await story('old')) !== undefined);

  // Karpenter's queue: mark the candidate, create the replacement; the candidate goes once the replacement is up.
  const markedAt = Date.now();
  await markDisrupted('old-claim', 'Underutilized');
  await sim.createNodeClaim({ name: 'new', claimName: 'new-claim', instanceType: 'm5.xlarge' });
  await sleep(300);
  await sim.custom.deleteClusterCustomObject({ ...CLAIMS, name: 'old-claim' });
  await core.deleteNode({ name: 'old' });
  await sim.kubeletCreate({ name: 'new', instanceType: 'm5.xlarge' });
  await sim.register({ name: 'new', claimName: 'new-claim', instanceType: 'm5.xlarge' });
  await sleep(3000);
  t.equal(await story('new'), undefined, 'marks around its creation and no Event yet: the record waits');

  await launchingEvent('new-claim', 'Underutilized');
  await until('the replacement recorded', async () => (await story('new')) !== undefined, 15_000);
  const effect = (await story('new'))?.effect;
  t.match(effect?.disruption, {
    reason: 'Underutilized',
    replacedCount: 1,
    replaced: [{ nodeClaim: 'old-claim', node: 'old', instanceType: 'c6i.xlarge', capacityType: 'on-demand' }],
  });
  t.equal(effect?.verdict, 'unknown', "the kit's NodeClaims list no candidate instance types to replay");

  // Past the window of any mark: a provisioning launch, recorded at once, as ever.
  await sleep(Math.max(0, markedAt + MARK_WINDOW_MS + 2000 - Date.now()));
  await sim.launch({ name: 'later', claimName: 'later-claim', instanceType: 'm5.xlarge' });
  await until('the later node recorded', async () => (await story('later')) !== undefined);
  t.equal((await story('later'))?.effect?.disruption, undefined, 'no disruption story on a provisioning launch');
});

t.test("drift commands within one second: each replacement names its own node, by the watch's order", async (t) => {
  const names = ['d1', 'd2', 'd3'];
  for (const n of names) await sim.launch({ name: n, claimName: `${n}-claim`, instanceType: 'c6i.xlarge' });
  await until('the drifting nodes recorded', async () => (await Promise.all(names.map(story))).every(Boolean));
  // Karpenter's drift: a command a pass, requeued at once, each marking its node then creating its replacement.
  const from = Date.now();
  for (const n of names) {
    await markDisrupted(`${n}-claim`, 'Drifted');
    await sim.createNodeClaim({ name: `r${n}`, claimName: `r${n}-claim`, instanceType: 'm5.xlarge' });
  }
  t.comment(`three marks and creations in ${Date.now() - from} ms`);
  for (const n of names) {
    await sim.kubeletCreate({ name: `r${n}`, instanceType: 'm5.xlarge' });
    await sim.register({ name: `r${n}`, claimName: `r${n}-claim`, instanceType: 'm5.xlarge' });
    await launchingEvent(`r${n}-claim`, 'Drifted');
  }
  await until(
    'the replacements recorded',
    async () => (await Promise.all(names.map((n) => story(`r${n}`)))).every(Boolean),
    20_000,
  );
  for (const n of names) {
    const d = (await story(`r${n}`))?.effect?.disruption as {
      replaced?: { nodeClaim: string }[];
      replacedUnclear?: string;
    };
    t.same(
      d?.replaced?.map((r) => r.nodeClaim),
      [`${n}-claim`],
      `r${n} names ${n}, the node its command marked`,
    );
    t.equal(d?.replacedUnclear, undefined);
  }
});

t.test(
  'provisioning beside disruption: recorded inline beside an emptiness deletion, after a short wait beside a consolidation',
  async (t) => {
    type Told = { decidedBy?: string; effect?: { disruption?: unknown } };
    const told = async (name: string) => (await story(name)) as Told | undefined;
    const unregister = await registerWebhooksAt(admin, { caPem: certs.caPem, port: watcher!.webhookPort! });
    t.teardown(unregister);
    await sim.launch({ name: 'empty', claimName: 'empty-claim', instanceType: 'c6i.xlarge' });
    await until('the empty node recorded', async () => (await story('empty')) !== undefined);

    // Emptiness marks its nodes and deletes them; it never launches, so a launch beside it is provisioning's.
    await markDisrupted('empty-claim', 'Empty');
    await sim.launch({ name: 'beside-empty', claimName: 'beside-empty-claim', instanceType: 'm5.xlarge' });
    await until(
      'the launch beside emptiness recorded',
      async () => (await story('beside-empty')) !== undefined,
      10_000,
    );
    t.match(await told('beside-empty'), { decidedBy: 'webhook' }, 'inline: the mark of Empty holds nothing up');
    t.equal((await told('beside-empty'))?.effect?.disruption, undefined, 'a launch, not a replacement');

    // A consolidation mark may come with a replacement: a launch beside it waits briefly for a DisruptionLaunching
    // Event, and without one it is provisioning's (a delete-only command marks as a replacing one does).
    await sim.launch({ name: 'under', claimName: 'under-claim', instanceType: 'c6i.xlarge' });
    await until('the consolidated node recorded', async () => (await story('under')) !== undefined);
    const createdAt = Date.now();
    await markDisrupted('under-claim', 'Underutilized');
    await sim.launch({ name: 'beside-delete', claimName: 'beside-delete-claim', instanceType: 'm5.xlarge' });
    await sleep(2000);
    t.equal(await story('beside-delete'), undefined, 'no Event yet: the record waits');
    await until(
      'the launch beside a delete-only consolidation recorded',
      async () => (await story('beside-delete')) !== undefined,
      LAUNCHING_EVENT_WAIT_MS + 15_000,
    );
    const recordedAfter = Date.now() - createdAt;
    t.ok(recordedAfter >= LAUNCHING_EVENT_WAIT_MS - 1000, `recorded once the wait was over (${recordedAfter} ms)`);
    t.match(await told('beside-delete'), { decidedBy: 'reconciler' });
    t.equal((await told('beside-delete'))?.effect?.disruption, undefined, 'a launch, not a replacement');
  },
);

t.test("a consolidation's ConsolidationCandidate Events date its decision", async (t) => {
  const caches = watcher!.caches!;
  const claimName = 'beside-empty-claim';
  const claim = (await sim.custom.getClusterCustomObject({ ...CLAIMS, name: claimName })) as {
    metadata: { uid: string };
  };
  // What Karpenter's recorder writes for disruptionevents.ConsolidationCandidate, on the NodeClaim.
  const at = new Date(Math.floor(Date.now() / 1000) * 1000);
  await core.createNamespacedEvent({
    namespace: 'default',
    body: {
      metadata: { name: `${claimName}.candidate`, namespace: 'default' },
      involvedObject: { apiVersion: 'karpenter.sh/v1', kind: 'NodeClaim', name: claimName, uid: claim.metadata.uid },
      reason: 'ConsolidationCandidate',
      message:
        'Consolidation candidate: Underutilized/c1: replace: nodepools=[default]: [x] -> [1 replacement] (savings: $0.05)',
      type: 'Normal',
      source: { component: 'karpenter' },
      firstTimestamp: at,
      lastTimestamp: at,
      count: 1,
    },
  });
  await until('the Event seen', async () => caches.disruption.candidateAt(claimName, Date.now()) !== undefined);
  t.equal(caches.disruption.candidateAt(claimName, Date.now()), at.getTime(), 'its lastTimestamp');
  t.equal(caches.disruption.candidateAt(claimName, at.getTime() - 1), undefined, 'none before it');
});

t.test("Balanced consolidation's ConsolidationApproved Events are read with their figures", async (t) => {
  const caches = watcher!.caches!;
  const claimName = 'beside-empty-claim';
  const claim = (await sim.custom.getClusterCustomObject({ ...CLAIMS, name: claimName })) as {
    metadata: { uid: string };
  };
  // What Karpenter's recorder writes for disruptionevents.ConsolidationApproved (on the Node and the
  // NodeClaim of a one-node command) and ConsolidationApprovedMultiNode (on the NodePool).
  const at = new Date(Math.floor(Date.now() / 1000) * 1000);
  const approved = (name: string, involvedObject: Record<string, string>, message: string) =>
    core.createNamespacedEvent({
      namespace: 'default',
      body: {
        metadata: { name, namespace: 'default' },
        involvedObject,
        reason: 'ConsolidationApproved',
        message,
        type: 'Normal',
        source: { component: 'karpenter' },
        firstTimestamp: at,
        lastTimestamp: at,
        count: 1,
      },
    });
  const message = 'score 1.53 >= threshold 0.50 (k: 2, savings 25.0%, disruption 16.3%)';
  await approved('beside-empty.approved', { apiVersion: 'v1', kind: 'Node', name: 'beside-empty' }, message);
  await approved(
    `${claimName}.approved`,
    { apiVersion: 'karpenter.sh/v1', kind: 'NodeClaim', name: claimName, uid: claim.metadata.uid },
    message,
  );
  await approved(
    'default.approved',
    { apiVersion: 'karpenter.sh/v1', kind: 'NodePool', name: 'default' },
    '(combined from similar events): score 0.71 >= threshold 0.50 (k: 2, savings 3.2%, disruption 4.5%)',
  );
  const seen = (kind: 'NodeClaim' | 'NodePool', name: string) =>
    caches.disruption.approvalsBetween(kind, name, at.getTime(), at.getTime());
  await until(
    'the Events seen',
    async () => seen('NodeClaim', claimName).length + seen('NodePool', 'default').length === 2,
  );
  t.same(seen('NodeClaim', claimName), [
    { at: at.getTime(), figures: { score: 1.53, threshold: 0.5, k: 2, savingsPct: 25, disruptionPct: 16.3 } },
  ]);
  t.equal(seen('NodePool', 'default')[0]?.figures.savingsPct, 3.2, "the NodePool's, aggregated by client-go");
  t.same(
    [...caches.disruption.approvals.store.keys()].sort(),
    [`${claimName}.approved`, 'default.approved'],
    "the Node's copy is filtered out by the server (involvedObject.kind!=Node)",
  );
  t.same(caches.disruption.approvalsBetween('NodeClaim', claimName, 0, at.getTime() - 1), [], 'none before it');
});

t.test('without the right to read Events: ready, launches recorded as before, one warning', async (t) => {
  await watcher?.stop();
  watcher = undefined;
  await admin
    .makeApiClient(k8s.RbacAuthorizationV1Api)
    .deleteNamespacedRoleBinding({ name: 'veneer-node-watcher-karpenter-events', namespace: 'default' });
  const lines: string[] = [];
  const log = createLogger('info', { write: (line: string) => void lines.push(line) });
  watcher = (await launchWatcher(cp, certs, WATCHER_USER, {}, { log })).watcher;
  await until('leadership', () => watcher!.metrics.leader.get().then((m) => m.values[0]?.value === 1));
  await sim.launch({ name: 'unread', claimName: 'unread-claim', instanceType: 'm5.xlarge' });
  await until('the node recorded', async () => (await story('unread')) !== undefined);
  t.equal((await story('unread'))?.effect?.disruption, undefined, 'a launch, as every launch is read without Events');
  const warnings = lines
    .map((l) => JSON.parse(l) as { level: number; resource?: string; msg: string })
    .filter((l) => l.resource === 'disruption-events' && l.level === 40);
  t.equal(warnings.length, 1, 'said once, as a warning');
  t.match(warnings[0]?.msg, /not allowed to list it \(403\)/);
});

// The body of test/aws/lifecycle.test.ts, run in a network namespace with only loopback. Real
// Karpenter on AWS with the watcher beside it runs the demo's drift scene (scripts/demo-aws-drift.ts)
// in a NodePool whose nodes expire after 100 s, and goes on:
//
// 1. Drift under the Reserved Instance overlay. The pod's node is an m5.large only the overlay made
//    (t3.large without it: `instance-type`). A label added to the NodePool's template drifts it
//    (NodePoolDrifted); Karpenter launches its replacement through the provisioner's scheduling of
//    the drifted node's pods, whatever the prices (drift.go; no price filter), and deletes the
//    drifted node once the replacement is initialized. The replacement's record is that launch's
//    effect (`instance-type`), names the node it replaced, and is never `replacement`.
// 2. Expiration. The replacement's expireAfter (100 s from its creation) passes; Karpenter's
//    expiration controller deletes the NodeClaim with no replacement made first (no pre-spin, no
//    DisruptionReason), the pod is evicted and made again, and the provisioner launches its next
//    node: a provisioning launch, recorded with its launch effect.
// 3. Drift commands within a second. Three nodes of a NodePool of c6i sizes, one pod each pinned to
//    its size (1500m, 3500m, 7000m), drift together: Karpenter's drift makes one command
//    a pass and requeues at once, so the three marks and creations share a second or two, and
//    whole-second timestamps cannot pair them. The order the watcher saw them in on its NodeClaim
//    watch does: each replacement is of its node's size and names that node.
//
// Each record is read back by `explain NODE -o json` live, as an operator would: the verdict agrees.
import t, { type Test } from 'tap';
import { until } from '../../../kit/fleet.ts';
import { awsNodePoolObject, OPEN_DISRUPTION, REGION } from '../../../kit/aws/karpenter.ts';
import { NODECLAIM_API, NODEPOOL_API, type NodeClaim, podObject } from '../../../kit/karpenter-controller.ts';
import { readStory } from '../../../src/engine/index.ts';
import { assertInOwnNetworkNamespace } from '../../../kit/netns.ts';
import { reservedInstance } from '../../../kit/veneer.ts';
import { type DriftScene, driftScene, type RolloutNode } from '../../../scripts/demo-aws-drift.ts';
import { explainAgrees as explainedAs, runCli } from './explained.ts';
import { secs, startSceneEnv } from './scene-env.ts';

assertInOwnNetworkNamespace();
t.setTimeout(480_000);
let scene: DriftScene | undefined;
const { env, custom, core, kubeconfig, started } = await startSceneEnv(
  t,
  { bootDelayMs: 2000, nodePools: [] },
  async () => scene?.stop(),
);
const { karpenter, admin, watcher } = env;
const RI = reservedInstance('m5.large', REGION);
const EXPIRE_AFTER_S = 100;

let out = '';
const print = (line: string) => {
  out += `${line}\n`;
};
const cli = async (args: string[]) => {
  print(`\n$ veneer-node-watcher ${args.join(' ')}`);
  print((await runCli(kubeconfig, args)).trimEnd());
};
const explainAgrees = (t: Test, r: RolloutNode) => explainedAs(t, kubeconfig, r.node, r.story);

interface Claim {
  metadata: { name: string; creationTimestamp?: string; deletionTimestamp?: string };
  status?: { conditions?: { type: string; status: string; reason?: string }[] };
}
const claim = async (name: string) =>
  (await custom.getClusterCustomObject({ ...NODECLAIM_API, name }).catch(() => undefined)) as Claim | undefined;

t.test("a rollout under the RI overlay: the drift replacement reads its launch's effect", async (t) => {
  const sceneStarted = Date.now();
  scene = await driftScene({
    admin,
    watcher,
    vcpusOf: (type) => karpenter.vcpus.get(type)!,
    step: (msg) => print(`[scene] ${msg}`),
    cli,
    print,
    expireAfter: `${EXPIRE_AFTER_S}s`,
    // While it exists: the rollout drifts it, and it is deleted once its replacement is up.
    beforeRollout: (first) => t.test('the first node, explained', (t) => explainAgrees(t, first)),
  });
  const { first, replacement } = scene;
  t.comment(`the scene ran in ${secs(Date.now() - sceneStarted)}`);
  t.equal(first.instanceType, 'm5.large', 'the Reserved Instance, at 0.00');
  t.equal(first.story.overlay, RI.metadata.name);
  t.equal(first.story.effect?.verdict, 'instance-type', 'without the overlay: t3.large');
  t.equal(first.story.effect?.disruption, undefined, 'a provisioning launch');

  t.equal(replacement.instanceType, 'm5.large', 'the provisioner schedules the pod again: m5.large');
  t.equal(replacement.story.overlay, RI.metadata.name, 'the replacement names the overlay');
  const effect = replacement.story.effect!;
  t.equal(effect.verdict, 'instance-type', `its launch's effect, not replacement: ${effect.reason ?? ''}`);
  t.match(
    effect.disruption,
    {
      reason: 'Drifted',
      replacedCount: 1,
      replaced: [{ nodeClaim: first.claim, node: first.node, instanceType: 'm5.large' }],
    },
    'launched by the drift of the node it names',
  );
  const launching = await core.listNamespacedEvent({
    namespace: 'default',
    fieldSelector: `involvedObject.kind=NodeClaim,involvedObject.name=${replacement.claim},reason=DisruptionLaunching`,
  });
  t.match(launching.items[0]?.message ?? '', /Drifted/, "Karpenter's own word: DisruptionLaunching, Drifted");
  await until('the drifted NodeClaim gone', async () => (await claim(first.claim)) === undefined, 120_000);
  await t.test('the replacement, explained', (t) => explainAgrees(t, replacement));
  t.match(out, /launched by Karpenter's disruption: Drifted, replacing 1 node\(s\)/, 'explain tells the drift');
  if (!t.passing()) t.comment(out);
});

t.test("expiration: no replacement first; the pod's next node is a provisioning launch", async (t) => {
  const { first, replacement } = scene!;
  let deletedAt = 0;
  let expired: Claim | undefined;
  await until(
    "the replacement's NodeClaim expired and deleting",
    async () => {
      expired = await claim(replacement.claim);
      if (expired?.metadata.deletionTimestamp) deletedAt = Date.parse(expired.metadata.deletionTimestamp);
      return deletedAt > 0 || expired === undefined;
    },
    (EXPIRE_AFTER_S + 60) * 1000,
  );
  t.ok(deletedAt > 0, 'seen deleting');
  const age = deletedAt - Date.parse(expired!.metadata.creationTimestamp ?? '');
  t.ok(age >= EXPIRE_AFTER_S * 1000, `deleted ${secs(age)} after its creation: expireAfter ${EXPIRE_AFTER_S}s`);
  t.notOk(
    expired!.status?.conditions?.some((c) => c.type === 'DisruptionReason' && c.status === 'True'),
    "no DisruptionReason: the expiration controller deletes, the disruption controller's commands are not involved",
  );
  const next = await scene!.next([first.claim, replacement.claim], 'the node after the expiration');
  const nextClaim = await claim(next.claim);
  t.ok(
    Date.parse(nextClaim!.metadata.creationTimestamp ?? '') >= deletedAt,
    'its NodeClaim created once the expired one was deleting: no pre-spin',
  );
  t.equal(next.instanceType, 'm5.large');
  t.equal(next.story.effect?.verdict, 'instance-type', 'its launch effect');
  t.equal(next.story.effect?.disruption, undefined, 'a provisioning launch: no replaced node');
  await t.test('the node after the expiration, explained', (t) => explainAgrees(t, next));
  await scene!.stop();
  t.comment(`the whole file: ${secs(Date.now() - started)}`);
});

t.test('three drift commands within seconds: each replacement names its own node', async (t) => {
  const POOL = 'fleet';
  // Each pod pinned to its size: a drift's simulation could otherwise put a small pod into the room of
  // a larger node's new, still empty replacement, and delete its node rather than replace it.
  const pods: Record<string, { cpu: string; instanceType: string }> = {
    'fleet-2': { cpu: '1500m', instanceType: 'c6i.large' },
    'fleet-4': { cpu: '3500m', instanceType: 'c6i.xlarge' },
    'fleet-8': { cpu: '7000m', instanceType: 'c6i.2xlarge' },
  };
  await custom.createClusterCustomObject({
    ...NODEPOOL_API,
    body: awsNodePoolObject({
      name: POOL,
      capacityTypes: ['on-demand'],
      instanceTypes: ['c6i.large', 'c6i.xlarge', 'c6i.2xlarge'],
      disruption: OPEN_DISRUPTION,
    }),
  });
  // One pod a node (anti-affinity), as Karpenter's simulation and kube-scheduler both honour.
  const podBody = (name: string) => {
    const body = podObject({ name, nodePool: POOL, ...pods[name]! }, (x) => karpenter.vcpus.get(x)!);
    body.metadata!.labels = { ...body.metadata!.labels, fleet: 'true' };
    body.spec!.terminationGracePeriodSeconds = 0;
    body.spec!.affinity = {
      podAntiAffinity: {
        requiredDuringSchedulingIgnoredDuringExecution: [
          { labelSelector: { matchLabels: { fleet: 'true' } }, topologyKey: 'kubernetes.io/hostname' },
        ],
      },
    };
    return body;
  };
  const live = async () =>
    (await karpenter.nodeClaims()).filter(
      (c) => c.metadata.labels?.['karpenter.sh/nodepool'] === POOL && !('deletionTimestamp' in c.metadata),
    );
  // One at a time, each bound before the next: kube-scheduler binds a pod to any node it fits.
  for (const name of Object.keys(pods)) {
    await core.createNamespacedPod({ namespace: 'default', body: podBody(name) });
    await until(
      `${name} bound`,
      async () => (await core.readNamespacedPod({ name, namespace: 'default' })).spec?.nodeName !== undefined,
      90_000,
    );
  }
  // A ReplicaSet's part: each pod made again when a drain evicts it (no grace period: no kubelet here).
  let stopped = false;
  const keep = (async () => {
    while (!stopped) {
      for (const name of Object.keys(pods)) {
        const pod = await core.readNamespacedPod({ name, namespace: 'default' }).catch(() => undefined);
        if (pod === undefined)
          await core.createNamespacedPod({ namespace: 'default', body: podBody(name) }).catch(() => {});
        else if (pod.metadata?.deletionTimestamp)
          await core.deleteNamespacedPod({ name, namespace: 'default', gracePeriodSeconds: 0 }).catch(() => {});
      }
      await new Promise((r) => setTimeout(r, 250));
    }
  })();
  t.teardown(async () => {
    stopped = true;
    await keep;
  });
  const recorded = async (claims: NodeClaim[]) =>
    Promise.all(
      claims.map(async (c) => {
        const node = c.status?.nodeName && (await core.readNode({ name: c.status.nodeName }).catch(() => undefined));
        return readStory(node ? node.metadata?.annotations?.['veneer.io/overlay-decision'] : undefined);
      }),
    );
  let first: NodeClaim[] = [];
  await until(
    'three nodes recorded',
    async () => {
      first = await live();
      return first.length === 3 && (await recorded(first)).every(Boolean);
    },
    120_000,
  );
  const typeOf = (c: NodeClaim) => c.metadata.labels?.['node.kubernetes.io/instance-type'] ?? '';
  const original = new Map(first.map((c) => [typeOf(c), c.metadata.name]));
  t.same([...original.keys()].sort(), ['c6i.2xlarge', 'c6i.large', 'c6i.xlarge'], 'one node of each size');
  const np = (await custom.getClusterCustomObject({ ...NODEPOOL_API, name: POOL })) as {
    spec: { template: { metadata: { labels?: Record<string, string> } } };
  };
  np.spec.template.metadata.labels = { ...np.spec.template.metadata.labels, 'example.com/release': '2' };
  await custom.replaceClusterCustomObject({ ...NODEPOOL_API, name: POOL, body: np });
  // The drift replacements: the NodeClaims whose records tell a drift (pods evicted meanwhile may
  // bind elsewhere and make provisioning launches besides).
  let replacements: NodeClaim[] = [];
  let stories: Awaited<ReturnType<typeof recorded>> = [];
  await until(
    'three drift replacements recorded',
    async () => {
      const claims = (await live()).filter((c) => ![...original.values()].includes(c.metadata.name));
      const all = await recorded(claims);
      replacements = claims.filter((_, i) => all[i]?.effect?.disruption?.reason === 'Drifted');
      stories = all.filter((s) => s?.effect?.disruption?.reason === 'Drifted');
      return replacements.length === 3;
    },
    180_000,
  );
  const created = replacements.map((c) => Date.parse(c.metadata.creationTimestamp ?? '')).sort();
  t.comment(`the replacements created within ${secs(created.at(-1)! - created[0]!)} of each other`);
  for (const [i, c] of replacements.entries()) {
    const d = stories[i]!.effect?.disruption;
    t.equal(d?.reason, 'Drifted', `${typeOf(c)}: a drift replacement`);
    t.same(
      d?.replaced.map((r) => [r.instanceType, r.nodeClaim]),
      [[typeOf(c), original.get(typeOf(c))]],
      `${typeOf(c)}: names the ${typeOf(c)} it replaced (its pod runs on no other size)`,
    );
    t.equal(d?.replacedUnclear, undefined);
  }
});

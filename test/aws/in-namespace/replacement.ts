// The body of test/aws/replacement.test.ts, run in a network namespace with only loopback. Real
// Karpenter on AWS with consolidation open (WhenEmptyOrUnderutilized, consolidateAfter 5s, budgets
// 100%) in one on-demand NodePool of m5.large, c6i.large and r6i.large, and the watcher beside it:
//
// 1. One 500m pod: Karpenter launches the cheapest, c6i.large ($0.085/h; m5.large lists $0.096/h).
//    Nothing is cheaper: it stays, however long consolidation looks at it.
// 2. Veneer's Reserved Instance overlay prices on-demand m5.large at 0.00. Karpenter re-evaluates
//    (an overlay change marks the cluster unconsolidated) and replaces the c6i.large node by an
//    m5.large. The watcher recognises the replacement (the candidate's DisruptionReason, the
//    DisruptionLaunching Event) and records it `replacement`: without the overlay nothing
//    undercuts c6i.large, so there would have been no launch at all. Before this, the record read
//    `none`.
// 3. Veneer's EC2 Instance Savings Plan overlay for c6i comes (c6i.large at 0.00: not cheaper than
//    m5.large at 0.00, nothing moves), then the RI overlay is deleted (Veneer does so when the
//    commitment is used up): the m5.large node is priced at its list price again, and Karpenter
//    replaces it by a c6i.large priced by the Savings Plan. That replacement would happen without
//    the Savings Plan too (c6i.large lists $0.085/h, under m5.large's $0.096/h): its record names the
//    Savings Plan and reads the launch replay (`none`), not `replacement`. And the churn is counted:
//    a recorded node disrupted (Underutilized) while the overlay its record names is gone.
import t from 'tap';
import * as k8s from '@kubernetes/client-node';
import { OVERLAY_API, sleep } from '../../../kit/fleet.ts';
import {
  AWS_KARPENTER_VERSION,
  OPEN_DISRUPTION,
  REGION,
  startAwsKarpenterWithWatcher,
} from '../../../kit/aws/karpenter.ts';
import { NODECLAIM_API, podObject } from '../../../kit/karpenter-controller.ts';
import { assertInOwnNetworkNamespace } from '../../../kit/netns.ts';
import { ec2InstanceSavingsPlan, reservedInstance } from '../../../kit/veneer.ts';
import { type DecisionStory, readStory } from '../../../src/engine/index.ts';

assertInOwnNetworkNamespace();
t.setTimeout(300_000);
const started = Date.now();
const TYPES = ['m5.large', 'c6i.large', 'r6i.large'];
const env = await startAwsKarpenterWithWatcher({
  karpenter: {
    bootDelayMs: 2000,
    nodePools: [{ name: 'od', capacityTypes: ['on-demand'], instanceTypes: TYPES, disruption: OPEN_DISRUPTION }],
  },
});
const { karpenter, admin, watcher } = env;
t.teardown(async () => {
  if (!t.passing()) console.error(`--- karpenter-aws's log ends:\n${karpenter.controller.logTail(80)}`);
  await env.stop();
});
const custom = admin.makeApiClient(k8s.CustomObjectsApi);
const core = admin.makeApiClient(k8s.CoreV1Api);
const secs = (ms: number) => `${(ms / 1000).toFixed(1)} s`;
t.comment(
  `control plane, local EC2, Karpenter ${AWS_KARPENTER_VERSION} and the watcher up in ${secs(Date.now() - started)}`,
);

interface Claim {
  metadata: { name: string; labels?: Record<string, string>; deletionTimestamp?: string };
  status?: { nodeName?: string };
}
const claims = async () =>
  ((await custom.listClusterCustomObject(NODECLAIM_API)) as { items: Claim[] }).items.filter(
    (c) => c.metadata.deletionTimestamp === undefined,
  );
const typeOf = (c: Claim) => c.metadata.labels?.['node.kubernetes.io/instance-type'];
/** The one live NodeClaim once it is of `type` and its node carries a record. */
async function recordedOnly(type: string): Promise<{ claim: Claim; story: DecisionStory } | undefined> {
  const live = await claims();
  if (live.length !== 1 || typeOf(live[0]!) !== type || !live[0]!.status?.nodeName) return undefined;
  const node = await core.readNode({ name: live[0]!.status.nodeName }).catch(() => undefined);
  const story = readStory(node?.metadata?.annotations?.['veneer.io/overlay-decision']);
  return story ? { claim: live[0]!, story } : undefined;
}
/** Polls `read` until it gives a value. */
async function until<T>(what: string, read: () => Promise<T | undefined>, ms: number): Promise<T> {
  const deadline = Date.now() + ms;
  for (;;) {
    const value = await read();
    if (value !== undefined) return value;
    if (Date.now() > deadline) throw new Error(`timed out after ${ms} ms waiting for ${what}`);
    await sleep(200);
  }
}
const disruptions = async () =>
  Object.fromEntries(
    (await watcher.metrics.recordedDisruptions.get()).values
      .filter((v) => v.value > 0)
      .map((v) => [`${v.labels.reason} ${v.labels.overlay_state}`, v.value]),
  );

const body = podObject({ name: 'app', nodePool: 'od', cpu: '500m' }, (type) => karpenter.vcpus.get(type)!);
// No kubelet runs here to confirm a pod's end: an evicted pod with a grace period would stay Terminating.
body.spec!.terminationGracePeriodSeconds = 0;
// A Deployment's pod comes back when evicted; the kit has no controller-manager, so the test makes it again.
let stopped = false;
const keepPod = (async () => {
  for (;;) {
    const pod = await core.readNamespacedPod({ name: 'app', namespace: 'default' }).catch(() => undefined);
    if (pod === undefined) await core.createNamespacedPod({ namespace: 'default', body }).catch(() => undefined);
    else if (pod.metadata?.deletionTimestamp)
      await core.deleteNamespacedPod({ name: 'app', namespace: 'default', gracePeriodSeconds: 0 }).catch(() => {});
    if (stopped) return;
    await sleep(250);
  }
})();
t.teardown(async () => {
  stopped = true;
  await keepPod;
});

t.test('without the overlay: the cheapest type, and no replacement', async (t) => {
  const first = await until('c6i.large launched and recorded', () => recordedOnly('c6i.large'), 120_000);
  t.equal(first.story.effect?.verdict, 'none', 'no overlay: nothing changed by one');
  t.equal(first.story.effect?.disruption, undefined, 'a provisioning launch');
  await sleep(20_000);
  t.same(
    (await claims()).map(typeOf),
    ['c6i.large'],
    '20 s of consolidation passes (consolidateAfter 5s): nothing undercuts c6i.large',
  );
});

t.test('the RI overlay makes the replacement, and the record says it exists only because of it', async (t) => {
  const old = (await claims())[0]!;
  const RI = reservedInstance('m5.large', REGION);
  await custom.createClusterCustomObject({ ...OVERLAY_API, body: RI });
  const createdAt = Date.now();
  const replaced = await until('an m5.large replacement recorded', () => recordedOnly('m5.large'), 180_000);
  t.comment(`the overlay created: replacement recorded ${secs(Date.now() - createdAt)} later`);
  const effect = replaced.story.effect!;
  t.equal(effect.verdict, 'replacement', effect.reason ?? '');
  t.same(effect.overlays, [RI.metadata.name]);
  t.match(effect.disruption, {
    reason: 'Underutilized',
    replacedCount: 1,
    replaced: [
      {
        nodeClaim: old.metadata.name,
        node: old.status?.nodeName,
        instanceType: 'c6i.large',
        capacityType: 'on-demand',
        price: { with: 0.085, without: 0.085 },
      },
    ],
    price: { with: 0.085, without: 0.085 },
    savings: 0.085,
    cheaperWithout: 0,
  });
  t.equal(replaced.story.overlay, RI.metadata.name, 'the record names the overlay');
});

t.test(
  'the RI overlay deleted: a replacement that happens with or without the Savings Plan, and the churn',
  async (t) => {
    const [before] = await claims();
    const SP = ec2InstanceSavingsPlan('c6i', REGION);
    await custom.createClusterCustomObject({ ...OVERLAY_API, body: SP });
    await until(
      'the watcher counts both overlays',
      async () =>
        /^veneer_nodewatcher_overlays\{state="counted"\} 2$/m.test(await watcher.metrics.registry.metrics()) ||
        undefined,
      30_000,
    );
    await sleep(10_000);
    t.same((await claims()).map(typeOf), ['m5.large'], 'c6i.large at 0.00 does not undercut m5.large at 0.00');
    await custom.deleteClusterCustomObject({
      ...OVERLAY_API,
      name: reservedInstance('m5.large', REGION).metadata.name,
    });
    const back = await until('a c6i.large replacement recorded', () => recordedOnly('c6i.large'), 180_000);
    t.equal(back.story.overlay, SP.metadata.name, 'the record names the Savings Plan that priced the replacement');
    const effect = back.story.effect!;
    t.same(effect.overlays, [SP.metadata.name], 'the effect is judged against the Savings Plan');
    t.equal(
      effect.verdict,
      'none',
      'without the Savings Plan the same replacement, the same CreateFleet: the launch replay answers',
    );
    t.match(effect.disruption, {
      reason: 'Underutilized',
      replaced: [
        { nodeClaim: before!.metadata.name, instanceType: 'm5.large', price: { with: 0.096, without: 0.096 } },
      ],
      cheaperWithout: 1,
    });
    t.same(
      effect.disruption?.churn,
      [{ overlay: reservedInstance('m5.large', REGION).metadata.name, state: 'gone', nodes: 1 }],
      "the replacement's record keeps the churn: the node it replaced was recorded under the RI, gone by then",
    );
    await until(
      'the churn counted',
      async () => ((await disruptions())['underutilized gone'] ? true : undefined),
      30_000,
    );
    t.match(await disruptions(), { 'underutilized gone': 1 }, 'a recorded node disrupted after its overlay went');
  },
);

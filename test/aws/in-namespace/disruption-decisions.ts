// The body of test/aws/disruption-decisions.test.ts, run in a network namespace with only loopback.
// Real Karpenter on AWS (kit/aws) with its disruption loop open (WhenEmptyOrUnderutilized,
// consolidateAfter 5s, budgets 100%) on one on-demand NodePool of m5.large, c6i.large and
// r6i.large, and the watcher beside it, as a new user would meet the disruption loop:
//
// 1. Provisioning beside emptiness. Three nodes empty out; the moment Karpenter marks the first for
//    deletion (DisruptionReason Empty), three pods come that each need a node. Their NodeClaims are
//    created within seconds of the marks, and the webhook records each inline (in the CREATE), with
//    its launch effect, as any launch: a command of Empty never launches.
// 2. An overlay deleted while Karpenter validates. One 500m pod runs on a c6i.large ($0.085/h); Veneer's
//    RI overlay prices m5.large at 0.00, and Karpenter computes the replacement (its
//    ConsolidationCandidate Event). The overlay is deleted at once, within the 15 s of validation,
//    which simulates the scheduling again but does not price again: Karpenter goes on and replaces the
//    node by an m5.large. The record judges it with the overlay that decided it: `replacement`.
import t from 'tap';
import * as k8s from '@kubernetes/client-node';
import { OVERLAY_API, until } from '../../../kit/fleet.ts';
import {
  AWS_KARPENTER_VERSION,
  OPEN_DISRUPTION,
  REGION,
  startAwsKarpenterWithWatcher,
} from '../../../kit/aws/karpenter.ts';
import { type NodeClaim, podObject } from '../../../kit/karpenter-controller.ts';
import { assertInOwnNetworkNamespace } from '../../../kit/netns.ts';
import { reservedInstance } from '../../../kit/veneer.ts';
import { type DecisionStory, readStory } from '../../../src/engine/index.ts';

assertInOwnNetworkNamespace();
t.setTimeout(420_000);
const started = Date.now();
const TYPES = ['m5.large', 'c6i.large', 'r6i.large'];
const env = await startAwsKarpenterWithWatcher({
  karpenter: {
    // An instance boots for a few seconds before its kubelet's CREATE, as on EC2.
    bootDelayMs: 3000,
    nodePools: [{ name: 'od', capacityTypes: ['on-demand'], instanceTypes: TYPES, disruption: OPEN_DISRUPTION }],
  },
});
const { karpenter, admin } = env;
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

const live = async () => (await karpenter.nodeClaims()).filter((c) => !('deletionTimestamp' in c.metadata));
const createdAt = (c: NodeClaim) => Date.parse(c.metadata.creationTimestamp ?? '');
const typeOf = (c: NodeClaim) => c.metadata.labels?.['node.kubernetes.io/instance-type'];
const disruptionOf = (c: NodeClaim) =>
  c.status?.conditions?.find((x) => x.type === 'DisruptionReason' && x.status === 'True') as
    | { reason?: string; lastTransitionTime?: string }
    | undefined;
async function storyOfClaim(c: NodeClaim): Promise<DecisionStory | undefined> {
  if (!c.status?.nodeName) return undefined;
  const node = await core.readNode({ name: c.status.nodeName }).catch(() => undefined);
  return readStory(node?.metadata?.annotations?.['veneer.io/overlay-decision']);
}
/** Pods that need a node each (1100m: no two fit one of these 2-vCPU types), evicted ones gone for good. */
async function createPods(names: string[], cpu: string): Promise<void> {
  for (const name of names) {
    const body = podObject({ name, nodePool: 'od', cpu }, (type) => karpenter.vcpus.get(type)!);
    // No kubelet runs here to confirm a pod's end: an evicted pod with a grace period would stay Terminating.
    body.spec!.terminationGracePeriodSeconds = 0;
    await core.createNamespacedPod({ namespace: 'default', body });
  }
}
const deletePods = (names: string[]) =>
  Promise.all(
    names.map((name) =>
      core.deleteNamespacedPod({ name, namespace: 'default', gracePeriodSeconds: 0 }).catch(() => undefined),
    ),
  );

t.test('provisioning beside an emptiness deletion is recorded inline, with its launch effect', async (t) => {
  const first = ['first-0', 'first-1', 'first-2'];
  await createPods(first, '1100m');
  await until(
    'three nodes recorded',
    async () => (await Promise.all((await live()).map(storyOfClaim))).filter(Boolean).length === 3,
    120_000,
  );
  const emptied = new Set((await live()).map((c) => c.metadata.name));
  await deletePods(first);
  // The moment Karpenter marks the first empty node, pods that need nodes come.
  let markedAt = 0;
  await until(
    'an empty node marked for deletion',
    async () => {
      const marked = (await karpenter.nodeClaims()).filter(
        (c) => emptied.has(c.metadata.name) && disruptionOf(c)?.reason === 'Empty',
      );
      if (marked.length > 0) markedAt = Date.parse(disruptionOf(marked[0]!)!.lastTransitionTime ?? '');
      return marked.length > 0;
    },
    90_000,
  );
  const second = ['second-0', 'second-1', 'second-2'];
  await createPods(second, '1100m');
  const launched = async () => (await live()).filter((c) => !emptied.has(c.metadata.name));
  await until(
    'three new nodes recorded',
    async () => {
      const claims = await launched();
      return claims.length === 3 && (await Promise.all(claims.map(storyOfClaim))).every(Boolean);
    },
    120_000,
  );
  const claims = await launched();
  const after = claims.map((c) => createdAt(c) - markedAt).sort((a, b) => a - b);
  t.comment(`NodeClaims created ${after.map(secs).join(', ')} after the first Empty mark`);
  t.ok(after[0]! <= 5000, 'the first within 5 s of the mark: beside the deletion');
  for (const c of claims) {
    const story = (await storyOfClaim(c))!;
    t.equal(story.decidedBy, 'webhook', `${typeOf(c)}: recorded inline, in the CREATE or its registration`);
    t.equal(story.effect?.verdict, 'none', 'its launch effect: no overlay, nothing changed by one');
    t.equal(story.effect?.disruption, undefined, 'a provisioning launch, not a replacement');
  }
  t.equal(
    (await karpenter.nodeClaims()).filter((c) => emptied.has(c.metadata.name) && disruptionOf(c)?.reason !== 'Empty')
      .length,
    0,
    'the emptied nodes were deleted by Emptiness, nothing else',
  );
  await deletePods(second);
  await until('the nodes emptied and gone', async () => (await karpenter.nodeClaims()).length === 0, 120_000);
});

interface EventItem {
  involvedObject?: { name?: string };
  reason?: string;
  message?: string;
  firstTimestamp?: Date;
  lastTimestamp?: Date;
}
const eventsOn = async (nodeClaim: string, reason: string): Promise<EventItem[]> =>
  (
    await core.listNamespacedEvent({
      namespace: 'default',
      fieldSelector: `involvedObject.kind=NodeClaim,involvedObject.name=${nodeClaim},reason=${reason}`,
    })
  ).items as EventItem[];

t.test('an overlay deleted while Karpenter validates still decided the replacement', async (t) => {
  await createPods(['app'], '500m');
  let old: NodeClaim | undefined;
  await until(
    'c6i.large launched and recorded',
    async () => {
      const [c] = await live();
      old = c;
      return c !== undefined && typeOf(c) === 'c6i.large' && (await storyOfClaim(c)) !== undefined;
    },
    120_000,
  );
  const RI = reservedInstance('m5.large', REGION);
  await custom.createClusterCustomObject({ ...OVERLAY_API, body: RI });
  const overlayAt = Date.now();
  let computedAt = 0;
  await until(
    "Karpenter's consolidation computed the replacement",
    async () => {
      const told = (await eventsOn(old!.metadata.name, 'ConsolidationCandidate')).find(
        (e) => / replace: /.test(e.message ?? '') && new Date(e.lastTimestamp ?? 0).getTime() >= overlayAt - 1000,
      );
      computedAt = told ? new Date(told.lastTimestamp!).getTime() : 0;
      return told !== undefined;
    },
    90_000,
  );
  await custom.deleteClusterCustomObject({ ...OVERLAY_API, name: RI.metadata.name });
  const deletedAt = Date.now();
  t.comment(
    `computed ${secs(computedAt - overlayAt)} after the overlay; deleted ${secs(deletedAt - computedAt)} later`,
  );
  let replacement: NodeClaim | undefined;
  await until(
    'an m5.large replacement recorded',
    async () => {
      replacement = (await live()).find((c) => typeOf(c) === 'm5.large');
      return replacement !== undefined && (await storyOfClaim(replacement)) !== undefined;
    },
    120_000,
  );
  const marked = Date.parse(
    disruptionOf((await karpenter.nodeClaims()).find((c) => c.metadata.name === old!.metadata.name) ?? old!)
      ?.lastTransitionTime ?? '',
  );
  t.ok(
    Number.isNaN(marked) || marked >= deletedAt - 1000,
    'Karpenter marked the node after the overlay was gone: validation did not price again',
  );
  const launching = await eventsOn(replacement!.metadata.name, 'DisruptionLaunching');
  const eventDelay = new Date(launching[0]?.firstTimestamp ?? 0).getTime() - createdAt(replacement!);
  t.comment(`DisruptionLaunching ${secs(eventDelay)} after the replacement's creation`);
  const effect = (await storyOfClaim(replacement!))!.effect!;
  t.equal(effect.verdict, 'replacement', `judged with the overlay that decided it (${effect.reason ?? ''})`);
  t.same(effect.overlays, [RI.metadata.name]);
  t.match(effect.disruption, { reason: 'Underutilized', replaced: [{ nodeClaim: old!.metadata.name }] });
  await deletePods(['app']);
});

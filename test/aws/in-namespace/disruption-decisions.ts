// The body of test/aws/disruption-decisions.test.ts, run in a network namespace with only loopback.
// Real Karpenter on AWS (kit/aws) with its disruption loop open on one on-demand NodePool
// (in-namespace/pool-scene.ts) and the watcher beside it, as a new user would meet the loop:
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
import { OVERLAY_API, until } from '../../../kit/fleet.ts';
import { REGION } from '../../../kit/aws/karpenter.ts';
import type { NodeClaim } from '../../../kit/karpenter-controller.ts';
import { assertInOwnNetworkNamespace } from '../../../kit/netns.ts';
import { reservedInstance } from '../../../kit/veneer.ts';
import { createdAt, disruptionOf, secs, startPoolScene, typeOf } from './pool-scene.ts';

assertInOwnNetworkNamespace();
t.setTimeout(420_000);
const {
  karpenter,
  custom,
  core,
  live,
  storyOfClaim,
  createPods,
  deletePods,
  recordedOfType,
  untilPoolEmpty,
  explained,
} = await startPoolScene(t);

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
    await explained(t, { claim: c, story });
  }
  t.equal(
    (await karpenter.nodeClaims()).filter((c) => emptied.has(c.metadata.name) && disruptionOf(c)?.reason !== 'Empty')
      .length,
    0,
    'the emptied nodes were deleted by Emptiness, nothing else',
  );
  await deletePods(second);
  await untilPoolEmpty();
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
  const { claim: replacement, story, effect } = await recordedOfType('m5.large', 120_000);
  const marked = Date.parse(
    disruptionOf((await karpenter.nodeClaims()).find((c) => c.metadata.name === old!.metadata.name) ?? old!)
      ?.lastTransitionTime ?? '',
  );
  t.ok(
    Number.isNaN(marked) || marked >= deletedAt - 1000,
    'Karpenter marked the node after the overlay was gone: validation did not price again',
  );
  const launching = await eventsOn(replacement.metadata.name, 'DisruptionLaunching');
  const eventDelay = new Date(launching[0]?.firstTimestamp ?? 0).getTime() - createdAt(replacement);
  t.comment(`DisruptionLaunching ${secs(eventDelay)} after the replacement's creation`);
  t.equal(effect.verdict, 'replacement', `judged with the overlay that decided it (${effect.reason ?? ''})`);
  t.same(effect.overlays, [RI.metadata.name]);
  t.match(effect.disruption, { reason: 'Underutilized', replaced: [{ nodeClaim: old!.metadata.name }] });
  // The overlay is gone: explain gives the record's effect, and beside it what deciding again now reads.
  await explained(t, { claim: replacement, story }, { overlayGone: true });
  await deletePods(['app']);
  await untilPoolEmpty();
});

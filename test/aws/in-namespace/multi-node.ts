// The body of test/aws/multi-node.test.ts, run in a network namespace with only loopback. Real
// Karpenter on AWS with its disruption loop open on one on-demand NodePool (in-namespace/pool-scene.ts)
// and the watcher beside it.
//
// Multi-node consolidation. Two c6i.large nodes carry a 600m pod each (laid out with the budget
//    at 0 and the first node tainted, so that each pod gets its own node). Both pods fit one 2-vCPU node.
//    Without an overlay, packing them into one node is no multi-node command (filterOutSameInstanceType:
//    every option must undercut c6i.large, the candidates' own type, and none does), so single-node
//    consolidation deletes one node instead. With the RI overlay pricing m5.large at 0.00, the two
//    nodes are replaced by one m5.large: a replacement that exists only because of the overlay.
import t from 'tap';
import { OVERLAY_API, until } from '../../../kit/fleet.ts';
import { REGION } from '../../../kit/aws/karpenter.ts';
import type { NodeClaim } from '../../../kit/karpenter-controller.ts';
import { assertInOwnNetworkNamespace } from '../../../kit/netns.ts';
import { reservedInstance } from '../../../kit/veneer.ts';
import { startPoolScene, typeOf } from './pool-scene.ts';

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
  budget,
  hold,
  keepPods,
  recordedOfType,
  explained,
  untilPoolEmpty,
} = await startPoolScene(t);

const PAIR = ['pair-a', 'pair-b'];
/** Two nodes of the pool's cheapest type, a 600m pod on each (both fit one), every disruption held. */
async function twoNodesOnePodEach(): Promise<NodeClaim[]> {
  await budget('0');
  await createPods([PAIR[0]!], '600m');
  // Its pod bound to it first: tainted before, the node would stay empty and both pods share the second.
  let first = '';
  await until(
    'the first pod bound to its node',
    async () => {
      first = (await core.readNamespacedPod({ name: PAIR[0]!, namespace: 'default' })).spec?.nodeName ?? '';
      return first !== '';
    },
    120_000,
  );
  // The pod's node, not its NodeClaim's status.nodeName: on a loaded machine Karpenter may not
  // have written that yet when the pod is bound.
  await hold(first, true);
  await createPods([PAIR[1]!], '600m');
  await until(
    'the second pod bound to a second node',
    async () => (await core.readNamespacedPod({ name: PAIR[1]!, namespace: 'default' })).spec?.nodeName !== undefined,
    120_000,
  );
  await hold(first, false);
  await until(
    'both recorded',
    async () => (await Promise.all((await live()).map(storyOfClaim))).every(Boolean),
    60_000,
  );
  // Both candidates at once: a node whose pod came less than consolidateAfter ago is no candidate
  // yet, and single-node consolidation would take the other alone.
  await until(
    'both nodes Consolidatable',
    async () =>
      (await live()).every((c) =>
        c.status?.conditions?.some((x) => x.type === 'Consolidatable' && x.status === 'True'),
      ),
    60_000,
  );
  return live();
}
/** Lets go of the pods and waits for Emptiness to take their nodes. */
async function emptyPool(stopKeeping: () => Promise<void>): Promise<void> {
  await stopKeeping();
  await deletePods(PAIR);
  await budget('100%');
  await untilPoolEmpty();
}

t.test('multi-node: two nodes packed into one an overlay prices below their own type', async (t) => {
  const laid = await twoNodesOnePodEach();
  t.same(laid.map(typeOf), ['c6i.large', 'c6i.large'], 'each pod on a node of the cheapest type');
  const before = new Set(laid.map((c) => c.metadata.name));
  let stopKeeping = keepPods(PAIR, '600m');
  await budget('100%');
  await until('one node left', async () => (await live()).length === 1, 120_000);
  // Karpenter launches a replacement before it deletes what it replaces: once the deleted claim is
  // gone, the command is over, and any launch of it would be here.
  await until('the deleted NodeClaim gone', async () => (await karpenter.nodeClaims()).length === 1, 120_000);
  t.same(
    (await karpenter.nodeClaims()).filter((c) => !before.has(c.metadata.name)).map(typeOf),
    [],
    'without an overlay: single-node consolidation deleted a node, and nothing was launched',
  );
  await emptyPool(stopKeeping);

  // The same layout, then the overlay: laid out after it, the pods would launch m5.large at 0.00 at once.
  const again = await twoNodesOnePodEach();
  t.same(again.map(typeOf), ['c6i.large', 'c6i.large'], 'the same layout again');
  const pair = new Set(again.map((c) => c.metadata.name));
  const RI = reservedInstance('m5.large', REGION);
  await custom.createClusterCustomObject({ ...OVERLAY_API, body: RI });
  await until(
    "the overlay validated by Karpenter's NodeOverlay controller",
    async () =>
      (
        (await custom.getClusterCustomObject({ ...OVERLAY_API, name: RI.metadata.name })) as {
          status?: { conditions?: { type: string; status: string }[] };
        }
      ).status?.conditions?.some((c) => c.type === 'Ready' && c.status === 'True') === true,
    60_000,
  );
  stopKeeping = keepPods(PAIR, '600m');
  await budget('100%');
  const replaced = await recordedOfType('m5.large', 150_000);
  const { effect } = replaced;
  await explained(t, replaced);
  t.equal(effect.verdict, 'replacement', `without the overlay the command is no command (${effect.reason ?? ''})`);
  t.same(effect.overlays, [RI.metadata.name]);
  t.match(effect.disruption, { reason: 'Underutilized', replacedCount: 2 });
  t.same(
    new Set(effect.disruption?.replaced.map((r) => r.nodeClaim)),
    pair,
    'the two nodes it replaced, and only those',
  );
  await custom.deleteClusterCustomObject({ ...OVERLAY_API, name: RI.metadata.name });
  await emptyPool(stopKeeping);
});

// The body of test/aws/balanced.test.ts, run in a network namespace with only loopback. Real
// Karpenter on AWS, one on-demand NodePool with consolidationPolicy Balanced (Karpenter v1.14+:
// a move is made only when its share of the pool's cost saved is at least half its share of the
// pool's disruption), and the watcher beside it (in-namespace/pool-scene.ts):
//
// 1. One 500m pod on an r6i.large ($0.126/h), the only type the pool allows. The pool then allows
//    m5.large and c6i.large: c6i.large ($0.085/h) undercuts the node, but saves a third of the
//    pool's cost for all of its disruption (score 0.33 < 1/2): Balanced rejects the move, and the
//    node stays.
// 2. Veneer's RI overlay prices m5.large at 0.00: the move now saves the whole pool's cost (score
//    1.0), Karpenter approves it (its ConsolidationApproved Event) and replaces the node by an
//    m5.large. Without the overlay the price filter alone would have let c6i.large in, but Balanced
//    would have rejected the move: the replacement exists only because of the overlay, and the record
//    says `replacement`, where it read `none`.
import t from 'tap';
import { OVERLAY_API, until } from '../../../kit/fleet.ts';
import { REGION } from '../../../kit/aws/karpenter.ts';
import type { NodeClaim } from '../../../kit/karpenter-controller.ts';
import { assertInOwnNetworkNamespace } from '../../../kit/netns.ts';
import { reservedInstance } from '../../../kit/veneer.ts';
import { POOL_TYPES, secs, startPoolScene, typeOf } from './pool-scene.ts';

assertInOwnNetworkNamespace();
t.setTimeout(420_000);
const { karpenter, custom, live, storyOfClaim, createPods, allowTypes, keepPods, recordedOfType, explained } =
  await startPoolScene(t, {
    instanceTypes: ['r6i.large'],
    disruption: { consolidationPolicy: 'Balanced', consolidateAfter: '5s', budgets: [{ nodes: '100%' }] },
  });

t.test('Balanced: a move only the overlay makes worth its disruption', async (t) => {
  await createPods(['app'], '500m');
  let first: NodeClaim | undefined;
  await until(
    'r6i.large launched and recorded',
    async () => {
      first = (await live())[0];
      return first !== undefined && (await storyOfClaim(first)) !== undefined;
    },
    120_000,
  );
  t.equal(typeOf(first!), 'r6i.large');
  const stopKeeping = keepPods(['app'], '500m');
  t.teardown(stopKeeping);
  // Balanced rejects a move with a metric, not an Event: wait for Karpenter to have scored and
  // rejected this one (the pass after the NodePool changed) rather than a fixed 30 s.
  const rejected = () =>
    karpenter.metric('karpenter_consolidation_moves_total', {
      decision: 'rejected',
      nodepool: 'od',
      policy: 'Balanced',
    });
  const rejectedBefore = await rejected();
  const allowedAt = Date.now();
  await allowTypes(POOL_TYPES);
  await until(
    'Balanced to score the move to c6i.large and reject it',
    async () => (await rejected()) > rejectedBefore,
    90_000,
  );
  t.comment(`Balanced rejected the move ${secs(Date.now() - allowedAt)} after the pool allowed c6i.large`);
  t.same(
    (await live()).map((c) => c.metadata.name),
    [first!.metadata.name],
    'a consolidation pass scored the move: c6i.large undercuts the node, and Balanced rejects it',
  );

  const RI = reservedInstance('m5.large', REGION);
  await custom.createClusterCustomObject({ ...OVERLAY_API, body: RI });
  const replaced = await recordedOfType('m5.large', 150_000);
  const { effect } = replaced;
  await explained(t, replaced);
  t.equal(
    effect.verdict,
    'replacement',
    `Balanced would have rejected it without the overlay (${effect.reason ?? ''})`,
  );
  t.same(effect.overlays, [RI.metadata.name]);
  t.match(effect.disruption, {
    reason: 'Underutilized',
    replaced: [{ nodeClaim: first!.metadata.name, instanceType: 'r6i.large' }],
  });
  t.ok((effect.disruption?.cheaperWithout ?? 0) > 0, 'by price alone c6i.large would have undercut it');
});

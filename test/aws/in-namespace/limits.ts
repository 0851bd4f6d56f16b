// The body of test/aws/limits.test.ts, run in a network namespace with only loopback. Real Karpenter
// on AWS with consolidation open in one on-demand NodePool (in-namespace/pool-scene.ts), the watcher
// beside it, and overlays shaped like an EC2 Instance Savings Plan's (a family on-demand) at -50%:
//
// 1. The replaced node discounted. One 500m pod on an m5.xlarge, the only type the pool allows, with
//    m5 at -50% ($0.096/h). The pool then allows m5.large and c6i.large too: Karpenter replaces the
//    node by an m5.large ($0.048/h with the overlay). Without it the m5.xlarge lists $0.192/h and the
//    cheapest type the pod fits, c6i.large ($0.085/h), would replace it: `instance-type`. The
//    watcher tells that only by computing the pod's fit on c6i.large (half the m5.large's memory)
//    as Karpenter's AWS provider does; before, it read `unknown` (unseen-options).
// 2. A NodePool limit. The pool allows c6i.large, t3.large and m5.large with a limit of 30 pods.
//    Karpenter's scheduling leaves out a type whose capacity is over what the limit leaves: one 500m
//    pod lands on a c6i.large ($0.085/h), as t3.large ($0.0832/h) holds 35 pods (ENI-limited, as the
//    AWS provider computes it). Karpenter's consolidation looks at it and finds nothing cheaper: the
//    world without overlays, seen. Then Veneer's overlays: c6i at -50% ($0.0425/h) and the RI
//    pricing m5.large at 0.00, and Karpenter replaces the node by an m5.large (29 pods: within the
//    limit, which the simulation applies without the candidate). Without the overlays nothing
//    undercuts the c6i.large within the limit: `replacement`. With them t3.large was cut by price
//    as well, so the options Karpenter kept do not tell it was over the limit: the watcher reads it.
//    (Karpenter refuses to launch while the pool's usage, the candidate's included, is over a
//    limit: a memory limit under t3.large's 7.4Gi would be under the m5.large's too.)
import t from 'tap';
import { OVERLAY_API, until } from '../../../kit/fleet.ts';
import { REGION } from '../../../kit/aws/karpenter.ts';
import { NODEPOOL_API } from '../../../kit/karpenter-controller.ts';
import { mergePatch } from '../../../kit/karpenter-sim.ts';
import { assertInOwnNetworkNamespace } from '../../../kit/netns.ts';
import { ec2InstanceSavingsPlan, reservedInstance } from '../../../kit/veneer.ts';
import { startPoolScene } from './pool-scene.ts';

assertInOwnNetworkNamespace();
t.setTimeout(420_000);
const scene = await startPoolScene(t, { instanceTypes: ['m5.xlarge'] });
const { core, custom, createPods, deletePods, allowTypes, recordedOfType, explained, untilPoolEmpty } = scene;

/** Veneer's EC2 Instance Savings Plan overlay for a family, at -50% rather than 0.00: sizes do not tie. */
function halfPrice(family: string) {
  const o = ec2InstanceSavingsPlan(family, REGION);
  return { ...o, spec: { requirements: o.spec?.requirements, weight: o.spec?.weight, priceAdjustment: '-50%' } };
}

t.test('a replaced node an overlay discounted: the pod fits c6i.large, so without it c6i.large', async (t) => {
  const sp = halfPrice('m5');
  await custom.createClusterCustomObject({ ...OVERLAY_API, body: sp });
  await createPods(['fit-0'], '500m');
  const first = await recordedOfType('m5.xlarge');
  await allowTypes(['m5.xlarge', 'm5.large', 'c6i.large']);
  const replaced = await recordedOfType('m5.large');
  const { effect } = replaced;
  t.equal(replaced.story.overlay, sp.metadata.name, 'the record names the overlay that priced m5.large');
  t.equal(effect.verdict, 'instance-type', `without the overlay c6i.large: ${effect.reason ?? ''}`);
  t.match(effect.disruption, {
    reason: 'Underutilized',
    replaced: [
      { nodeClaim: first.claim.metadata.name, instanceType: 'm5.xlarge', price: { with: 0.096, without: 0.192 } },
    ],
  });
  t.match(effect.without, { instanceTypes: ['c6i.large'] }, 'the launch without it: c6i.large');
  await explained(t, replaced);
  await deletePods(['fit-0']);
  await untilPoolEmpty();
  await custom.deleteClusterCustomObject({ ...OVERLAY_API, name: sp.metadata.name });
});

t.test('a NodePool limit keeps t3.large out: without the overlays nothing undercuts, replacement', async (t) => {
  const ri = reservedInstance('m5.large', REGION);
  const sp = halfPrice('c6i');
  await custom.patchClusterCustomObject(
    { ...NODEPOOL_API, name: 'od', body: { spec: { limits: { pods: '30' } } } },
    mergePatch,
  );
  await allowTypes(['c6i.large', 't3.large', 'm5.large']);
  await createPods(['limit-0'], '500m');
  const first = await recordedOfType('c6i.large');
  t.equal(first.effect.verdict, 'none', 't3.large, the cheapest, is over the limit: c6i.large, no overlay yet');
  // The world without the overlays, seen: Karpenter's consolidation looks at the node and finds
  // nothing cheaper within the limit (its Unconsolidatable Event, once per node).
  const node = first.claim.status!.nodeName!;
  await until(
    "Karpenter's consolidation to find nothing cheaper",
    async () =>
      (
        await core.listEventForAllNamespaces({
          fieldSelector: `involvedObject.name=${node},reason=Unconsolidatable`,
        })
      ).items.some((e) => e.message === "Can't replace with a cheaper node"),
    60_000,
  );
  t.pass("without the overlays: Unconsolidatable, Can't replace with a cheaper node");
  await custom.createClusterCustomObject({ ...OVERLAY_API, body: sp });
  await custom.createClusterCustomObject({ ...OVERLAY_API, body: ri });
  const replaced = await recordedOfType('m5.large');
  const { effect } = replaced;
  t.equal(replaced.story.overlay, ri.metadata.name);
  t.equal(
    effect.verdict,
    'replacement',
    `t3.large is over the limit, and nothing else undercuts without the overlays: ${effect.reason ?? ''}`,
  );
  t.match(effect.disruption, {
    reason: 'Underutilized',
    replaced: [
      { nodeClaim: first.claim.metadata.name, instanceType: 'c6i.large', price: { with: 0.0425, without: 0.085 } },
    ],
    replacedWithout: false,
  });
  await explained(t, replaced);
  await deletePods(['limit-0']);
});

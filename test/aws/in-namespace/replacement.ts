// The body of test/aws/replacement.test.ts, run in a network namespace with only loopback. Real
// Karpenter on AWS with consolidation open (WhenEmptyOrUnderutilized, consolidateAfter 5s, budgets
// 100%) in one on-demand NodePool of m5.large, c6i.large and r6i.large, and the watcher beside it.
// The scene is the demo's own (`npm run demo -- --aws`, scripts/demo-aws-consolidation.ts): this
// test runs it, so that `npm test` runs it once (test/packaging/demo.test.ts runs the demo without it), and
// checks what it prints, the records it returns, and more at its checkpoints:
//
// 1. One 500m pod: Karpenter launches the cheapest, c6i.large ($0.085/h; m5.large lists $0.096/h).
//    Nothing is cheaper: Karpenter's consolidation looks at it and leaves it.
// 2. Veneer's Reserved Instance overlay prices on-demand m5.large at 0.00. Karpenter re-evaluates
//    (an overlay change marks the cluster unconsolidated) and replaces the c6i.large node by an
//    m5.large. The watcher recognises the replacement (the candidate's DisruptionReason, the
//    DisruptionLaunching Event) and records it `replacement`: without the overlay nothing
//    undercuts c6i.large, so there would have been no launch at all. Before this, the record read
//    `none`. `explain` and `report` say so, live.
// 3. Veneer's EC2 Instance Savings Plan overlay for c6i comes (c6i.large at 0.00: not cheaper than
//    m5.large at 0.00, nothing moves), then the RI overlay is deleted (Veneer does so when the
//    commitment is used up): the m5.large node is priced at its list price again, and Karpenter
//    replaces it by a c6i.large priced by the Savings Plan. That replacement would happen without
//    the Savings Plan too (c6i.large lists $0.085/h, under m5.large's $0.096/h): its record names the
//    Savings Plan and reads the launch replay (`none`), not `replacement`. And the churn is counted:
//    a recorded node disrupted (Underutilized) while the overlay its record names is gone, told on
//    the NodeOverlay, kept in the replacement's record and in `report`.
import t, { type Test } from 'tap';
import { OVERLAY_API, sleep, until } from '../../../kit/fleet.ts';
import { REGION } from '../../../kit/aws/karpenter.ts';
import { assertInOwnNetworkNamespace } from '../../../kit/netns.ts';
import { ec2InstanceSavingsPlan, reservedInstance } from '../../../kit/veneer.ts';
import { consolidationScene, type Recorded } from '../../../scripts/demo-aws-consolidation.ts';
import { explainAgrees, runCli } from './explained.ts';
import { secs, startSceneEnv } from './scene-env.ts';

assertInOwnNetworkNamespace();
t.setTimeout(300_000);
// No NodePool of the kit's: the scene makes its own.
const { env, custom, core, kubeconfig } = await startSceneEnv(t, { bootDelayMs: 2000, nodePools: [] });
const { karpenter, admin, watcher } = env;
const types = async () =>
  (await karpenter.nodeClaims())
    .filter((c) => !('deletionTimestamp' in c.metadata))
    .map((c) => c.metadata.labels?.['node.kubernetes.io/instance-type']);
const RI = reservedInstance('m5.large', REGION);
const SP = ec2InstanceSavingsPlan('c6i', REGION);

// What the scene prints, as the demo would print it.
let out = '';
const print = (line: string) => {
  out += `${line}\n`;
};
const cli = async (args: string[]) => {
  print(`\n$ veneer-node-watcher ${args.join(' ')}`);
  print((await runCli(kubeconfig, args)).trimEnd());
};

/** Checked at the scene's first checkpoint: the c6i.large node recorded, before any overlay. */
async function launched(t: Test, first: Recorded): Promise<void> {
  t.equal(first.story.effect?.verdict, 'none', 'no overlay: nothing changed by one');
  t.equal(first.story.effect?.disruption, undefined, 'a provisioning launch');
  // Karpenter says when it looked and found nothing cheaper (its Unconsolidatable Event on the
  // node): wait for that rather than a fixed 20 s of passes.
  const looked = Date.now();
  let message: string | undefined;
  await until(
    "Karpenter's consolidation to look at the c6i.large node and find nothing cheaper",
    async () => {
      const events = await core.listEventForAllNamespaces({
        fieldSelector: `involvedObject.name=${first.node},reason=Unconsolidatable`,
      });
      message = events.items.find((e) => e.message === "Can't replace with a cheaper node")?.message;
      return message !== undefined;
    },
    60_000,
  );
  t.comment(`Karpenter: "${message}" ${secs(Date.now() - looked)} after the record`);
  t.same(
    await types(),
    ['c6i.large'],
    'a consolidation pass looked at it (consolidateAfter 5s): nothing undercuts c6i.large',
  );
}

/** Checked at the second: the m5.large replacement recorded; then the Savings Plan comes, and nothing moves. */
async function beforeOverlayGoes(t: Test, first: Recorded, replaced: Recorded): Promise<void> {
  const effect = replaced.story.effect!;
  t.equal(effect.verdict, 'replacement', effect.reason ?? '');
  t.same(effect.overlays, [RI.metadata.name]);
  t.match(effect.disruption, {
    reason: 'Underutilized',
    replacedCount: 1,
    replaced: [
      {
        nodeClaim: first.claim,
        node: first.node,
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
  await t.test('explained', (t) => explainAgrees(t, kubeconfig, replaced.node, replaced.story));

  await custom.createClusterCustomObject({ ...OVERLAY_API, body: SP });
  await until(
    'the watcher counts both overlays',
    async () => /^veneer_nodewatcher_overlays\{state="counted"\} 2$/m.test(await watcher.metrics.registry.metrics()),
    30_000,
  );
  // No signal says "Karpenter priced c6i.large at 0.00 and found it no cheaper" (the node's
  // Unconsolidatable Event was sent before, and Karpenter sends it once per node): a pass's time.
  await sleep(10_000);
  t.same(await types(), ['m5.large'], 'c6i.large at 0.00 does not undercut m5.large at 0.00');
}

t.test(
  "the demo's consolidation scene: a replacement only the RI overlay makes, then the churn once it goes",
  async (t) => {
    let first: Recorded | undefined;
    const sceneStarted = Date.now();
    const { replacement, back } = await consolidationScene({
      admin,
      watcher,
      vcpusOf: (type) => karpenter.vcpus.get(type)!,
      step: (msg) => print(`[scene] ${msg}`),
      cli,
      print,
      checkpoints: {
        launched: async (r) => {
          first = r;
          await t.test('without the overlay: the cheapest type, and no replacement', (t) => launched(t, r));
        },
        beforeOverlayGoes: async (r) => {
          await t.test('the RI overlay makes the replacement, and the record says it exists only because of it', (t) =>
            beforeOverlayGoes(t, first!, r),
          );
        },
      },
    });
    t.comment(`the scene ran in ${secs(Date.now() - sceneStarted)}`);

    t.equal(back.story.overlay, SP.metadata.name, 'the record names the Savings Plan that priced the replacement');
    await t.test('explained', (t) => explainAgrees(t, kubeconfig, back.node, back.story));
    const effect = back.story.effect!;
    t.same(effect.overlays, [SP.metadata.name], 'the effect is judged against the Savings Plan');
    t.equal(
      effect.verdict,
      'none',
      'without the Savings Plan the same replacement, the same CreateFleet: the launch replay answers',
    );
    t.match(effect.disruption, {
      reason: 'Underutilized',
      replaced: [{ nodeClaim: replacement.claim, instanceType: 'm5.large', price: { with: 0.096, without: 0.096 } }],
      cheaperWithout: 1,
    });
    t.same(
      effect.disruption?.churn,
      [{ overlay: RI.metadata.name, state: 'gone', nodes: 1 }],
      "the replacement's record keeps the churn: the node it replaced was recorded under the RI, gone by then",
    );

    // What the demo prints of it (test/packaging/demo.test.ts checked these when the demo ran the scene).
    t.match(
      out,
      /^ {2}\S+: effect replacement \(launched by Karpenter's disruption: Underutilized, replacing c6i\.large \S+; options that undercut without the selected overlays: 0\)$/m,
      'the m5.large replacement exists only because of the RI overlay',
    );
    t.match(out, /^ {4}launched by Karpenter's disruption: Underutilized, replacing 1 node\(s\)$/m, 'explain tells it');
    t.match(
      out,
      /^ {4}without the selected overlays Karpenter's consolidation would not have made this replacement$/m,
      'explain: whether the command stands without them',
    );
    t.match(
      out,
      /^cost-aware-ri-m5\.large-us-east-1 +30 +reserved-instance +m5 +m5\.large +us-east-1 +1 +0 +0 +0 +1 +0 +0 +0\.0960 /m,
      'report: REPLACED 1',
    );
    t.match(
      out,
      /^ {4}churn: 1 recorded node\(s\) replaced after cost-aware-ri-m5\.large-us-east-1, which their record names, went$/m,
      "explain: the replacement's record keeps the churn",
    );
    t.match(
      out,
      /^cost-aware-ri-m5\.large-us-east-1 +- +- +- +- +- +0 +0 +0 +0 +0 +1 +0 +0\.0000 +- +gone$/m,
      'report, once the overlay is gone: CHURNED 1, from the record of the node that replaced its node',
    );
    t.match(
      out,
      /^ {2}\S+: effect none \(launched by Karpenter's disruption: Underutilized, replacing m5\.large \S+; options that undercut without the selected overlays: 1\)$/m,
      'the way back happens without any overlay: the launch replay',
    );
    t.match(
      out,
      /^ {2}veneer_nodewatcher_recorded_disruptions_total\{reason="underutilized",overlay_state="gone"\} 1$/m,
      'a recorded node disrupted after its overlay went',
    );
    t.match(out, /^ {2}Event on NodeOverlay cost-aware-ri-m5\.large-us-east-1: NodeDisruptedAfterDeletion: /m);
    if (!t.passing()) t.comment(out);
  },
);

// The body of test/aws/veneer.test.ts, run in a network namespace with only loopback. Real Karpenter
// on AWS with the watcher beside it, and the overlays Veneer itself makes (kit/veneer.ts, after
// Nextdoor/veneer's pkg/overlay and pkg/preference), each case in NodePools of its own (on-demand,
// nothing disrupted) and one 1500m pod per launch, so each launch gets a node of its own:
//
// 1. An EC2 Instance Savings Plan overlay prices the whole c6i family at 0.00, so every c6i size
//    ties. The record is compared with the same pod launched once the overlay is deleted.
// 2. A preference (`pref-<pool>-15`, weight 15, -20% on m5, scoped to its NodePool): m5.large
//    ($0.0768/h) undercuts c6i.large ($0.085/h). Its record carries no capacity type; the same pod in
//    a NodePool the preference does not name launches c6i.large.
// 3. Disabled mode: Veneer's RI overlay for m5.large with `veneer.io/disabled In [true]`, which no
//    NodePool or type defines: it prices nothing, and the launch is not influenced.
// 4. A weight collision: a preference numbered 20 on m5 in a NodePool Veneer's EC2 Instance SP for
//    m5 (weight 20) also prices. Karpenter orders equal weights by name, last first (OrderByWeight),
//    so it applies the preference and marks the Savings Plan a Conflict, which then applies nowhere:
//    in the preference's NodePool the record names the preference, and in another NodePool m5.large
//    is at its list price again, the launch c6i.large and not influenced.
// Each record is read back by `explain NODE -o json` live.
import t from 'tap';
import type * as k8s from '@kubernetes/client-node';
import { OVERLAY_API, until } from '../../../kit/fleet.ts';
import { awsNodePoolObject, REGION } from '../../../kit/aws/karpenter.ts';
import { NODEPOOL_API, podObject } from '../../../kit/karpenter-controller.ts';
import { assertInOwnNetworkNamespace } from '../../../kit/netns.ts';
import { storyOf } from '../../../kit/node-history.ts';
import {
  disabled,
  ec2InstanceSavingsPlan,
  preferenceOverlay,
  reservedInstance,
  type VeneerOverlay,
} from '../../../kit/veneer.ts';
import { explainAgrees } from './explained.ts';
import { secs, startSceneEnv } from './scene-env.ts';

assertInOwnNetworkNamespace();
t.setTimeout(360_000);
const { env, custom, core, kubeconfig, started } = await startSceneEnv(t, { bootDelayMs: 2000, nodePools: [] });
const { karpenter, watcher } = env;

interface Condition {
  type: string;
  status: string;
  reason?: string;
}
const conditionsOf = async (name: string) =>
  (
    (await custom.getClusterCustomObject({ ...OVERLAY_API, name })) as {
      status?: { conditions?: Condition[] };
    }
  ).status?.conditions ?? [];
const counted = (n: number) =>
  until(
    `the watcher counts ${n} overlays`,
    async () =>
      new RegExp(`^veneer_nodewatcher_overlays\\{state="counted"\\} ${n}$`, 'm').test(
        await watcher.metrics.registry.metrics(),
      ),
    30_000,
  );

/** Creates the overlays and waits until Karpenter judged each (Ready, or not for `refused`) and the watcher counts `count`. */
async function addOverlays(overlays: VeneerOverlay[], count: number, refused: string[] = []): Promise<void> {
  for (const body of overlays) await custom.createClusterCustomObject({ ...OVERLAY_API, body });
  for (const o of overlays)
    await until(
      `Karpenter judged ${o.metadata.name}`,
      async () => {
        const ready = (await conditionsOf(o.metadata.name)).find((c) => c.type === 'Ready');
        return ready !== undefined && ready.status === (refused.includes(o.metadata.name) ? 'False' : 'True');
      },
      30_000,
    );
  await counted(count);
  // Karpenter's store takes the overlays on its next reconcile of them.
  await new Promise((r) => setTimeout(r, 2000));
}
async function removeOverlays(names: string[], count: number): Promise<void> {
  for (const name of names) await custom.deleteClusterCustomObject({ ...OVERLAY_API, name });
  await counted(count);
  await new Promise((r) => setTimeout(r, 2000));
}

/** A NodePool of `types`, on-demand, nothing disrupted. */
const createPool = (pool: string, types: string[]) =>
  custom.createClusterCustomObject({
    ...NODEPOOL_API,
    body: awsNodePoolObject({ name: pool, capacityTypes: ['on-demand'], instanceTypes: types }),
  });

/** One pod in a NodePool of its own (created here unless it exists): its node, type and record. */
async function launchIn(pool: string, types: string[]) {
  await createPool(pool, types).catch((err: { code?: number }) => {
    if (err.code !== 409) throw err;
  });
  const body = podObject({ name: `${pool}-pod`, nodePool: pool, cpu: '1500m' }, (x) => karpenter.vcpus.get(x)!);
  await core.createNamespacedPod({ namespace: 'default', body });
  let node: k8s.V1Node | undefined;
  await until(
    `the node of NodePool ${pool} recorded`,
    async () => {
      node = (await core.listNode({ labelSelector: `karpenter.sh/nodepool=${pool}` })).items.find(
        (n) => storyOf(n.metadata) !== undefined,
      );
      return node !== undefined;
    },
    90_000,
  );
  const labels = node!.metadata?.labels ?? {};
  return {
    name: node!.metadata!.name!,
    type: labels['node.kubernetes.io/instance-type'],
    labels,
    story: storyOf(node!.metadata)!,
  };
}

const C6I_SIZES = ['c6i.large', 'c6i.xlarge', 'c6i.2xlarge', 'm5.large'];

t.test('a Savings Plan at 0.00 over a family: every size ties, and the record says what the tie changed', async (t) => {
  const sp = ec2InstanceSavingsPlan('c6i', REGION);
  await addOverlays([sp], 1);
  const withIt = await launchIn('sp-with', C6I_SIZES);
  // Explained while the overlay exists: explain reads the overlays as they are now.
  await t.test('explained', (t) => explainAgrees(t, kubeconfig, withIt.name, withIt.story));
  await removeOverlays([sp.metadata.name], 0);
  const without = await launchIn('sp-without', C6I_SIZES);
  t.equal(without.type, 'c6i.large', 'without the overlay: the cheapest list price');
  t.ok(withIt.type?.startsWith('c6i.'), `with it a c6i size at 0.00: ${withIt.type}`);
  t.equal(withIt.story.overlay, sp.metadata.name, 'the record names the Savings Plan');
  t.equal(withIt.labels['veneer.io/capacity-type'], 'ec2-instance-savings-plan');
  const effect = withIt.story.effect!;
  t.same(effect.without?.instanceTypes, [without.type], 'the launch without it is the one seen');
  t.equal(effect.verdict, withIt.type === without.type ? 'none' : 'instance-type', effect.reason ?? '');
});

t.test('a preference overlay: -20% on m5 in its NodePool, no capacity type in the record', async (t) => {
  const pref = preferenceOverlay('prefer', 15, '-20%', [
    { key: 'karpenter.k8s.aws/instance-family', operator: 'In', values: ['m5'] },
  ]);
  await addOverlays([pref], 1);
  const withIt = await launchIn('prefer', ['c6i.large', 'm5.large']);
  const elsewhere = await launchIn('prefer-not', ['c6i.large', 'm5.large']);
  t.equal(withIt.type, 'm5.large', 'm5.large at $0.0768/h undercuts c6i.large');
  t.equal(elsewhere.type, 'c6i.large', 'a NodePool the preference does not name: c6i.large');
  t.equal(elsewhere.story.influenced, false, 'and no overlay influenced it');
  t.equal(withIt.story.overlay, pref.metadata.name);
  t.equal(withIt.labels['veneer.io/overlay-influenced'], 'true');
  t.equal(withIt.labels['veneer.io/capacity-type'], undefined, 'a preference carries no capacity type');
  t.equal(withIt.story.effect?.verdict, 'instance-type', withIt.story.effect?.reason ?? '');
  t.same(withIt.story.effect?.without?.instanceTypes, ['c6i.large']);
  await t.test('explained', (t) => explainAgrees(t, kubeconfig, withIt.name, withIt.story));
  await removeOverlays([pref.metadata.name], 0);
});

t.test('disabled mode: an impossible requirement, the overlay prices nothing', async (t) => {
  const ri = disabled(reservedInstance('m5.large', REGION));
  await addOverlays([ri], 1);
  const launched = await launchIn('off', ['c6i.large', 'm5.large']);
  t.equal(launched.type, 'c6i.large', 'the RI would have made m5.large: disabled, it does not');
  t.equal(launched.story.influenced, false, 'not influenced');
  t.equal(launched.story.overlay, null);
  t.equal(launched.story.effect?.verdict, 'none');
  await t.test('explained', (t) => explainAgrees(t, kubeconfig, launched.name, launched.story));
  await removeOverlays([ri.metadata.name], 0);
});

t.test('a preference numbered as a Savings Plan weighs: Karpenter refuses the Savings Plan, everywhere', async (t) => {
  const sp = ec2InstanceSavingsPlan('m5', REGION);
  const pref = preferenceOverlay('collide', 20, '-20%', [
    { key: 'karpenter.k8s.aws/instance-family', operator: 'In', values: ['m5'] },
  ]);
  // The preference touches offerings only in its NodePool: it exists first.
  await createPool('collide', ['c6i.large', 'm5.large']);
  await addOverlays([sp, pref], 1, [sp.metadata.name]);
  t.match(
    (await conditionsOf(sp.metadata.name)).find((c) => c.type === 'ValidationSucceeded'),
    { status: 'False', reason: 'Conflict' },
    "Karpenter's own status on the Savings Plan: the preference's name sorts last, so it was applied first",
  );
  t.match(
    await watcher.metrics.registry.metrics(),
    /^veneer_nodewatcher_overlays\{state="rejected_conflict"\} 1$/m,
    'the watcher counts it refused as a Conflict',
  );
  const launched = await launchIn('collide', ['c6i.large', 'm5.large']);
  t.equal(launched.type, 'm5.large', 'the preference prices m5.large at $0.0768/h');
  t.equal(launched.story.overlay, pref.metadata.name, 'the record names the preference, not the refused Savings Plan');
  t.equal(launched.story.effect?.verdict, 'instance-type', launched.story.effect?.reason ?? '');
  t.same(launched.story.effect?.without?.instanceTypes, ['c6i.large']);
  await t.test('explained', (t) => explainAgrees(t, kubeconfig, launched.name, launched.story));
  const elsewhere = await launchIn('collide-not', ['c6i.large', 'm5.large']);
  t.equal(elsewhere.type, 'c6i.large', 'another NodePool: the refused Savings Plan prices nothing there either');
  t.equal(elsewhere.story.influenced, false);
  t.comment(`the whole file: ${secs(Date.now() - started)}`);
});

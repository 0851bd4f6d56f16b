// The body of test/aws/flip.test.ts, run in a network namespace with only loopback. The same pod,
// pinned to m5.xlarge in a NodePool that allows spot and on-demand, launched by real Karpenter on
// AWS: without Veneer's Reserved Instance overlay it launches spot and gets no record; with it,
// on-demand, and the record names the overlay. What makes the flip is read from the CreateFleet
// request Karpenter sent (the local EC2's request log): without an overlay a spot fleet with
// price-capacity-optimized; with it the spot offering filter dropped every spot offering (priced
// above the overlay's on-demand 0.00), so an on-demand fleet, allocation strategy `prioritized`,
// and each m5.xlarge override at Priority 0, the overlay's price. Karpenter's own
// price-overlay-applied, the judge (Karpenter's NodeOverlay controller and store) and the record agree.
import t from 'tap';
import * as k8s from '@kubernetes/client-node';
import { OVERLAY_API, sleep, until } from '../../../kit/fleet.ts';
import { AWS_KARPENTER_VERSION, REGION, startAwsKarpenterWithWatcher } from '../../../kit/aws/karpenter.ts';
import type { FleetRequest } from '../../../kit/aws/moto.ts';
import { PRICE_OVERLAY_APPLIED } from '../../../kit/karpenter-controller.ts';
import { reservedInstance } from '../../../kit/veneer.ts';
import { awsJudgeCase } from '../../support/aws-judge.ts';
import { KarpenterJudge } from '../../support/karpenter-oracle.ts';
import { assertInOwnNetworkNamespace } from '../../../kit/netns.ts';
import { storyOf, type NodeVersion } from '../../../kit/node-history.ts';

assertInOwnNetworkNamespace();
t.setTimeout(240_000);
const started = Date.now();
// A boot delay as real instances have: the NodeClaim has its providerID before the kubelet's CREATE.
const env = await startAwsKarpenterWithWatcher({ karpenter: { bootDelayMs: 2000 } });
t.teardown(async () => {
  if (!t.passing()) for (const p of [env.karpenter.controller, env.karpenter.moto.process]) console.error(`--- ${p.name}'s log ends:\n${p.logTail(80)}`);
  await env.stop();
});
const { karpenter, admin } = env;
const custom = admin.makeApiClient(k8s.CustomObjectsApi);
const core = admin.makeApiClient(k8s.CoreV1Api);
const RI = reservedInstance('m5.xlarge', REGION);
const RECORD_KEYS = ['veneer.io/overlay-influenced', 'veneer.io/matching-overlay', 'veneer.io/labeled-at'];
t.comment(`control plane, local EC2, Karpenter ${AWS_KARPENTER_VERSION} and the watcher up in ${((Date.now() - started) / 1000).toFixed(1)} s (ms: ${JSON.stringify(karpenter.startup)})`);

const instanceIdOf = (node: k8s.V1Node) => node.spec?.providerID?.split('/').at(-1) ?? '';
const fleetOf = (node: k8s.V1Node): FleetRequest | undefined => karpenter.moto.fleetRequests().find((f) => f.launched.some((l) => l.instanceId === instanceIdOf(node)));
const overrides = (f: FleetRequest | undefined) => (f?.launchTemplateConfigs ?? []).flatMap((c) => c.overrides).map((o) => `${o.instanceType}@${o.priority ?? '-'}`).sort();

/** Launches one pod pinned to m5.xlarge; returns its node once Karpenter registered it, with its NodeClaim. */
async function launch(name: string) {
  const before = new Set((await core.listNode()).items.map((n) => n.metadata?.name));
  const t0 = Date.now();
  await karpenter.createPods([{ name, instanceType: 'm5.xlarge' }]);
  const nodes = await karpenter.waitForNodes(before.size + 1, { registered: true, timeoutMs: 90_000 });
  const node = nodes.find((n) => !before.has(n.metadata?.name))!;
  const claim = (await karpenter.nodeClaims()).find((c) => c.status?.nodeName === node.metadata?.name);
  return { node, claim, ms: Date.now() - t0 };
}

t.test('without the Reserved Instance overlay: spot, price-capacity-optimized, no record', async (t) => {
  const { node, claim, ms } = await launch('no-overlay');
  const labels = node.metadata?.labels ?? {};
  t.equal(labels['karpenter.sh/capacity-type'], 'spot', 'launched spot');
  t.equal(labels['node.kubernetes.io/instance-type'], 'm5.xlarge');
  t.same(RECORD_KEYS.filter((k) => labels[k] !== undefined), [], 'no record on a spot node');
  t.equal(claim?.metadata.annotations?.[PRICE_OVERLAY_APPLIED], undefined, `no ${PRICE_OVERLAY_APPLIED}: no overlay exists`);
  const fleet = fleetOf(node);
  t.match(fleet, { defaultTargetCapacityType: 'spot', spotAllocationStrategy: 'price-capacity-optimized', launched: [{ capacityType: 'spot', instanceType: 'm5.xlarge' }] }, 'CreateFleet: a spot fleet, price-capacity-optimized');
  const spot = karpenter.catalog.prices['m5.xlarge']?.spot ?? {};
  t.same(overrides(fleet), Object.values(spot).map((p) => `m5.xlarge@${p}`).sort(), "one override per zone, each at Priority = its spot price (Karpenter sets priorities from prices with or without an overlay; the strategy then ignores them)");
  t.comment(`pod to registered node: ${ms} ms`);
});

t.test('with it: on-demand, prioritized at Priority 0, recorded at CREATE with the overlay Karpenter applied', async (t) => {
  await custom.createClusterCustomObject({ ...OVERLAY_API, body: RI });
  await until('Karpenter validated the overlay', async () => {
    const o = (await custom.getClusterCustomObject({ ...OVERLAY_API, name: RI.metadata.name })) as { status?: { conditions?: { type: string; status: string }[] } };
    return o.status?.conditions?.some((c) => c.type === 'Ready' && c.status === 'True') ?? false;
  }, 30_000);
  await until('the watcher counts it', async () => /^veneer_nodewatcher_overlays\{state="counted"\} 1$/m.test(await env.watcher.metrics.registry.metrics()), 20_000);
  // Creation timestamps have whole seconds: the launch comes in a later second than the validation.
  await sleep(1100);
  const { node, claim, ms } = await launch('with-overlay');
  const labels = node.metadata?.labels ?? {};
  t.equal(labels['karpenter.sh/capacity-type'], 'on-demand', 'launched on-demand');
  t.equal(labels['node.kubernetes.io/instance-type'], 'm5.xlarge');
  t.same(claim?.spec?.requirements?.find((r) => r.key === 'karpenter.sh/capacity-type')?.values?.sort(), ['on-demand', 'spot'], "the NodeClaim still allowed spot: the flip is the AWS provider's spot offering filter");
  const fleet = fleetOf(node);
  t.match(fleet, { defaultTargetCapacityType: 'on-demand', onDemandAllocationStrategy: 'prioritized', launched: [{ capacityType: 'on-demand', instanceType: 'm5.xlarge' }] }, 'CreateFleet: an on-demand fleet, prioritized');
  t.same(overrides(fleet), ['m5.xlarge@0', 'm5.xlarge@0', 'm5.xlarge@0'], "every override at Priority 0, the overlay's price");
  t.equal(claim?.metadata.annotations?.[PRICE_OVERLAY_APPLIED], 'true', `Karpenter's ${PRICE_OVERLAY_APPLIED} on the NodeClaim`);
  t.equal(node.metadata?.annotations?.[PRICE_OVERLAY_APPLIED], 'true', '...copied to the node');
  t.match(labels, { 'veneer.io/overlay-influenced': 'true', 'veneer.io/matching-overlay': RI.metadata.name, 'veneer.io/capacity-type': 'reserved-instance', 'veneer.io/instance-type': 'm5.xlarge', 'veneer.io/region': REGION }, 'the record names the Reserved Instance overlay');
  const story = storyOf({ annotations: node.metadata?.annotations ?? {} } as NodeVersion);
  t.match(story, { decidedBy: 'webhook', basis: 'exact', characteristicsFrom: 'node+nodeclaim' }, 'decided at CREATE by the webhook, from the node and its NodeClaim');

  const judge = new KarpenterJudge(AWS_KARPENTER_VERSION);
  t.teardown(() => judge.close());
  const answer = await judge.judge(awsJudgeCase([node], karpenter.nodePools, [RI], karpenter.catalog));
  t.equal(answer.error, undefined, "the judge's Reconcile succeeded");
  t.same(answer.applied, [RI.metadata.name], "Karpenter's own store applies the Reserved Instance overlay's price to this offering");
  t.comment(`pod to registered node: ${ms} ms`);
});

t.test('footprint', async (t) => {
  const u = karpenter.usage();
  t.ok(u.karpenter && u.scheduler, 'Karpenter and kube-scheduler still running');
  t.comment(`karpenter-aws RSS ${u.karpenter?.rssMiB.toFixed(0)} MiB (peak ${u.karpenter?.peakRssMiB.toFixed(0)}), ${u.karpenter?.cpuSeconds.toFixed(1)} CPU-s; file wall time ${((Date.now() - started) / 1000).toFixed(1)} s`);
});

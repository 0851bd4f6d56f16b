// The body of `npm run demo -- --aws` (scripts/demo.ts), run in a network namespace with only
// loopback (kit/netns.ts): everything that speaks an AWS API must, and the local EC2 refuses to
// start anywhere else. REAL Karpenter with its AWS provider (kit/aws/karpenter.ts, v1.14.3) launches
// the nodes in a local EC2 (moto, kit/aws/moto.ts), a node maker stands in for each instance's
// kubelet and the cloud controller (each instance "boots" 2 s before its Node's CREATE), and the
// watcher runs with its webhook and the record's guard (karpenterProvider auto: the NodeClaims name karpenter.k8s.aws).
//
// First the same pod (pinned to m5.xlarge, in a NodePool that allows spot and on-demand) is
// launched with no overlay at all: spot, no record. Then Veneer's three overlays on AWS keys, and
// the same pod again with pods pinned to other types (spot ones among them): it launches on-demand
// and its record names the Reserved Instance overlay, whose price Karpenter applied. For both
// launches the CreateFleet request Karpenter sent (the local EC2's log) shows why. Last, with the
// mutating webhook paused, a few more pods: the reconciler records those. Then consolidation
// (demo-aws-consolidation.ts): a replacement the RI overlay caused, and the churn once it is deleted.
//
// No --keep: the cluster lives in a namespace that nothing outside it can reach.
import { execFile } from 'node:child_process';
import { join } from 'node:path';
import { promisify } from 'node:util';
import * as k8s from '@kubernetes/client-node';
import { AWS_KARPENTER_VERSION, REGION, startAwsKarpenterWithWatcher } from '../kit/aws/karpenter.ts';
import type { FleetRequest } from '../kit/aws/moto.ts';
import { NODECLAIM_API, type NodeClaim, type PendingPod, PRICE_OVERLAY_APPLIED } from '../kit/karpenter-controller.ts';
import { assertInOwnNetworkNamespace } from '../kit/netns.ts';
import { History, storyOf } from '../kit/node-history.ts';
import { scrape } from '../kit/scrape.ts';
import { computeSavingsPlan, ec2InstanceSavingsPlan, reservedInstance } from '../kit/veneer.ts';
import { grantMetricsReader, pauseMutatingWebhook } from '../kit/watcher-env.ts';
import { consolidationScene } from './demo-aws-consolidation.ts';
import { driftScene } from './demo-aws-drift.ts';

assertInOwnNetworkNamespace();
const t0 = Number(process.env.VENEER_DEMO_T0 ?? Date.now());
const BOOT_DELAY_MS = 2000;
const step = (msg: string) => console.log(`[demo +${((Date.now() - t0) / 1000).toFixed(1).padStart(5)}s] ${msg}`);
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const waitFor = async (what: string, cond: () => Promise<boolean> | boolean, ms = 30_000) => {
  for (const deadline = Date.now() + ms; !(await cond()); await sleep(100))
    if (Date.now() > deadline) throw new Error(`timed out after ${ms} ms waiting for: ${what}`);
};
const OVERLAY_API = { group: 'karpenter.sh', version: 'v1alpha1', plural: 'nodeoverlays' };

step(
  `starting etcd, kube-apiserver, the local EC2 (moto), kube-scheduler, Karpenter ${AWS_KARPENTER_VERSION} (AWS provider; NodePool default allows spot and on-demand), the node maker (each instance boots ${BOOT_DELAY_MS / 1000} s before its Node's CREATE) and the watcher (its webhook and the record's guard)`,
);
const env = await startAwsKarpenterWithWatcher({
  karpenter: { bootDelayMs: BOOT_DELAY_MS },
  watcherFlags: { '--metrics-secure': 'true' },
});
const { cp, admin, karpenter, watcher } = env;
const stopWatches: (() => void)[] = [];
let tornDown: Promise<void> | undefined;
const teardown = () =>
  (tornDown ??= (async () => {
    for (const stop of stopWatches.splice(0)) stop();
    await env.stop();
  })());
// Ctrl-C reaches this process twice (from the terminal and passed on by demo.ts): clean up once.
process.on('SIGINT', () => void teardown().then(() => process.exit(130)));
step(
  `up; ms per step: ${Object.entries(karpenter.startup)
    .map(([k, v]) => `${k} ${v}`)
    .join(', ')}`,
);

try {
  const custom = admin.makeApiClient(k8s.CustomObjectsApi);
  const core = admin.makeApiClient(k8s.CoreV1Api);

  // What this process sees on watches: each NodeClaim's first appearance, every version of every
  // Node, so each record's first appearance and whether a later version changed it.
  const history = new History(admin);
  await history.start();
  stopWatches.push(() => history.stop());
  const recordedAt = (node: string) => history.recordOf(node)?.at;

  const karpenterNodes = async () =>
    (await core.listNode()).items.filter((n) => {
      const pool = n.metadata?.labels?.['karpenter.sh/nodepool'];
      return pool !== undefined && pool !== 'probe';
    });
  /** Where a launch stands: what is not there yet. */
  const missing = async (pods: PendingPod[]) => {
    const nodes = await karpenterNodes();
    const bound = new Map(
      (await core.listNamespacedPod({ namespace: 'default' })).items.map((p) => [
        p.metadata?.name ?? '',
        p.spec?.nodeName,
      ]),
    );
    return [
      ...(nodes.length < pods.length ? [`${nodes.length} of ${pods.length} nodes`] : []),
      ...nodes
        .filter((n) => n.metadata?.labels?.['karpenter.sh/registered'] !== 'true')
        .map((n) => `${n.metadata?.name} not registered`),
      ...nodes
        .filter(
          (n) =>
            n.metadata?.labels?.['karpenter.sh/capacity-type'] === 'on-demand' &&
            recordedAt(n.metadata?.name ?? '') === undefined,
        )
        .map((n) => `${n.metadata?.name} not recorded`),
      ...pods.filter((p) => bound.get(p.name) === undefined).map((p) => `pod ${p.name} not bound`),
    ];
  };
  /** Waits until the pods' nodes are registered by Karpenter, each on-demand one recorded, every pod bound to a node. */
  const settle = async (pods: PendingPod[], ms = 120_000) => {
    let last: string[] = [];
    try {
      await waitFor(
        `${pods.length} nodes registered, every on-demand one recorded, every pod bound`,
        async () => {
          last = await missing(pods);
          return last.length === 0;
        },
        ms,
      );
    } catch (err) {
      throw new Error(`${(err as Error).message}; still missing: ${last.join(', ')}`);
    }
  };

  // The same pod both times: pinned to m5.xlarge, no capacity type asked, so the NodePool's spot and on-demand are both allowed.
  const samePod = (name: string): PendingPod => ({ name, instanceType: 'm5.xlarge' });
  const before = [samePod('same-pod-no-overlay')];
  step(
    'creating a pod pinned to m5.xlarge (no capacity type: the NodePool allows spot and on-demand), with no overlay at all',
  );
  const podsAt = Date.now();
  await karpenter.createPods(before);
  step(
    `kube-scheduler marks it Unschedulable, Karpenter sends CreateFleet to the local EC2, the node maker creates the Node ${BOOT_DELAY_MS / 1000} s later`,
  );
  await settle(before, 90_000);

  const OVERLAYS = [computeSavingsPlan(), ec2InstanceSavingsPlan('c6i', REGION), reservedInstance('m5.xlarge', REGION)];
  step(
    `Veneer's overlays on AWS keys: Compute SP (weight 10), EC2 Instance SP c6i/${REGION} (20), RI m5.xlarge/${REGION} (30)`,
  );
  for (const o of OVERLAYS) await custom.createClusterCustomObject({ ...OVERLAY_API, body: o });
  step('waiting until Karpenter validated them (Ready) and the watcher counts them');
  await waitFor('Karpenter validated the 3 overlays', async () => {
    const items = (
      (await custom.listClusterCustomObject(OVERLAY_API)) as {
        items: { status?: { conditions?: { type: string; status: string }[] } }[];
      }
    ).items;
    return (
      items.length === 3 &&
      items.every((o) => o.status?.conditions?.some((c) => c.type === 'Ready' && c.status === 'True'))
    );
  });
  await waitFor('the watcher counts the 3 overlays', async () =>
    /^veneer_nodewatcher_overlays\{state="counted"\} 3$/m.test(await watcher.metrics.registry.metrics()),
  );
  // Creation timestamps have whole seconds: the launches come in a later second than the validations.
  await sleep(1100);

  // Alone again, so that kube-scheduler cannot bind it to a node launched for another pod.
  const again = [samePod('same-pod-with-ri')];
  step('creating the same pod again');
  await karpenter.createPods(again);
  await settle([...before, ...again], 90_000);

  // Each pinned to a type and capacity type no other pod created with it asks for: each binds to its own node.
  const first: PendingPod[] = [
    { name: 'web-1', instanceType: 'm5.xlarge', capacityType: 'on-demand' },
    { name: 'api-1', instanceType: 'c6i.large', capacityType: 'on-demand' },
    { name: 'api-2', instanceType: 'c6i.xlarge', capacityType: 'on-demand' },
    { name: 'db-1', instanceType: 'r6i.2xlarge', capacityType: 'on-demand' },
    { name: 'batch-1', instanceType: 'm5.xlarge', capacityType: 'spot' },
    { name: 'batch-2', instanceType: 'c6i.large', capacityType: 'spot' },
  ];
  step('creating pods pinned to m5.xlarge, c6i.large, c6i.xlarge, r6i.2xlarge on-demand and m5.xlarge, c6i.large spot');
  await karpenter.createPods(first);
  await settle([...before, ...again, ...first]);
  const firstClaimAt = Math.min(...[...history.claims.values()].map((c) => c.seenAt));
  const firstNodeAt = Math.min(
    ...(await karpenterNodes()).map((n) => history.firstSeenAt(n.metadata?.name ?? '') ?? Infinity),
  );

  step('pausing the webhook (its configuration removed, as if it were down) and creating more pods');
  await pauseMutatingWebhook(admin);
  const more: PendingPod[] = [
    { name: 'web-2', instanceType: 'm5.large', capacityType: 'on-demand' },
    { name: 'api-3', instanceType: 'c6i.large', capacityType: 'on-demand' },
    { name: 'tools-1', instanceType: 't3.large', capacityType: 'on-demand' },
  ];
  await karpenter.createPods(more);
  const all = [...before, ...again, ...first, ...more];
  step('waiting for every node to be registered by Karpenter and every on-demand node to carry its record');
  await settle(all);
  await sleep(500); // room for a later write to show up on the watch

  const claims = ((await custom.listClusterCustomObject(NODECLAIM_API)) as { items: NodeClaim[] }).items;
  const claimOf = new Map(claims.map((c) => [c.status?.nodeName ?? c.metadata.name, c]));
  const podOf = new Map(
    (await core.listNamespacedPod({ namespace: 'default' })).items.map((p) => [
      p.spec?.nodeName ?? '',
      p.metadata?.name ?? '',
    ]),
  );
  const seenAt = (n: k8s.V1Node) => history.firstSeenAt(n.metadata?.name ?? '') ?? 0;
  const claimSeenAt = (n: k8s.V1Node) =>
    history.claims.get(claimOf.get(n.metadata?.name ?? '')?.metadata.name ?? '')?.seenAt;
  const nodes = (await karpenterNodes()).sort((a, b) => seenAt(a) - seenAt(b));
  const rows = nodes.map((n) => {
    const name = n.metadata?.name ?? '';
    const l = n.metadata?.labels ?? {};
    const story = storyOf(n.metadata);
    const rec = recordedAt(name);
    const claimAt = claimSeenAt(n);
    return [
      name,
      l['karpenter.sh/capacity-type'] ?? '',
      l['node.kubernetes.io/instance-type'] ?? '',
      l['veneer.io/overlay-influenced'] ?? '-',
      l['veneer.io/matching-overlay'] ?? '-',
      l['veneer.io/capacity-type'] ?? '-',
      l['veneer.io/overlay-effect'] ?? '-',
      story?.decidedBy ?? '-',
      rec !== undefined && claimAt !== undefined ? `${rec - claimAt}` : '-',
      podOf.get(name) ?? '-',
    ];
  });
  const header = [
    'NAME',
    'CAPACITY',
    'TYPE',
    'INFLUENCED',
    'MATCHING-OVERLAY',
    'VENEER-CAPACITY-TYPE',
    'EFFECT',
    'RECORDED-BY',
    'MS-TO-RECORD',
    'POD',
  ];
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => (r[i] ?? '').length)));
  console.log(
    `\n${[header, ...rows]
      .map((r) =>
        r
          .map((c, i) => (c ?? '').padEnd(widths[i] ?? 0))
          .join('  ')
          .trimEnd(),
      )
      .join('\n')}`,
  );

  // The flip, from the CreateFleet request that launched each instance of the same pod.
  const fleets = karpenter.moto.fleetRequests();
  const fleetOf = (node: k8s.V1Node): FleetRequest | undefined => {
    const instanceId = node.spec?.providerID?.split('/').at(-1) ?? '';
    return fleets.find((f) => f.launched.some((l) => l.instanceId === instanceId));
  };
  const flip = (label: string, pod: string) => {
    const node = nodes.find((n) => podOf.get(n.metadata?.name ?? '') === pod);
    if (!node) return `  ${label} pod ${pod} has no node`;
    const l = node.metadata?.labels ?? {};
    const f = fleetOf(node);
    const strategy =
      f?.defaultTargetCapacityType === 'spot'
        ? `SpotOptions.AllocationStrategy=${f.spotAllocationStrategy}`
        : `OnDemandOptions.AllocationStrategy=${f?.onDemandAllocationStrategy}`;
    const overrides = (f?.launchTemplateConfigs ?? []).flatMap((c) => c.overrides);
    const priorities = [...new Set(overrides.map((o) => o.priority ?? '-'))].join('/');
    const record = l['veneer.io/matching-overlay']
      ? `record names ${l['veneer.io/matching-overlay']} (${l['veneer.io/capacity-type']}, by the ${storyOf(node.metadata)?.decidedBy})`
      : 'no record';
    const effect = storyOf(node.metadata)?.effect;
    const without = effect?.without
      ? `; without the selected overlays: ${effect.without.capacityType} ${effect.without.instanceTypes.join(' | ')}, ${effect.without.strategy}`
      : '';
    const applied =
      claimOf.get(node.metadata?.name ?? '')?.metadata.annotations?.[PRICE_OVERLAY_APPLIED] === 'true'
        ? `${PRICE_OVERLAY_APPLIED}=true`
        : `no ${PRICE_OVERLAY_APPLIED}`;
    return [
      `  ${label} ${l['karpenter.sh/capacity-type']} ${l['node.kubernetes.io/instance-type']} (${node.metadata?.name}), ${record}; Karpenter: ${applied}`,
      `    CreateFleet: DefaultTargetCapacityType=${f?.defaultTargetCapacityType ?? '?'}, ${strategy}, ${overrides.length} overrides (${[...new Set(overrides.map((o) => o.instanceType))].join(', ')}) at Priority ${priorities}`,
      ...(effect ? [`    effect: ${effect.verdict}${without}`] : []),
    ].join('\n');
  };
  console.log(
    [
      '',
      'The same pod (pinned to m5.xlarge; the NodePool allows spot and on-demand), launched twice by Karpenter on AWS:',
      flip('without any overlay:         ', 'same-pod-no-overlay'),
      flip("with Veneer's three overlays:", 'same-pod-with-ri'),
      "  With the RI overlay's on-demand price 0.00, Karpenter's spot offering filter dropped every spot offering (each priced above it):",
      '  an on-demand fleet, prioritized by the overlay-adjusted prices; the NodeClaim still allowed spot.',
    ].join('\n'),
  );

  const nodeToRecord = (by: string) =>
    rows.filter((r) => r[7] === by).map((r) => (recordedAt(r[0]!) ?? 0) - (history.firstSeenAt(r[0]!) ?? 0));
  const claimToNode = nodes.map((n) => seenAt(n) - (claimSeenAt(n) ?? 0));
  const changed = nodes.map((n) => n.metadata?.name ?? '').filter((name) => history.recordOf(name)?.changed);
  const span = (ms: number[]) => (ms.length === 0 ? 'none' : `${Math.min(...ms)}-${Math.max(...ms)} ms`);
  console.log(
    [
      '',
      `Real Karpenter ${AWS_KARPENTER_VERSION} (AWS provider, local EC2): ${claims.length} NodeClaims for ${all.length} pods, ${fleets.length} CreateFleet requests; the first NodeClaim ${firstClaimAt - podsAt} ms after the first pod, the first Node ${firstNodeAt - firstClaimAt} ms after it.`,
      `From the NodeClaim to its Node: ${span(claimToNode)} (CreateFleet, the providerID, the ${BOOT_DELAY_MS / 1000} s boot). From the Node's first appearance to its record: webhook ${span(nodeToRecord('webhook'))} (in the CREATE), reconciler ${span(nodeToRecord('reconciler'))}.`,
      "MS-TO-RECORD: from the NodeClaim's appearance (Karpenter's launch, seen on a watch) to the first version of the Node with the record",
      `(seen on a watch); it includes the ${BOOT_DELAY_MS / 1000} s boot before the Node's CREATE. Webhook records came in that CREATE, reconciler`,
      changed.length === 0
        ? "records in one PATCH after it. No record changed in any later version of its Node, Karpenter's registration included."
        : `records in one PATCH after it. Records changed afterwards on: ${changed.join(', ')}.`,
    ].join('\n'),
  );

  // Metrics answer only a token the apiserver accepts, of an identity allowed to get /metrics:
  // here a ServiceAccount bound to metrics-reader, as Prometheus' would be.
  await grantMetricsReader(admin, [{ kind: 'ServiceAccount', name: 'prometheus', namespace: 'monitoring' }]);
  const token = await cp.serviceAccountToken('monitoring', 'prometheus');
  const metrics = (await scrape(watcher.metricsPort, { caPem: env.certs.caPem, token })).body;
  console.log('\nKey metrics (HTTPS, as ServiceAccount monitoring/prometheus, bound to metrics-reader):');
  for (const line of metrics.split('\n')) {
    if (
      /^veneer_nodewatcher_(nodes_labeled_total|nodes_influenced_current|nodes_pending|labeling_errors_total|leader|cache_refresh_total)[ {]/.test(
        line,
      )
    )
      console.log(`  ${line}`);
    if (/^veneer_nodewatcher_admission_requests_total\{.*webhook="mutate"/.test(line)) console.log(`  ${line}`);
    if (/^veneer_nodewatcher_karpenter_provider_nodeclaims[ {]/.test(line)) console.log(`  ${line}`);
    if (/^veneer_nodewatcher_(nodes_by_effect_current|price_refreshes_total)[ {]/.test(line)) console.log(`  ${line}`);
  }

  // The command line, live on this cluster as an operator runs it (it writes nothing).
  const kubeconfig = cp.writeKubeConfig();
  const cli = async (args: string[]) => {
    console.log(`\n$ veneer-node-watcher ${args.join(' ')}`);
    const { stdout } = await promisify(execFile)(
      process.execPath,
      [join(import.meta.dirname, '..', 'src', 'cli.ts'), ...args],
      { env: { ...process.env, KUBECONFIG: kubeconfig } },
    );
    console.log(stdout.trimEnd());
  };
  const flipped = nodes.find((n) => podOf.get(n.metadata?.name ?? '') === 'same-pod-with-ri')?.metadata?.name;
  step(
    'the command line on this cluster: why the flipped node got its record and what the overlays changed, then the report',
  );
  if (flipped) await cli(['explain', flipped, '--prices-source', 'isolated', '--prices-region', REGION]);
  await cli(['report']);
  // test/aws/replacement.test.ts and test/aws/lifecycle.test.ts run the scenes with more checks;
  // test/packaging/demo.test.ts runs the demo without them, so that `npm test` runs each once.
  if (process.env.VENEER_DEMO_SKIP_CONSOLIDATION === '1')
    step(
      'the consolidation and drift scenes skipped (VENEER_DEMO_SKIP_CONSOLIDATION=1: test/aws/replacement.test.ts and lifecycle.test.ts run them)',
    );
  else {
    const deps = { admin, watcher, vcpusOf: (type: string) => karpenter.vcpus.get(type)!, step, cli };
    await consolidationScene(deps);
    await (await driftScene(deps)).stop();
  }
  step('tearing down');
  await teardown();
  step('done');
} catch (err) {
  console.error(`[demo] failed: ${(err as Error).stack ?? err}`);
  for (const p of [karpenter.controller, karpenter.moto.process])
    console.error(`--- ${p.name}'s log ends:\n${p.logTail(40)}`);
  await teardown();
  process.exitCode = 1;
}

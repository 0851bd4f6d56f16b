// The body of test/_real-node/node.test.ts, run inside its own network namespace: the chart's pods on a real
// kubelet, from the image the Dockerfile describes, as a user runs them; last, the scene of
// `npm run demo -- --node` on the same node (scripts/demo-node-scene.ts), its output checked.
import { readFileSync } from 'node:fs';
import t from 'tap';
import * as k8s from '@kubernetes/client-node';
import { startCertManager } from '../../../kit/cert-manager.ts';
import { ControlPlane } from '../../../kit/control-plane.ts';
import { counter, Fleet, sleep, until } from '../../../kit/fleet.ts';
import { installKarpenterCRDs } from '../../../kit/karpenter-crds.ts';
import { assertInOwnNetworkNamespace } from '../../../kit/netns.ts';
import { builtWatcherImage } from '../../../kit/node/image.ts';
import { NODE_ADDRESS, nodeControlPlaneOptions, RealNode } from '../../../kit/node/node.ts';
import { ChartRelease } from '../../../kit/node/release.ts';
import { PREVIOUS_CHART } from '../../support/chart.ts';
import { nodeScene } from '../../../scripts/demo-node-scene.ts';

assertInOwnNetworkNamespace();
const startedAt = Date.now();
const figures: string[] = [];
const secs = (from: number) => ((Date.now() - from) / 1000).toFixed(1);
const WATCHER_SA = 'system:serviceaccount:veneer-system:veneer-node-watcher';

const image = builtWatcherImage();
const cp = await ControlPlane.start({
  ...nodeControlPlaneOptions(),
  auditPolicy: `apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived]
rules:
  - level: Metadata
    users: [${WATCHER_SA}]
    resources: [{group: "", resources: [nodes]}]
  - level: None
`,
});
const node = await RealNode.start(cp, [image]).catch(async (err) => {
  await cp.stop();
  throw err;
});
figures.push(
  `the node: containerd and the images ${(node.figures.runtimeMs / 1000).toFixed(1)} s, kubelet to Ready ${(node.figures.readyMs / 1000).toFixed(1)} s`,
);
const certManager = await startCertManager(cp);
t.teardown(async () => {
  if (!t.passing())
    for (const part of ['kubelet', 'kube-controller-manager', 'containerd'])
      console.error(`--- ${part}'s log ends:\n${node.logTail(part, 30)}`);
  await certManager.stop();
  await cp.stop();
  console.error(`real-node figures (${secs(startedAt)} s in all):\n  ${figures.join('\n  ')}`);
});
await installKarpenterCRDs(cp);
const admin = cp.adminKubeConfig();
const core = admin.makeApiClient(k8s.CoreV1Api);
const fleet = new Fleet(cp, admin);
await fleet.createOverlays();
const release = new ChartRelease(cp, image);

const webhookCalls = async () =>
  counter((await cp.get('/metrics')).body, 'apiserver_admission_webhook_request_total', {
    name: 'record.nodes.veneer.io',
    code: '200',
  });

/** The container's first process, as the kernel sees it. */
function processOf(pod: k8s.V1Pod): { status: string; root: string } {
  const id = pod.status?.containerStatuses?.[0]?.containerID?.replace('containerd://', '') ?? '';
  const line = node
    .ctr('tasks', 'ls')
    .split('\n')
    .find((l) => l.startsWith(`${id} `));
  const pid = line?.split(/\s+/)[1];
  if (!pid) throw new Error(`no task for container ${id}`);
  const root = readFileSync(`/proc/${pid}/mountinfo`, 'utf8')
    .split('\n')
    .find((l) => l.split(' ')[4] === '/');
  return { status: readFileSync(`/proc/${pid}/status`, 'utf8'), root: root ?? '' };
}
const field = (status: string, name: string) => new RegExp(`^${name}:\\s*(.*)$`, 'm').exec(status)?.[1]?.trim();

async function readyPods(): Promise<k8s.V1Pod[]> {
  return (await release.pods()).filter(
    (p) =>
      !p.metadata?.deletionTimestamp && p.status?.conditions?.some((c) => c.type === 'Ready' && c.status === 'True'),
  );
}

t.test('helm install: both replicas Running and Ready on the kubelet, as the chart confines them', async (t) => {
  const started = Date.now();
  await release.install();
  figures.push(`helm install --wait (cert-manager issuing, both pods Ready): ${secs(started)} s`);
  const pods = await readyPods();
  t.equal(pods.length, 2, 'two Ready replicas');
  for (const pod of pods) {
    t.equal(pod.spec?.nodeName, 'kit-node');
    t.equal(pod.status?.containerStatuses?.[0]?.imageID?.includes('sha256:'), true, 'from the imported image');
    const { status, root } = processOf(pod);
    t.match(field(status, 'Uid'), /^65532\s+65532\s+65532\s+65532$/, 'runs as 65532, not root');
    t.equal(field(status, 'CapEff'), '0000000000000000', 'no effective capability');
    t.equal(field(status, 'CapBnd'), '0000000000000000', 'none it could gain');
    t.equal(field(status, 'NoNewPrivs'), '1', 'no privilege escalation');
    t.equal(field(status, 'Seccomp'), '2', 'seccomp filtering (RuntimeDefault)');
    t.match(root.split(' ')[5], /^ro\b/, 'the root file system is mounted read-only');
  }
});

t.test("helm test: the chart's own test records a dry-run Node through the apiserver and the webhook", async (t) => {
  const started = Date.now();
  const report = await release.test();
  figures.push(`helm test (a dry-run Node recorded by the webhook): ${secs(started)} s`);
  t.match(report, /Phase:\s+Succeeded/, report);
  t.match(report, `TEST SUITE:     ${release.name}-test`, 'the test pod ran');
  const test = `${release.name}-test`;
  t.same(
    (await core.listNode({ fieldSelector: `metadata.name=${release.name}-helm-test` })).items,
    [],
    'the dry run stored no Node',
  );
  const rbac = admin.makeApiClient(k8s.RbacAuthorizationV1Api);
  t.same(
    (await rbac.listClusterRoleBinding()).items.filter((b) => b.metadata?.name === test),
    [],
    "the test's right to create nodes is gone with it",
  );
  t.same(
    (await release.pods()).filter((p) => p.metadata?.name === test),
    [],
    'and its pod, once passed',
  );
});

t.test("the apiserver calls the pods through the chart's Service, and the record is written inline", async (t) => {
  const slice = (
    await admin.makeApiClient(k8s.DiscoveryV1Api).listNamespacedEndpointSlice({
      namespace: release.namespace,
      labelSelector: `kubernetes.io/service-name=${release.name}`,
    })
  ).items[0];
  const podIPs = (await readyPods()).map((p) => p.status?.podIP).sort();
  t.same(slice?.endpoints?.flatMap((e) => e.addresses).sort(), podIPs, 'the endpoints are the pods, at their pod IPs');
  const before = await webhookCalls();
  await fleet.burst('installed', 12);
  t.same([...(await fleet.decidedBy('installed')).values()], Array(12).fill('webhook'), '12 launches recorded inline');
  t.same(await fleet.wrongRecords('installed'), [], 'each record names the overlay Karpenter would have applied');
  t.ok((await webhookCalls()) - before >= 12, 'the apiserver counted the calls it made to the webhook');
});

t.test('deleting the leader pod hands the Lease to the other replica', async (t) => {
  await until('a leader', async () => (await release.leader()) !== undefined, 60_000);
  const leader = (await release.leader())!;
  const pods = await readyPods();
  const leaderPod = pods.find((p) => leader.startsWith(p.metadata!.name!));
  t.ok(leaderPod, `the Lease names a pod (${leader})`);
  const started = Date.now();
  await core.deleteNamespacedPod({ name: leaderPod!.metadata!.name!, namespace: release.namespace });
  await until(
    'another holder',
    async () => {
      const now = await release.leader();
      return now !== undefined && !now.startsWith(leaderPod!.metadata!.name!);
    },
    60_000,
  );
  figures.push(`leader pod deleted to the Lease held by another: ${secs(started)} s`);
  t.pass('the other replica took the Lease');
  await fleet.burst('handover', 4);
  await until('the nodes created after the handover recorded', () => fleet.allRecorded('handover', 4), 60_000);
  t.same(await fleet.wrongRecords('handover'), []);
  await until('two Ready replicas again', async () => (await readyPods()).length === 2, 120_000);
});

t.test('helm upgrade rolls both pods during a burst of node creations: none lost, none written twice', async (t) => {
  const started = Date.now();
  const steady = fleet.steady('upgrade', 2);
  await release.upgrade(['podAnnotations.rollout=second']);
  await sleep(1000);
  const created = await steady.stop();
  figures.push(`helm upgrade --wait, ${created} nodes created meanwhile: ${secs(started)} s`);
  t.ok(created >= 10, `a burst during the whole roll-out (${created} nodes)`);
  await until('every node created during the upgrade recorded', () => fleet.allRecorded('upgrade', created), 90_000);
  t.same(await fleet.wrongRecords('upgrade'), [], 'no record lost or wrong');
  const writes = fleet.watcherWrites('upgrade', [WATCHER_SA]);
  t.same(
    [...writes].filter(([, w]) => w.length > 1).map(([n]) => n),
    [],
    'no node written twice by the reconciler',
  );
  const decided = [...(await fleet.decidedBy('upgrade')).values()];
  figures.push(
    `during the upgrade: ${decided.filter((d) => d === 'webhook').length} recorded inline, ${decided.filter((d) => d !== 'webhook').length} by the reconciler`,
  );
  const pods = await readyPods();
  t.equal(pods.length, 2);
  t.ok(
    pods.every((p) => p.metadata?.annotations?.rollout === 'second'),
    'both pods are of the new revision',
  );
});

t.test('helm uninstall: the webhook and the guard are gone and nodes keep joining', async (t) => {
  await release.uninstall();
  const registrations = admin.makeApiClient(k8s.AdmissionregistrationV1Api);
  const names = async () => [
    ...(await registrations.listMutatingWebhookConfiguration()).items,
    ...(await registrations.listValidatingWebhookConfiguration()).items,
    ...(await registrations.listValidatingAdmissionPolicy()).items,
    ...(await registrations.listValidatingAdmissionPolicyBinding()).items,
  ];
  t.same(await names(), [], 'no webhook configuration or policy left');
  const started = Date.now();
  await fleet.burst('uninstalled', 4);
  t.ok(Date.now() - started < 10_000, 'four nodes joined at once, waiting on nothing');
  t.same([...(await fleet.decidedBy('uninstalled')).values()], Array(4).fill('none'), 'and without a record');
  await until('no pod left', async () => (await release.pods()).length === 0, 60_000);
  // The records stay; docs/installing.md's step 5 removes them as `kubectl label nodes --all
  // <key>-` and `kubectl annotate nodes --all <key>-` do: a merge patch of each node, key by key.
  const owned = (n: k8s.V1Node) =>
    [...Object.keys(n.metadata?.labels ?? {}), ...Object.keys(n.metadata?.annotations ?? {})].filter(
      (k) => k.startsWith('veneer.io/') && k !== 'veneer.io/opt-out',
    );
  const recorded = (await core.listNode()).items.filter((n) => owned(n).length > 0);
  t.ok(recorded.length > 0, `${recorded.length} nodes keep their records after the uninstall`);
  for (const n of recorded) {
    const remove = Object.fromEntries(owned(n).map((k) => [k, null]));
    await core.patchNode(
      { name: n.metadata!.name!, body: { metadata: { labels: remove, annotations: remove } } },
      k8s.setHeaderOptions('Content-Type', k8s.PatchStrategy.MergePatch),
    );
  }
  await sleep(2000);
  t.same(
    (await core.listNode()).items.filter((n) => owned(n).length > 0).map((n) => n.metadata?.name),
    [],
    'removed once the guard is gone, and nothing writes them again',
  );
});

t.test("hostNetwork: the pod on the node's address and its own ports; the apiserver calls it there", async (t) => {
  // One replica: two on one node would need the same host ports.
  await release.install([
    'hostNetwork=true',
    'replicaCount=1',
    'containerPorts.webhook=19443',
    'containerPorts.metrics=18443',
    'containerPorts.health=18081',
  ]);
  // With hostNetwork the rollout may take the one replica down (maxUnavailable 1), so helm's
  // --wait counts 0 Ready replicas as enough: the pod is waited for here.
  await until('the hostNetwork pod Ready', async () => (await readyPods()).length === 1, 120_000);
  const [pod] = await readyPods();
  t.equal(pod?.spec?.hostNetwork, true);
  t.equal(pod?.spec?.dnsPolicy, 'ClusterFirstWithHostNet');
  t.equal(pod?.status?.podIP, NODE_ADDRESS, "the pod's address is the node's");
  const health = await fetch(`http://${NODE_ADDRESS}:18081/healthz`).then((r) => r.status);
  t.equal(health, 200, "the probes answer on the host's port");
  await fleet.burst('host-network', 6);
  t.same(
    [...(await fleet.decidedBy('host-network')).values()],
    Array(6).fill('webhook'),
    "6 launches recorded inline through the host's port",
  );
  await release.uninstall();
});

t.test('helm upgrade from chart 0.1.0, the last released, during a burst: none lost, none written twice', async (t) => {
  // The previous chart with this build's image: the 0.1.0 image is not rebuilt here. What the
  // upgrade changes is the chart's: the validating webhook gives way to the policy, the
  // ConfigMap gets a name of its content, RBAC and values move.
  await until('no pod left', async () => (await release.pods()).length === 0, 60_000);
  await release.install([], PREVIOUS_CHART);
  const registrations = admin.makeApiClient(k8s.AdmissionregistrationV1Api);
  t.equal(
    (await registrations.listValidatingWebhookConfiguration()).items.length,
    1,
    "0.1.0's validating webhook in place",
  );
  const started = Date.now();
  const steady = fleet.steady('from-0-1-0', 2);
  await release.upgrade();
  await sleep(1000);
  const created = await steady.stop();
  figures.push(`helm upgrade from 0.1.0 --wait, ${created} nodes created meanwhile: ${secs(started)} s`);
  t.ok(created >= 10, `a burst during the whole roll-out (${created} nodes)`);
  await until('every node created during the upgrade recorded', () => fleet.allRecorded('from-0-1-0', created), 90_000);
  t.same(await fleet.wrongRecords('from-0-1-0'), [], 'no record lost or wrong');
  t.same(
    [...fleet.watcherWrites('from-0-1-0', [WATCHER_SA])].filter(([, w]) => w.length > 1).map(([n]) => n),
    [],
    'no node written twice by the reconciler',
  );
  t.same((await registrations.listValidatingWebhookConfiguration()).items, [], 'the validating webhook is gone');
  t.equal(
    (await registrations.listValidatingAdmissionPolicy()).items.length,
    1,
    'the record is guarded by the policy instead',
  );
  const configMaps = (await core.listNamespacedConfigMap({ namespace: release.namespace })).items.filter(
    (c) => c.data?.['config.yaml'] !== undefined,
  );
  t.equal(configMaps.length, 1, "one ConfigMap of the watcher's: 0.1.0's was removed");
  const pods = await readyPods();
  t.equal(pods.length, 2);
  t.same(
    pods.flatMap((p) => p.status?.containerStatuses ?? []).filter((c) => c.restartCount > 0),
    [],
    'no container restarted',
  );
  await release.uninstall();
});

t.test("the demo's scene (`npm run demo -- --node`): its pods record the launches, `report` runs in one", async (t) => {
  // As on the demo's fresh cluster: no pod of the last install still terminating.
  await until('no pod left', async () => (await release.pods()).length === 0, 60_000);
  const lines: string[] = [];
  const started = Date.now();
  await nodeScene({ fleet, release, step: (msg) => lines.push(`[demo] ${msg}`), print: (line) => lines.push(line) });
  figures.push(`the demo's scene (install, 6 launches, report in the leader pod, uninstall): ${secs(started)} s`);
  const out = lines.join('\n');
  const pods = lines.filter((l) => l.startsWith(`${release.name}-`));
  t.equal(pods.length, 2, 'two pods');
  t.ok(
    pods.every((l) => /^\S+ +true +10\.88\.\d+\.\d+ +kit-node +65532\b/.test(l)),
    'Ready, at pod addresses, on the node, as 65532',
  );
  t.equal(pods.filter((l) => /\byes\s*$/.test(l)).length, 1, 'one of them the leader');
  const records = lines
    .filter((l) => l.startsWith('ip-10-0-1-'))
    .map((l) =>
      l
        .trim()
        .split(/\s{2,}/)
        .slice(1)
        .join(' '),
    );
  t.same(records, [
    'm5.xlarge true cost-aware-ri-m5.xlarge-us-west-2 reserved-instance webhook',
    'm5.large true cost-aware-ec2-sp-m5-us-west-2 ec2-instance-savings-plan webhook',
    'c6i.large true cost-aware-compute-sp-global compute-savings-plan webhook',
    'r6g.2xlarge true cost-aware-compute-sp-global compute-savings-plan webhook',
    'm5.xlarge true cost-aware-ri-m5.xlarge-us-west-2 reserved-instance webhook',
    'm5.large true cost-aware-ec2-sp-m5-us-west-2 ec2-instance-savings-plan webhook',
  ]);
  t.match(
    out,
    /^\[demo\] kubectl exec -n veneer-system veneer-node-watcher-\S+ -- \/nodejs\/bin\/node dist\/cli\.js report --config \/etc\/veneer-node-watcher\/config\/config\.yaml$/m,
  );
  t.match(
    out,
    // Every node of the cluster, those of the subtests above too (the four launched while the chart
    // was uninstalled were recorded by the reconciler or by the webhook at a later update).
    /^(\d+) on-demand Karpenter nodes: \1 influenced, 0 not influenced, 0 pending; \d+ of \1 records written inline/m,
    'report, run in the leader pod through the kubelet',
  );
  t.match(out, /^\[demo\] helm uninstall$/m, 'uninstalled');
});

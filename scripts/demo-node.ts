// The body of `npm run demo -- --node`, run by scripts/demo.ts inside a network namespace of its
// own (kit/netns.ts): the chart installed with helm on a real node (kit/node/: a kubelet with
// containerd, from the image the Dockerfile describes, assembled here), cert-manager issuing its
// certificate, nodes launched as Karpenter launches them, and the records the pods wrote; then
// `report` run in the leader pod through the apiserver and the kubelet, as `kubectl exec` runs it.
import { startCertManager } from '../kit/cert-manager.ts';
import { ControlPlane } from '../kit/control-plane.ts';
import { Fleet, until } from '../kit/fleet.ts';
import { installKarpenterCRDs } from '../kit/karpenter-crds.ts';
import { assertInOwnNetworkNamespace } from '../kit/netns.ts';
import { builtWatcherImage } from '../kit/node/image.ts';
import { NODE_NAME, nodeControlPlaneOptions, RealNode } from '../kit/node/node.ts';
import { ChartRelease } from '../kit/node/release.ts';

assertInOwnNetworkNamespace();
const t0 = Number(process.env.VENEER_DEMO_T0 ?? Date.now());
const step = (msg: string) => console.log(`[demo +${((Date.now() - t0) / 1000).toFixed(1).padStart(5)}s] ${msg}`);
const table = (rows: string[][]) => {
  const widths = rows[0]!.map((_, i) => Math.max(...rows.map((r) => r[i]!.length)));
  for (const r of rows) console.log(r.map((c, i) => c.padEnd(widths[i]!)).join('  '));
};

const image = builtWatcherImage();
step(
  `starting etcd and kube-apiserver, then the node: containerd, kubelet (${NODE_NAME}), kube-scheduler, kube-controller-manager`,
);
const cp = await ControlPlane.start(nodeControlPlaneOptions());
let certManager: { stop(): Promise<void> } | undefined;
try {
  const node = await RealNode.start(cp, [image]);
  step(`node Ready ${(node.figures.readyMs / 1000).toFixed(1)} s after the kubelet started; ${image.ref} imported`);
  certManager = await startCertManager(cp);
  await installKarpenterCRDs(cp);
  const admin = cp.adminKubeConfig();
  const fleet = new Fleet(cp, admin);
  await fleet.createOverlays();
  step("Karpenter's CRDs, Veneer's three overlays and cert-manager's controllers are in; helm install of the chart");
  const release = new ChartRelease(cp, image);
  await release.install();
  const pods = await release.pods();
  const leader = await until('a leader', async () => (await release.leader()) !== undefined, 60_000).then(() =>
    release.leader(),
  );
  step('the chart rolled out (helm install --wait); its pods:');
  table([
    ['POD', 'READY', 'IP', 'NODE', 'USER', 'LEADER'],
    ...pods.map((p) => [
      p.metadata!.name!,
      String(p.status?.containerStatuses?.every((c) => c.ready) ?? false),
      p.status?.podIP ?? '-',
      p.spec?.nodeName ?? '-',
      String(p.spec?.securityContext?.runAsUser ?? '-'),
      leader?.startsWith(p.metadata!.name!) ? 'yes' : '',
    ]),
  ]);

  step('launching 6 nodes as Karpenter does (NodeClaim, kubelet CREATE, registration): the pods record them');
  await fleet.burst('ip-10-0-1', 6);
  const labels = await fleet.labels('ip-10-0-1');
  const decided = await fleet.decidedBy('ip-10-0-1');
  table([
    ['NAME', 'TYPE', 'INFLUENCED', 'MATCHING-OVERLAY', 'VENEER-CAPACITY-TYPE', 'RECORDED-BY'],
    ...[...labels].map(([name, l]) => [
      name,
      l['node.kubernetes.io/instance-type'] ?? '-',
      l['veneer.io/overlay-influenced'] ?? '-',
      l['veneer.io/matching-overlay'] ?? '-',
      l['veneer.io/capacity-type'] ?? '-',
      decided.get(name) ?? '-',
    ]),
  ]);

  const leaderPod = pods.find((p) => leader?.startsWith(p.metadata!.name!))!.metadata!.name!;
  // The pod's settings come from the chart's ConfigMap, not its environment: report reads the same file.
  const report = [
    '/nodejs/bin/node',
    'dist/cli.js',
    'report',
    '--config',
    '/etc/veneer-node-watcher/config/config.yaml',
  ];
  step(`kubectl exec -n ${release.namespace} ${leaderPod} -- ${report.join(' ')}`);
  const { stdout, stderr, status } = await release.exec(leaderPod, report);
  console.log(stdout || stderr);
  if (status !== 'Success') throw new Error(`report in the pod ended ${status}: ${stderr}`);
  step('helm uninstall');
  await release.uninstall();
  step('done');
} finally {
  await certManager?.stop();
  await cp.stop();
}

// The scene of `npm run demo -- --node` (scripts/demo-node.ts), on a control plane with a real node,
// cert-manager, Karpenter's CRDs and Veneer's overlays already in place: helm install of the chart,
// its pods, six nodes launched as Karpenter launches them and the records the pods wrote, then
// `report` run in the leader pod through the apiserver and the kubelet, as `kubectl exec` runs it,
// and helm uninstall. test/_real-node/node.test.ts runs this scene on its own node and checks what it
// prints: the node is brought up once in `npm test`.
import { type Fleet, until } from '../kit/fleet.ts';
import type { ChartRelease } from '../kit/node/release.ts';

export interface NodeSceneDeps {
  fleet: Fleet;
  release: ChartRelease;
  step: (msg: string) => void;
  /** Where the scene's tables and report go (the demo: stdout). */
  print: (line: string) => void;
}

export async function nodeScene({ fleet, release, step, print }: NodeSceneDeps): Promise<void> {
  const table = (rows: string[][]) => {
    const widths = rows[0]!.map((_, i) => Math.max(...rows.map((r) => r[i]!.length)));
    for (const r of rows) print(r.map((c, i) => c.padEnd(widths[i]!)).join('  '));
  };
  step("Karpenter's CRDs, Veneer's three overlays and cert-manager's controllers are in; helm install of the chart");
  await release.install();
  const pods = await release.pods();
  // One of these pods: a Lease left by an earlier install in the namespace may still name a pod that is gone.
  const podOf = (holder: string | undefined) => pods.find((p) => holder?.startsWith(p.metadata!.name!));
  await until('a leader', async () => podOf(await release.leader()) !== undefined, 60_000);
  const leader = await release.leader();
  step('the chart rolled out (helm install --wait); its pods:');
  table([
    ['POD', 'READY', 'IP', 'NODE', 'USER', 'LEADER'],
    ...pods.map((p) => [
      p.metadata!.name!,
      String(p.status?.containerStatuses?.every((c) => c.ready) ?? false),
      p.status?.podIP ?? '-',
      p.spec?.nodeName ?? '-',
      String(p.spec?.securityContext?.runAsUser ?? '-'),
      podOf(leader) === p ? 'yes' : '',
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

  const leaderPod = podOf(leader)!.metadata!.name!;
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
  print(stdout || stderr);
  if (status !== 'Success') throw new Error(`report in the pod ended ${status}: ${stderr}`);
  step('helm uninstall');
  await release.uninstall();
}

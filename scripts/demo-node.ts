// The body of `npm run demo -- --node`, run by scripts/demo.ts inside a network namespace of its
// own (kit/netns.ts): the chart installed with helm on a real node (kit/node/: a kubelet with
// containerd, from the image the Dockerfile describes, assembled here), cert-manager issuing its
// certificate, nodes launched as Karpenter launches them, and the records the pods wrote; then
// `report` run in the leader pod through the apiserver and the kubelet, as `kubectl exec` runs it
// (the scene: scripts/demo-node-scene.ts).
import { startCertManager } from '../kit/cert-manager.ts';
import { ControlPlane } from '../kit/control-plane.ts';
import { Fleet } from '../kit/fleet.ts';
import { installKarpenterCRDs } from '../kit/karpenter-crds.ts';
import { assertInOwnNetworkNamespace } from '../kit/netns.ts';
import { builtWatcherImage } from '../kit/node/image.ts';
import { NODE_NAME, nodeControlPlaneOptions, RealNode } from '../kit/node/node.ts';
import { ChartRelease } from '../kit/node/release.ts';
import { nodeScene } from './demo-node-scene.ts';

assertInOwnNetworkNamespace();
const t0 = Number(process.env.VENEER_DEMO_T0 ?? Date.now());
const step = (msg: string) => console.log(`[demo +${((Date.now() - t0) / 1000).toFixed(1).padStart(5)}s] ${msg}`);

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
  await nodeScene({ fleet, release: new ChartRelease(cp, image), step, print: (line) => console.log(line) });
  step('done');
} finally {
  await certManager?.stop();
  await cp.stop();
}

// The chart's pods on a real node (kit/node/): a kubelet with containerd, runc and the CNI bridge,
// registered to the kit's apiserver, running the image the Dockerfile describes, assembled here.
// `helm install` as a user runs it (cert-manager's controllers issuing and injecting); the pods
// confined as the chart says; the apiserver calling them through the Service and the record
// written inline; the Lease handed over when the leader pod goes; `helm upgrade` during a burst of
// node creations; `helm uninstall`; hostNetwork. The node needs addresses of its own, so all of
// it runs in a network namespace of the test's own (kit/netns.ts).
import { join } from 'node:path';
import { runInOwnNetworkNamespace } from '../../kit/netns.ts';
import { watcherImage } from '../../kit/node/image.ts';
import { realNodeRefusal } from '../../kit/node/node.ts';

const refused = realNodeRefusal();
if (refused !== undefined) {
  console.log(`1..0 # SKIP ${refused}`);
} else {
  // Here, not in the namespace: the Dockerfile's npm ci needs the registry.
  const started = Date.now();
  watcherImage();
  console.error(`the image (assembled, or cached by its inputs): ${((Date.now() - started) / 1000).toFixed(1)} s`);
  process.exitCode = await runInOwnNetworkNamespace(join(import.meta.dirname, 'node', 'in-namespace.ts'));
}

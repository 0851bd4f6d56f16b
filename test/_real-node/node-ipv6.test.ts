// The chart's pods on the real node (kit/node/) run dual-stack, IPv6 first, as on an IPv6 EKS
// cluster: the kubelet probes each pod at its IPv6 address (status.podIP), and /healthz, /metrics
// and the webhooks answer there as at the pod's IPv4 address. Like test/_real-node/node.test.ts, the body
// runs in a network namespace of its own (kit/netns.ts).
import { join } from 'node:path';
import { runInOwnNetworkNamespace } from '../../kit/netns.ts';
import { watcherImage } from '../../kit/node/image.ts';
import { realNodeRefusal } from '../../kit/node/node.ts';

const refused = realNodeRefusal();
if (refused !== undefined) {
  console.log(`1..0 # SKIP ${refused}`);
} else {
  // Here, not in the namespace: the Dockerfile's npm ci needs the registry.
  watcherImage();
  process.exitCode = await runInOwnNetworkNamespace(join(import.meta.dirname, 'node-ipv6', 'in-namespace.ts'));
}

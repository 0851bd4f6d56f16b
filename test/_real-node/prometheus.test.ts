// A real Prometheus scrapes the chart's pods on the real node, set up by prometheus-operator as
// kube-prometheus-stack sets it up, and evaluates the chart's alerts and the dashboard's queries.
// The node needs addresses of its own, so all of it runs in a network namespace of the test's own.
import { join } from 'node:path';
import { runInOwnNetworkNamespace } from '../../kit/netns.ts';
import { prometheusImages, watcherImage } from '../../kit/node/image.ts';
import { realNodeRefusal } from '../../kit/node/node.ts';

const refused = realNodeRefusal();
if (refused !== undefined) {
  console.log(`1..0 # SKIP ${refused}`);
} else {
  // Here, not in the namespace: the Dockerfile's npm ci needs the registry.
  watcherImage();
  prometheusImages();
  process.exitCode = await runInOwnNetworkNamespace(join(import.meta.dirname, 'prometheus', 'in-namespace.ts'));
}

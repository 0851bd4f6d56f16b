// The install path a user takes, for real: `helm install` of the chart; cert-manager's own
// controllers issuing the serving certificate from the chart's issuers and cainjector writing
// the CA into both webhook configurations; the watcher run as the chart's pod runs, on the
// issued Secret; the apiserver calling it through the chart's Service and verifying its name;
// a renewal; and, with the CA injection removed, the alert that makes the silent bypass loud.
// The apiserver routes a Service to its endpoints only at a non-loopback address, so all of it
// runs in a network namespace of its own (kit/netns.ts).
import { join } from 'node:path';
import { runInOwnNetworkNamespace } from '../../kit/netns.ts';

process.exitCode = await runInOwnNetworkNamespace(join(import.meta.dirname, 'install', 'in-namespace.ts'));

// Real Karpenter on AWS (kit/aws) writes the overlay statuses (Conflict, RuntimeValidation,
// capacity-only) on the AWS CRDs, and the watcher and `report` follow them. Everything that speaks an
// AWS API runs in a network namespace with only loopback, so the body runs there (in-namespace/statuses.ts).
import { join } from 'node:path';
import { runInOwnNetworkNamespace } from '../../kit/netns.ts';

process.exitCode = await runInOwnNetworkNamespace(join(import.meta.dirname, 'in-namespace', 'statuses.ts'));

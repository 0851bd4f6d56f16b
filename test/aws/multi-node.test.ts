// Real Karpenter on AWS (kit/aws): multi-node consolidation packs two nodes into one whose type an
// overlay prices below their own; without the overlay the same layout is consolidated by deleting
// a node. Everything that speaks an AWS API runs in a network namespace with only loopback
// (kit/netns.ts), so the body runs there (in-namespace/multi-node.ts).
import { join } from 'node:path';
import { runInOwnNetworkNamespace } from '../../kit/netns.ts';

process.exitCode = await runInOwnNetworkNamespace(join(import.meta.dirname, 'in-namespace', 'multi-node.ts'));

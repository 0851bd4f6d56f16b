// Real Karpenter on AWS (kit/aws) with consolidationPolicy Balanced: a replacement Karpenter's
// scoring approves only with the overlay's price is recorded `replacement`, and the same node is left
// alone without it. Everything that speaks an AWS API runs in a network namespace with only
// loopback (kit/netns.ts), so the body runs there (in-namespace/balanced.ts).
import { join } from 'node:path';
import { runInOwnNetworkNamespace } from '../../kit/netns.ts';

process.exitCode = await runInOwnNetworkNamespace(join(import.meta.dirname, 'in-namespace', 'balanced.ts'));

// Real Karpenter on AWS (kit/aws) consolidates a node into the one Veneer's Reserved Instance overlay
// priced at 0.00, and back once the overlay is deleted; the watcher records the first as caused by the
// overlay (`replacement`) and counts the churn after it went. Everything that speaks an AWS API runs in
// a network namespace with only loopback (kit/netns.ts), so the body runs there (in-namespace/replacement.ts).
import { join } from 'node:path';
import { runInOwnNetworkNamespace } from '../../kit/netns.ts';

process.exitCode = await runInOwnNetworkNamespace(join(import.meta.dirname, 'in-namespace', 'replacement.ts'));

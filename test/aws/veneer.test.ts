// Veneer's own overlay shapes, through real Karpenter on AWS (kit/aws) with the watcher beside it:
// Savings Plan overlays at 0.00 over a family, preference overlays, a weight collision, disabled
// mode. Everything that speaks an AWS API runs in a network namespace with only loopback
// (kit/netns.ts), so the body runs there (in-namespace/veneer.ts).
import { join } from 'node:path';
import { runInOwnNetworkNamespace } from '../../kit/netns.ts';

process.exitCode = await runInOwnNetworkNamespace(join(import.meta.dirname, 'in-namespace', 'veneer.ts'));

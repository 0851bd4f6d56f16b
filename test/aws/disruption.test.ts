// Karpenter's disruption, for real, through real Karpenter on AWS (kit/aws) with its budgets open:
// nothing drifts when nothing changed, consolidation replaces and deletes, and drift still fires when
// something does change. Everything that speaks an AWS API runs in a network namespace with only
// loopback (kit/netns.ts), so the body runs there (in-namespace/disruption.ts).
import { join } from 'node:path';
import { runInOwnNetworkNamespace } from '../../kit/netns.ts';

process.exitCode = await runInOwnNetworkNamespace(join(import.meta.dirname, 'in-namespace', 'disruption.ts'));

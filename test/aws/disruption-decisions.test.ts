// Real Karpenter on AWS (kit/aws) with its disruption loop running beside provisioning: a launch
// beside an emptiness deletion is recorded inline, and an overlay deleted while Karpenter validates
// a consolidation still decided its replacement. Everything that speaks an AWS API runs in a
// network namespace with only loopback (kit/netns.ts), so the body runs there
// (in-namespace/disruption-decisions.ts).
import { join } from 'node:path';
import { runInOwnNetworkNamespace } from '../../kit/netns.ts';

process.exitCode = await runInOwnNetworkNamespace(join(import.meta.dirname, 'in-namespace', 'disruption-decisions.ts'));

// Real Karpenter on AWS (kit/aws) launches the same pod spot without Veneer's Reserved Instance
// overlay and on-demand with it. Everything that speaks an AWS API runs in a network namespace with
// only loopback (kit/netns.ts), so the body runs there (in-namespace/flip.ts).
import { join } from 'node:path';
import { runInOwnNetworkNamespace } from '../../kit/netns.ts';

process.exitCode = await runInOwnNetworkNamespace(join(import.meta.dirname, 'in-namespace', 'flip.ts'));

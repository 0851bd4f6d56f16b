// 100 concurrent launches through real Karpenter on AWS (kit/aws), recorded at CREATE. Everything
// that speaks an AWS API runs in a network namespace with only loopback (kit/netns.ts),
// so the body runs there (in-namespace/launches.ts).
import { join } from 'node:path';
import { runInOwnNetworkNamespace } from '../../kit/netns.ts';

process.exitCode = await runInOwnNetworkNamespace(join(import.meta.dirname, 'in-namespace', 'launches.ts'));

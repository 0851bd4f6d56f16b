// Drift and expiration, for real, through real Karpenter on AWS (kit/aws) with the watcher beside it:
// a rollout under a Reserved Instance overlay, then the replacement's expiration. Everything that
// speaks an AWS API runs in a network namespace with only loopback (kit/netns.ts), so the body runs
// there (in-namespace/lifecycle.ts).
import { join } from 'node:path';
import { runInOwnNetworkNamespace } from '../../kit/netns.ts';

process.exitCode = await runInOwnNetworkNamespace(join(import.meta.dirname, 'in-namespace', 'lifecycle.ts'));

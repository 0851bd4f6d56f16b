// Consolidation where what the replacement could have been is decided by more than prices, through
// real Karpenter on AWS (kit/aws) with the watcher beside it: the pods' fit under a discounted node,
// and a NodePool limit. Everything that speaks an AWS API runs in a network namespace with only
// loopback (kit/netns.ts), so the body runs there (in-namespace/limits.ts).
import { join } from 'node:path';
import { runInOwnNetworkNamespace } from '../../kit/netns.ts';

process.exitCode = await runInOwnNetworkNamespace(join(import.meta.dirname, 'in-namespace', 'limits.ts'));

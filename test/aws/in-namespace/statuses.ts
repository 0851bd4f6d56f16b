// The body of test/aws/statuses.test.ts, run in a network namespace with only loopback: real
// Karpenter with its AWS provider judges Veneer's overlays on AWS keys (test/support/overlay-statuses.ts,
// the same suite the KWOK provider runs). The judge gets the instance types as the AWS provider
// built them, read back from two nodes it launched first (m5.xlarge and c6i.large: every overlay
// of the suite prices one of them).
import t from 'tap';
import * as k8s from '@kubernetes/client-node';
import { AWS_KARPENTER_VERSION, REGION, startAwsKarpenterWithWatcher } from '../../../kit/aws/karpenter.ts';
import { awsJudgeCase } from '../../judges/aws-judge.ts';
import { assertInOwnNetworkNamespace } from '../../../kit/netns.ts';
import { overlayStatuses } from '../../support/overlay-statuses.ts';

assertInOwnNetworkNamespace();
t.setTimeout(300_000);
const env = await startAwsKarpenterWithWatcher();
t.teardown(async () => {
  if (!t.passing()) console.error(`--- karpenter-aws's log ends:\n${env.karpenter.controller.logTail(60)}`);
  await env.stop();
});
await env.karpenter.createPods([
  { name: 'm5', instanceType: 'm5.xlarge' },
  { name: 'c6i', instanceType: 'c6i.large' },
]);
const nodes = await env.karpenter.waitForNodes(2, { registered: true, timeoutMs: 90_000 });
const served = await Promise.all(
  nodes.map((n) => env.admin.makeApiClient(k8s.CoreV1Api).readNode({ name: n.metadata!.name! })),
);
overlayStatuses(t, env, {
  provider: 'aws',
  region: REGION,
  judgeVersion: AWS_KARPENTER_VERSION,
  judgeCase: (overlays) => ({
    ...awsJudgeCase(served, env.karpenter.nodePools, overlays, env.karpenter.catalog),
    launches: [],
  }),
  restrictedKey: 'karpenter.k8s.aws/instance-accelerator-color',
  restrictedRefusedBy: 'crd',
  judgeAcceptsRestrictedKey: false,
});

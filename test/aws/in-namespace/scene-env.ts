// What every scene of test/aws starts with: real Karpenter on AWS and the watcher beside it, their
// log's tail shown when a test failed, everything stopped at the file's end, and the clients and
// kubeconfig the scenes read the cluster with.
import * as k8s from '@kubernetes/client-node';
import type { Test } from 'tap';
import {
  AWS_KARPENTER_VERSION,
  type AwsKarpenterOptions,
  startAwsKarpenterWithWatcher,
} from '../../../kit/aws/karpenter.ts';

export const secs = (ms: number) => `${(ms / 1000).toFixed(1)} s`;

/** The scene's cluster, stopped at `t`'s end (after `beforeStop`, where a scene has loops of its own to end). */
export async function startSceneEnv(t: Test, karpenter: AwsKarpenterOptions, beforeStop?: () => Promise<void>) {
  const started = Date.now();
  const env = await startAwsKarpenterWithWatcher({ karpenter });
  t.teardown(async () => {
    await beforeStop?.();
    if (!t.passing()) console.error(`--- karpenter-aws's log ends:\n${env.karpenter.controller.logTail(80)}`);
    await env.stop();
  });
  t.comment(
    `control plane, local EC2, Karpenter ${AWS_KARPENTER_VERSION} and the watcher up in ${secs(Date.now() - started)}`,
  );
  return {
    env,
    started,
    custom: env.admin.makeApiClient(k8s.CustomObjectsApi),
    core: env.admin.makeApiClient(k8s.CoreV1Api),
    kubeconfig: env.cp.writeKubeConfig(),
  };
}

// The drift scene of `npm run demo -- --aws` (scripts/demo-aws.ts), after the consolidation scene: a
// NodePool "rollout" of t3.large and m5.large on-demand, and Veneer's Reserved Instance overlay for
// m5.large (price 0.00). Karpenter launches an m5.large for the pod (without the overlay: t3.large,
// $0.0832/h under m5.large's $0.096/h), recorded `instance-type`. Then a rollout: a label added to the
// NodePool's template changes its hash, Karpenter marks the node Drifted (NodePoolDrifted) and
// replaces it. Its replacement is made whatever the prices, through the provisioner's scheduling
// of the drifted node's pods: its record reads that launch's effect (`instance-type` again, the
// overlay still in force), and names the node it replaced, never `replacement`.
// The pool's families are disjoint from the consolidation scene's Savings Plan (c6i), and an m5.large
// at 0.00 does not undercut that scene's c6i.large at 0.00: neither scene moves the other's node.
// test/aws/lifecycle.test.ts runs this scene with a short expireAfter and goes on to the expiration.
import * as k8s from '@kubernetes/client-node';
import { awsNodePoolObject, OPEN_DISRUPTION, REGION } from '../kit/aws/karpenter.ts';
import { NODECLAIM_API, NODEPOOL_API, podObject } from '../kit/karpenter-controller.ts';
import { reservedInstance } from '../kit/veneer.ts';
import { readStory } from '../src/engine/index.ts';
import type { Recorded, SceneDeps } from './demo-aws-consolidation.ts';

const OVERLAY_API = { group: 'karpenter.sh', version: 'v1alpha1', plural: 'nodeoverlays' };
const ROLLOUT_POOL = 'rollout';
const TYPES = ['t3.large', 'm5.large'];
const ROLLOUT_POD = 'rollout-app';
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

interface Claim {
  metadata: { name: string; labels?: Record<string, string>; deletionTimestamp?: string };
  status?: { nodeName?: string };
}

/** A node of the pool, recorded, with its instance type. */
export type RolloutNode = Recorded & { instanceType: string };

export interface DriftScene {
  /** The pod's first node, recorded at its provisioning launch. */
  first: RolloutNode;
  /** The node Karpenter's drift made in its place. */
  replacement: RolloutNode;
  /** The pool's live node once a NodeClaim other than those in `not` carries a record. */
  next: (not: string[], what: string) => Promise<RolloutNode>;
  /** Stops making the pod again (its ReplicaSet, played here). */
  stop: () => Promise<void>;
}

/**
 * The scene, left running: the pod is made again whenever a drain evicts it until `stop`, so a
 * test can go on to what happens next (the replacement's expiration, with `expireAfter`).
 */
export async function driftScene(
  d: SceneDeps & {
    expireAfter?: string;
    /** Called with the first node once recorded, before the rollout drifts it (and it goes). */
    beforeRollout?: (first: RolloutNode) => Promise<unknown>;
  },
): Promise<DriftScene> {
  const print = d.print ?? ((line: string) => console.log(line));
  const custom = d.admin.makeApiClient(k8s.CustomObjectsApi);
  const core = d.admin.makeApiClient(k8s.CoreV1Api);
  const recordedOther = async (not: string[]): Promise<RolloutNode | undefined> => {
    const live = ((await custom.listClusterCustomObject(NODECLAIM_API)) as { items: Claim[] }).items.filter(
      (c) =>
        c.metadata.labels?.['karpenter.sh/nodepool'] === ROLLOUT_POOL &&
        !c.metadata.deletionTimestamp &&
        !not.includes(c.metadata.name),
    );
    for (const claim of live) {
      const node = claim.status?.nodeName;
      if (!node) continue;
      const story = readStory(
        (await core.readNode({ name: node }).catch(() => undefined))?.metadata?.annotations?.[
          'veneer.io/overlay-decision'
        ],
      );
      const instanceType = claim.metadata.labels?.['node.kubernetes.io/instance-type'] ?? '';
      if (story) return { node, claim: claim.metadata.name, story, instanceType };
    }
    return undefined;
  };
  const next = async (not: string[], what: string, ms = 240_000): Promise<RolloutNode> => {
    for (const deadline = Date.now() + ms; ; await sleep(250)) {
      const value = await recordedOther(not);
      if (value !== undefined) return value;
      if (Date.now() > deadline) throw new Error(`timed out after ${ms} ms waiting for: ${what}`);
    }
  };
  const line = (r: RolloutNode) => {
    const e = r.story.effect;
    const replaced = e?.disruption?.replaced.map((x) => `${x.instanceType} ${x.node ?? x.nodeClaim}`).join(', ');
    return `  ${r.node}: ${r.instanceType}, effect ${e?.verdict}${e?.disruption ? ` (launched by Karpenter's disruption: ${e.disruption.reason}, replacing ${replaced})` : ' (a provisioning launch)'}`;
  };

  const ri = reservedInstance('m5.large', REGION);
  d.step(
    `a NodePool "${ROLLOUT_POOL}" of ${TYPES.join(', ')} on-demand, Veneer's Reserved Instance overlay for m5.large (price 0.00), and one 500m pod in the pool`,
  );
  await custom.createClusterCustomObject({ ...OVERLAY_API, body: ri }).catch((err: { code?: number }) => {
    if (err.code !== 409) throw err;
  });
  await custom.createClusterCustomObject({
    ...NODEPOOL_API,
    body: awsNodePoolObject({
      name: ROLLOUT_POOL,
      capacityTypes: ['on-demand'],
      instanceTypes: TYPES,
      disruption: OPEN_DISRUPTION,
      ...(d.expireAfter ? { expireAfter: d.expireAfter } : {}),
    }),
  });
  const body = podObject({ name: ROLLOUT_POD, nodePool: ROLLOUT_POOL, cpu: '500m' }, d.vcpusOf);
  // No kubelet confirms a pod's end here: a grace period would leave an evicted pod Terminating.
  body.spec!.terminationGracePeriodSeconds = 0;
  let stopped = false;
  const replicaSet = (async () => {
    while (!stopped) {
      const pod = await core.readNamespacedPod({ name: ROLLOUT_POD, namespace: 'default' }).catch(() => undefined);
      if (pod === undefined) await core.createNamespacedPod({ namespace: 'default', body }).catch(() => {});
      else if (pod.metadata?.deletionTimestamp)
        await core
          .deleteNamespacedPod({ name: ROLLOUT_POD, namespace: 'default', gracePeriodSeconds: 0 })
          .catch(() => {});
      await sleep(250);
    }
  })();
  const stop = async () => {
    stopped = true;
    await replicaSet;
  };
  try {
    const first = await next([], 'the m5.large node recorded');
    d.step('Karpenter launched m5.large, the Reserved Instance: without the overlay it would be t3.large');
    print(line(first));
    await d.beforeRollout?.(first);
    d.step(
      "a rollout: a label added to the NodePool's template changes its hash; Karpenter marks the node Drifted and replaces it",
    );
    const np = (await custom.getClusterCustomObject({ ...NODEPOOL_API, name: ROLLOUT_POOL })) as {
      spec: { template: { metadata: { labels?: Record<string, string> } } };
    };
    np.spec.template.metadata.labels = { ...np.spec.template.metadata.labels, 'example.com/release': '2' };
    await custom.replaceClusterCustomObject({ ...NODEPOOL_API, name: ROLLOUT_POOL, body: np });
    const replacement = await next([first.claim], 'the drift replacement recorded');
    print(line(replacement));
    d.step("why: the drift replacement's record is its launch's effect, and names the node it replaced");
    await d.cli(['explain', replacement.node, '--prices-source', 'isolated', '--prices-region', REGION]);
    return { first, replacement, next, stop };
  } catch (err) {
    await stop();
    throw err;
  }
}

// One on-demand NodePool (m5.large, c6i.large, r6i.large; consolidation open: WhenEmptyOrUnderutilized,
// consolidateAfter 5s, budgets 100%) under real Karpenter on AWS with the watcher beside it, and what
// the disruption tests do with it: pods that need nodes, the NodeClaims and their records, the
// budget and a taint that lay out nodes. Run inside a network namespace with only loopback.
import type { Test } from 'tap';
import { sleep, until } from '../../../kit/fleet.ts';
import { awsNodePoolObject, type NodePoolDisruption, OPEN_DISRUPTION } from '../../../kit/aws/karpenter.ts';
import { NODEPOOL_API, type NodeClaim, podObject } from '../../../kit/karpenter-controller.ts';
import { mergePatch } from '../../../kit/karpenter-sim.ts';
import { readStory } from '../../../src/engine/index.ts';
import type { DecisionStory } from '../../../src/engine/record.ts';
import { explainAgrees } from './explained.ts';
import { startSceneEnv } from './scene-env.ts';

export { secs } from './scene-env.ts';
export const createdAt = (c: NodeClaim) => Date.parse(c.metadata.creationTimestamp ?? '');
export const typeOf = (c: NodeClaim) => c.metadata.labels?.['node.kubernetes.io/instance-type'];
export const disruptionOf = (c: NodeClaim) =>
  c.status?.conditions?.find((x) => x.type === 'DisruptionReason' && x.status === 'True') as
    | { reason?: string; lastTransitionTime?: string }
    | undefined;

const POOL = 'od';
const HOLD = 'veneer.test/hold';

/** The pool's instance types, unless a test starts it with fewer. */
export const POOL_TYPES = ['m5.large', 'c6i.large', 'r6i.large'];

/** The pool under real Karpenter on AWS, the watcher beside it, and what the tests do with it; stopped at `t`'s end. */
export async function startPoolScene(
  t: Test,
  pool: { instanceTypes?: string[]; disruption?: NodePoolDisruption } = {},
) {
  const { env, custom, core, kubeconfig } = await startSceneEnv(t, {
    // An instance boots for a few seconds before its kubelet's CREATE, as on EC2.
    bootDelayMs: 3000,
    nodePools: [
      {
        name: POOL,
        capacityTypes: ['on-demand'],
        instanceTypes: pool.instanceTypes ?? POOL_TYPES,
        disruption: pool.disruption ?? OPEN_DISRUPTION,
      },
    ],
  });
  const { karpenter, admin } = env;
  const live = async () => (await karpenter.nodeClaims()).filter((c) => !('deletionTimestamp' in c.metadata));
  async function storyOfClaim(c: NodeClaim): Promise<DecisionStory | undefined> {
    if (!c.status?.nodeName) return undefined;
    const node = await core.readNode({ name: c.status.nodeName }).catch(() => undefined);
    return readStory(node?.metadata?.annotations?.['veneer.io/overlay-decision']);
  }
  /** Pods of the pool, by name; no grace period: no kubelet runs here to confirm a pod's end. */
  async function createPods(names: string[], cpu: string): Promise<void> {
    for (const name of names) {
      const body = podObject({ name, nodePool: POOL, cpu }, (type) => karpenter.vcpus.get(type)!);
      body.spec!.terminationGracePeriodSeconds = 0;
      await core.createNamespacedPod({ namespace: 'default', body });
    }
  }
  const deletePods = (names: string[]) =>
    Promise.all(
      names.map((name) =>
        core.deleteNamespacedPod({ name, namespace: 'default', gracePeriodSeconds: 0 }).catch(() => undefined),
      ),
    );
  /** The NodePool's disruption budget: "0" holds every disruption while a layout is made. */
  const budget = (nodes: string) =>
    custom.patchClusterCustomObject(
      { ...NODEPOOL_API, name: POOL, body: { spec: { disruption: { budgets: [{ nodes }] } } } },
      mergePatch,
    );
  /** The instance types the pool allows from now on (its requirements: no drift, the node's type stays allowed). */
  const allowTypes = (instanceTypes: string[]) =>
    custom.patchClusterCustomObject(
      {
        ...NODEPOOL_API,
        name: POOL,
        body: {
          spec: {
            template: {
              spec: {
                requirements: awsNodePoolObject({ name: POOL, capacityTypes: ['on-demand'], instanceTypes }).spec
                  .template.spec.requirements,
              },
            },
          },
        },
      },
      mergePatch,
    );
  /** A taint no pod tolerates: Karpenter's scheduling respects it (a cordon it does not), so the next pod gets a node of its own. */
  async function hold(node: string, on: boolean): Promise<void> {
    const taints = ((await core.readNode({ name: node })).spec?.taints ?? []).filter((x) => x.key !== HOLD);
    if (on) taints.push({ key: HOLD, value: 'true', effect: 'NoSchedule' });
    await core.patchNode({ name: node, body: { spec: { taints } } }, mergePatch);
  }
  /** Pods a Deployment would keep: made again when Karpenter's drain evicts them (no controller-manager runs here). */
  function keepPods(names: string[], cpu: string): () => Promise<void> {
    let stopped = false;
    const loop = (async () => {
      while (!stopped) {
        for (const name of names) {
          const pod = await core.readNamespacedPod({ name, namespace: 'default' }).catch(() => undefined);
          if (pod === undefined) await createPods([name], cpu).catch(() => undefined);
          else if (pod.metadata?.deletionTimestamp) await deletePods([name]);
        }
        await sleep(250);
      }
    })();
    return async () => {
      stopped = true;
      await loop;
    };
  }
  /** The live NodeClaim of `type` once its node carries a record (a replacement, say), with its effect. */
  async function recordedOfType(type: string, timeoutMs = 150_000) {
    let claim: NodeClaim | undefined;
    let story: DecisionStory | undefined;
    await until(
      `an ${type} NodeClaim whose node is recorded`,
      async () => {
        claim = (await live()).find((c) => typeOf(c) === type);
        story = claim && (await storyOfClaim(claim));
        return story !== undefined;
      },
      timeoutMs,
    );
    return { claim: claim!, story: story!, effect: story!.effect! };
  }
  /** `explain` on a recorded NodeClaim's node, live, while the overlays its record read are there. */
  const explained = (t: Test, r: { claim: NodeClaim; story: DecisionStory }, opts: { overlayGone?: boolean } = {}) =>
    t.test('explained', (t) => explainAgrees(t, kubeconfig, r.claim.status!.nodeName!, r.story, opts));
  const untilPoolEmpty = () =>
    until('the pool emptied', async () => (await karpenter.nodeClaims()).length === 0, 120_000);
  return {
    env,
    karpenter,
    admin,
    custom,
    core,
    live,
    storyOfClaim,
    createPods,
    deletePods,
    budget,
    allowTypes,
    hold,
    keepPods,
    recordedOfType,
    explained,
    untilPoolEmpty,
  };
}

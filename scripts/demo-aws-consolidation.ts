// The consolidation scene of `npm run demo -- --aws` (scripts/demo-aws.ts): a NodePool of m5.large,
// c6i.large and r6i.large on-demand with consolidation open, created once the rest of the demo has
// settled, so only this scene's pod lands in it, and the demo's overlays deleted first (they price
// every on-demand offering at 0.00, under which nothing is ever cheaper). Karpenter launches the cheapest (c6i.large); Veneer's
// Reserved Instance overlay then prices m5.large at 0.00 and Karpenter replaces the node, a launch
// that without the overlay would not have happened (`replacement`); the overlay deleted, Karpenter
// replaces it back, and the churn is counted and told on the NodeOverlay.
// test/aws/replacement.test.ts runs this scene (not the demo's test: the scene once in `npm test`),
// checks what it prints and the records it returns, and does more at its two checkpoints.
import * as k8s from '@kubernetes/client-node';
import { awsNodePoolObject, OPEN_DISRUPTION, REGION } from '../kit/aws/karpenter.ts';
import { NODECLAIM_API, NODEPOOL_API, podObject } from '../kit/karpenter-controller.ts';
import { reservedInstance } from '../kit/veneer.ts';
import { readStory } from '../src/engine/index.ts';
import type { DecisionStory } from '../src/engine/record.ts';
import type { RunningWatcher } from '../src/commands/serve.ts';

const OVERLAY_API = { group: 'karpenter.sh', version: 'v1alpha1', plural: 'nodeoverlays' };
const POOL = 'consolidating';
const TYPES = ['m5.large', 'c6i.large', 'r6i.large'];
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

export interface SceneDeps {
  admin: k8s.KubeConfig;
  watcher: RunningWatcher;
  vcpusOf: (type: string) => number;
  step: (msg: string) => void;
  /** Runs the CLI live on the cluster and prints what it says. */
  cli: (args: string[]) => Promise<void>;
  /** Where the scene's lines go (the demo: stdout). */
  print?: (line: string) => void;
  /** Called once the first node is recorded, and before the overlay is deleted; a test checks more there. */
  checkpoints?: { launched?: (r: Recorded) => Promise<void>; beforeOverlayGoes?: (r: Recorded) => Promise<void> };
}

/** A node of the pool, its NodeClaim and its record. */
export interface Recorded {
  node: string;
  claim: string;
  story: DecisionStory;
}

interface Claim {
  metadata: { name: string; labels?: Record<string, string>; deletionTimestamp?: string };
  status?: { nodeName?: string };
}

export async function consolidationScene(
  d: SceneDeps,
): Promise<{ first: Recorded; replacement: Recorded; back: Recorded }> {
  const print = d.print ?? ((line: string) => console.log(line));
  const custom = d.admin.makeApiClient(k8s.CustomObjectsApi);
  const core = d.admin.makeApiClient(k8s.CoreV1Api);
  /** The pool's one live NodeClaim once it is of `type` and its node carries a record. */
  const recorded = async (type: string): Promise<Recorded | undefined> => {
    const live = ((await custom.listClusterCustomObject(NODECLAIM_API)) as { items: Claim[] }).items.filter(
      (c) => c.metadata.labels?.['karpenter.sh/nodepool'] === POOL && !c.metadata.deletionTimestamp,
    );
    const claim = live[0];
    if (live.length !== 1 || claim?.metadata.labels?.['node.kubernetes.io/instance-type'] !== type) return undefined;
    const node = claim.status?.nodeName;
    if (!node) return undefined;
    const story = readStory(
      (await core.readNode({ name: node }).catch(() => undefined))?.metadata?.annotations?.[
        'veneer.io/overlay-decision'
      ],
    );
    return story ? { node, claim: claim.metadata.name, story } : undefined;
  };
  const until = async <T>(what: string, read: () => Promise<T | undefined>, ms = 180_000): Promise<T> => {
    for (const deadline = Date.now() + ms; ; await sleep(250)) {
      const value = await read();
      if (value !== undefined) return value;
      if (Date.now() > deadline) throw new Error(`timed out after ${ms} ms waiting for: ${what}`);
    }
  };
  const line = (r: Recorded) => {
    const e = r.story.effect;
    const replaced = e?.disruption?.replaced.map((x) => `${x.instanceType} ${x.node ?? x.nodeClaim}`).join(', ');
    return `  ${r.node}: effect ${e?.verdict}${e?.disruption ? ` (launched by Karpenter's disruption: ${e.disruption.reason}, replacing ${replaced}; options that undercut without the selected overlays: ${e.disruption.cheaperWithout})` : ' (a provisioning launch)'}`;
  };

  d.step("the demo's overlays deleted (each priced on-demand at 0.00): this scene starts from list prices");
  const existing = (await custom.listClusterCustomObject(OVERLAY_API)) as { items: { metadata: { name: string } }[] };
  for (const o of existing.items) await custom.deleteClusterCustomObject({ ...OVERLAY_API, name: o.metadata.name });
  d.step(
    `a NodePool "${POOL}" of ${TYPES.join(', ')} on-demand with consolidation open (WhenEmptyOrUnderutilized after 5 s), and one 500m pod in it`,
  );
  await custom.createClusterCustomObject({
    ...NODEPOOL_API,
    body: awsNodePoolObject({
      name: POOL,
      capacityTypes: ['on-demand'],
      instanceTypes: TYPES,
      disruption: OPEN_DISRUPTION,
    }),
  });
  const body = podObject({ name: 'steady-app', nodePool: POOL, cpu: '500m' }, d.vcpusOf);
  // No kubelet confirms a pod's end here: a grace period would leave an evicted pod Terminating.
  body.spec!.terminationGracePeriodSeconds = 0;
  // Its ReplicaSet would make it again when Karpenter drains its node; the demo does.
  let stopped = false;
  const replicaSet = (async () => {
    while (!stopped) {
      const pod = await core.readNamespacedPod({ name: 'steady-app', namespace: 'default' }).catch(() => undefined);
      if (pod === undefined) await core.createNamespacedPod({ namespace: 'default', body }).catch(() => {});
      await sleep(250);
    }
  })();
  try {
    const first = await until('the c6i.large node recorded', () => recorded('c6i.large'));
    d.step('Karpenter launched the cheapest type, c6i.large ($0.085/h; m5.large lists at $0.096/h):');
    print(line(first));
    await d.checkpoints?.launched?.(first);

    const ri = reservedInstance('m5.large', REGION);
    d.step(
      `Veneer's Reserved Instance overlay for m5.large (price 0.00): Karpenter reconsiders consolidation and replaces the node`,
    );
    await custom.createClusterCustomObject({ ...OVERLAY_API, body: ri });
    const replacement = await until('the m5.large replacement recorded', () => recorded('m5.large'));
    print(line(replacement));
    d.step('why, and what the overlays are worth now:');
    await d.cli(['explain', replacement.node, '--prices-source', 'isolated', '--prices-region', REGION]);
    await d.cli(['report']);

    await d.checkpoints?.beforeOverlayGoes?.(replacement);
    d.step('the overlay deleted (the commitment used up): Karpenter replaces the node it had priced at 0.00');
    await custom.deleteClusterCustomObject({ ...OVERLAY_API, name: ri.metadata.name });
    const back = await until('the c6i.large replacement recorded', () => recorded('c6i.large'));
    print(line(back));
    const churn = await until('the churn counted', async () => {
      const v = (await d.watcher.metrics.recordedDisruptions.get()).values.find(
        (x) => x.labels.overlay_state === 'gone' && x.value > 0,
      );
      return v;
    });
    print(
      `  veneer_nodewatcher_recorded_disruptions_total{reason="${churn.labels.reason}",overlay_state="gone"} ${churn.value}`,
    );
    const events = d.admin.makeApiClient(k8s.EventsV1Api);
    const told = await until(
      'the Event on the NodeOverlay',
      async () =>
        (await events.listNamespacedEvent({ namespace: 'default' })).items.find(
          (e) => e.regarding?.kind === 'NodeOverlay' && e.regarding.name === ri.metadata.name,
        ),
      30_000,
    );
    print(`  Event on NodeOverlay ${ri.metadata.name}: ${told.reason}: ${told.note}`);
    d.step("the replacement's record keeps the node it churned: explain, and report with the overlay gone");
    await d.cli(['explain', back.node, '--prices-source', 'isolated', '--prices-region', REGION]);
    await d.cli(['report']);
    return { first, replacement, back };
  } finally {
    stopped = true;
    await replicaSet;
  }
}

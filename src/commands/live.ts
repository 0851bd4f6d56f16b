// What `explain` and `report` read live, from the cluster `serve` would talk to, found in serve's
// order and with its refusals (KUBECONFIG, else the pod's ServiceAccount, else ~/.kube/config).
// Nothing is held whole that a cluster of 100,000 nodes has 100,000 of: NodeClaims are made views
// a page at a time, and `report` is handed the nodes a page at a time, recorded ones by their
// metadata (their record is labels and an annotation), the ones that may still need a record whole.
import {
  launchingReason,
  toNodeClaimView,
  toNodePoolView,
  undecidedSelector,
  type NodeObject,
  type NodePoolObject,
  type RecordKeys,
} from '../engine/index.ts';
import type { KubeClient } from '../kube/client.ts';
import type { EventObject } from '../state/disruption/watch.ts';
import type { Inputs } from './inputs.ts';
import { nodeClassesOf } from './inputs.ts';

type Kube = {
  client: KubeClient;
  lister: typeof import('../kube/list.ts').lister;
  httpStatus: typeof import('../kube/failures.ts').httpStatus;
};

/** Only commands that talk to a cluster load the HTTP client. */
async function connect(): Promise<Kube> {
  const [{ KubeClient }, { loadClusterAccess }, { lister }, { httpStatus }] = await Promise.all([
    import('../kube/client.ts'),
    import('../kube/kubeconfig.ts'),
    import('../kube/list.ts'),
    import('../kube/failures.ts'),
  ]);
  return { client: new KubeClient(loadClusterAccess()), lister, httpStatus };
}

/** Every item of a list, a page at a time, each handed to `each` before the next page is asked for. */
async function eachItem(
  kube: Kube,
  path: string,
  each: (item: unknown) => void,
  o: { accept?: string; labelSelector?: string; fieldSelector?: string } = {},
): Promise<void> {
  const page = kube.lister(kube.client, path, o);
  let token: string | undefined;
  do {
    const p = await page(token);
    for (const item of p.items) each(item);
    token = p.continueToken;
  } while (token);
}

async function all(kube: Kube, path: string, o: { fieldSelector?: string } = {}): Promise<unknown[]> {
  const items: unknown[] = [];
  await eachItem(kube, path, (item) => items.push(item), o);
  return items;
}

/** Everything but the nodes: overlays, NodePools, NodeClaims (as views), EC2NodeClasses, Karpenter's disruption Events. */
async function readRest(kube: Kube): Promise<Omit<Inputs, 'nodes'>> {
  const [{ OVERLAYS_PATH, NODEPOOLS_PATH, NODECLAIMS_PATH }, { EC2_NODECLASSES_PATH }, events] = await Promise.all([
    import('../state/caches.ts'),
    import('../state/launch-caches.ts'),
    import('../state/disruption/watch.ts'),
  ]);
  const optional = (code: number | undefined, ...allowed: number[]) => code !== undefined && allowed.includes(code);
  const nodeClaims: Inputs['nodeClaims'] = [];
  // Karpenter's Events; without the right to read them, the records and the marks tell what they can.
  const eventsOf = (selector: string) =>
    all(kube, events.LAUNCHING_EVENTS_PATH, { fieldSelector: selector }).catch((err: unknown) => {
      if (optional(kube.httpStatus(err), 403)) return [];
      throw err;
    });
  const [overlays, pools, classes, launching, candidates, approvals] = await Promise.all([
    all(kube, OVERLAYS_PATH),
    all(kube, NODEPOOLS_PATH),
    // Served only where Karpenter's AWS provider is installed; readable only with the chart's rights.
    all(kube, EC2_NODECLASSES_PATH).catch((err: unknown) => {
      if (optional(kube.httpStatus(err), 404, 403)) return [];
      throw err;
    }),
    // Which NodeClaims Karpenter's disruption launched, when consolidation decided, Balanced's scores.
    eventsOf(events.LAUNCHING_EVENTS_SELECTOR),
    eventsOf(events.CANDIDATE_EVENTS_SELECTOR),
    eventsOf(events.APPROVAL_EVENTS_SELECTOR),
    eachItem(kube, NODECLAIMS_PATH, (c) =>
      nodeClaims.push(toNodeClaimView(c as Parameters<typeof toNodeClaimView>[0])),
    ),
  ]);
  return {
    overlays: overlays as Inputs['overlays'],
    nodePools: pools.map((p) => toNodePoolView(p as NodePoolObject)),
    nodeClaims,
    ...nodeClassesOf(classes),
    launching: launchingByNodeClaim(launching),
    // As the watcher's caches keep them: the decision's window and Balanced's scores are read alike.
    candidates: candidates.flatMap((e) => {
      const c = events.candidateEvent(e as EventObject);
      return c.nodeClaim !== '' && c.at !== undefined ? [{ nodeClaim: c.nodeClaim, at: c.at }] : [];
    }),
    approvals: approvals.flatMap((e) => {
      const a = events.approvalEvent(e as EventObject);
      return a.at !== undefined && a.figures !== undefined ? [{ object: a.object, at: a.at, figures: a.figures }] : [];
    }),
  };
}

function launchingByNodeClaim(events: unknown[]): Map<string, string> {
  const out = new Map<string, string>();
  for (const e of events as { involvedObject?: { name?: string }; message?: string }[]) {
    const reason = launchingReason(e.message);
    if (e.involvedObject?.name && reason !== undefined) out.set(e.involvedObject.name, reason);
  }
  return out;
}

/** One node, whole, with everything else `explain` reads. */
export async function readLive(nodeName: string): Promise<Inputs> {
  const kube = await connect();
  try {
    const [node, rest] = await Promise.all([
      kube.client.call<NodeObject>('GET', `/api/v1/nodes/${encodeURIComponent(nodeName)}`).catch((err: unknown) => {
        // Say which cluster was asked: a node missing from the wrong one is otherwise a puzzle.
        if (kube.httpStatus(err) === 404)
          throw new Error(
            `node ${JSON.stringify(nodeName)} not found at ${kube.client.server} (${(err as Error).message})`,
            { cause: err },
          );
        throw err;
      }),
      readRest(kube),
    ]);
    return { nodes: [node], ...rest };
  } finally {
    await kube.client.close();
  }
}

/**
 * Everything `report` reads: the rest first, which `start` turns into what takes the nodes; then
 * the nodes, a page at a time (then let go): the recorded ones by their metadata, the on-demand
 * Karpenter ones without a record whole. Other nodes (spot, not Karpenter's) have no place in the
 * report and are not read. `progress` hears the count of nodes read after each page.
 */
export async function readLiveNodes(
  keys: RecordKeys,
  start: (rest: Omit<Inputs, 'nodes'>) => (node: NodeObject) => void,
  progress: (nodes: number) => void = () => {},
): Promise<void> {
  const kube = await connect();
  const { PARTIAL_METADATA_LIST } = await import('../kube/watch-stream.ts');
  try {
    const onNode = start(await readRest(kube));
    let read = 0;
    const each = (node: unknown) => {
      onNode(node as NodeObject);
      if (++read % 500 === 0) progress(read);
    };
    await eachItem(kube, '/api/v1/nodes', each, { accept: PARTIAL_METADATA_LIST, labelSelector: keys.influenced });
    await eachItem(kube, '/api/v1/nodes', each, { labelSelector: undecidedSelector(keys) });
    progress(read);
  } finally {
    await kube.client.close();
  }
}

// What `explain` and `report` read: files such as `kubectl get ... -o yaml` writes, or the
// cluster itself (read-only).
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import {
  launchingReason,
  toNodeClaimView,
  toNodePoolView,
  type NodeClaimLookup,
  type NodeClaimView,
  type NodeObject,
  type NodePoolObject,
  type NodePoolView,
  type OverlayObject,
} from '../engine/index.ts';
import { NodeClaimIndex, nodeClassZones } from '../state/lookups.ts';

/** Input the user can fix: the CLI exits 2 and names the file. */
export class InputError extends Error {}

export interface InputFiles {
  nodesFile?: string;
  overlaysFile?: string;
  nodeClaimsFile?: string;
  nodePoolsFile?: string;
  nodeClassesFile?: string;
}

export interface Inputs {
  nodes: NodeObject[];
  overlays: OverlayObject[];
  nodeClaims: NodeClaimView[];
  /** Empty when not given: every node is then judged on its labels (basis approximate). */
  nodePools: NodePoolView[];
  /** EC2NodeClasses by name: the zones of their subnets, for those whose subnets are resolved (none when not given or not served). */
  nodeClassZones: Map<string, ReadonlySet<string>>;
  /** Karpenter's DisruptionLaunching Events by NodeClaim, their reason (live only, where they can be read). */
  launching?: Map<string, string>;
}

/**
 * Only the NodeClasses whose zones are known, as the watcher's cache answers: one whose subnets
 * are not resolved yet says nothing about its zones (the NodeClaim's own, if any, stand), not
 * that it launches into none.
 */
function zonesByNodeClass(objects: readonly unknown[]): Map<string, ReadonlySet<string>> {
  return new Map(
    objects
      .map(nodeClassZones)
      .filter((c) => c.zones.size > 0)
      .map((c) => [c.name, c.zones]),
  );
}

function asObjects(value: unknown): Record<string, unknown>[] {
  if (!value || typeof value !== 'object') return [];
  const v = value as Record<string, unknown>;
  return Array.isArray(v.items) ? (v.items as Record<string, unknown>[]) : [v];
}

/** JSON (what `kubectl -o json` writes) is YAML too, but JSON.parse reads it in milliseconds where the YAML parser takes seconds. */
function parseJson(text: string): unknown {
  if (!/^\s*[{[]/.test(text)) return undefined;
  try {
    return JSON.parse(text) as unknown;
  } catch {
    return undefined;
  }
}

/** Objects from JSON or YAML: one object, a List, or several documents; each of `kind` when it says. */
export function readObjects(file: string, kind?: string): Record<string, unknown>[] {
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (err) {
    throw new InputError(`${file}: cannot be read (${(err as NodeJS.ErrnoException).code ?? (err as Error).message})`);
  }
  const json = parseJson(text);
  const out: Record<string, unknown>[] = [];
  if (json !== undefined) out.push(...asObjects(json));
  else {
    // yaml (about 25 ms to load) only for a file that is not JSON.
    const { parseAllDocuments } = createRequire(import.meta.url)('yaml') as typeof import('yaml');
    for (const doc of parseAllDocuments(text)) {
      if (doc.errors.length > 0) throw new InputError(`${file}: ${doc.errors[0]?.message.split('\n')[0]}`);
      out.push(...asObjects(doc.toJSON()));
    }
  }
  const wrong = kind === undefined ? -1 : out.findIndex((o) => o.kind !== undefined && o.kind !== kind);
  if (wrong !== -1) throw new InputError(`${file}: item ${wrong + 1} is a ${String(out[wrong]?.kind)}, not a ${kind}`);
  return out;
}

export function readInputFiles(files: InputFiles): Inputs {
  return {
    nodes: readObjects(files.nodesFile ?? '', 'Node') as NodeObject[],
    overlays: readObjects(files.overlaysFile ?? '', 'NodeOverlay') as OverlayObject[],
    nodeClaims: files.nodeClaimsFile
      ? readObjects(files.nodeClaimsFile, 'NodeClaim').map((c) => toNodeClaimView(c))
      : [],
    nodePools: files.nodePoolsFile
      ? readObjects(files.nodePoolsFile, 'NodePool').map((p) => toNodePoolView(p as NodePoolObject))
      : [],
    nodeClassZones: zonesByNodeClass(files.nodeClassesFile ? readObjects(files.nodeClassesFile, 'EC2NodeClass') : []),
  };
}

/** NodeClaims found as the watcher finds them. */
export function claimLookup(claims: Iterable<NodeClaimView>): NodeClaimLookup {
  return NodeClaimIndex.of(claims);
}

/**
 * From the cluster `serve` would talk to, found in serve's order and with its refusals
 * (KUBECONFIG, else the pod's ServiceAccount, else ~/.kube/config): one node, or every node a
 * page at a time, with every overlay, NodePool and NodeClaim, and the EC2NodeClasses' zones.
 */
function launchingByNodeClaim(events: unknown[]): Map<string, string> {
  const out = new Map<string, string>();
  for (const e of events as { involvedObject?: { name?: string }; message?: string }[]) {
    const reason = launchingReason(e.message);
    if (e.involvedObject?.name && reason !== undefined) out.set(e.involvedObject.name, reason);
  }
  return out;
}

export async function readLive(nodeName?: string): Promise<Inputs> {
  // Only commands that talk to a cluster load the HTTP client.
  const [
    { KubeClient },
    { loadClusterAccess },
    { listAll },
    { httpStatus },
    { OVERLAYS_PATH, NODEPOOLS_PATH, NODECLAIMS_PATH },
    { EC2_NODECLASSES_PATH },
    { LAUNCHING_EVENTS_PATH, LAUNCHING_EVENTS_SELECTOR },
  ] = await Promise.all([
    import('../kube/client.ts'),
    import('../kube/kubeconfig.ts'),
    import('../kube/list.ts'),
    import('../kube/failures.ts'),
    import('../state/caches.ts'),
    import('../state/launch-caches.ts'),
    import('../state/disruption-evidence.ts'),
  ]);
  const client = new KubeClient(loadClusterAccess());
  const all = (path: string) => listAll(client, path);
  const node = (name: string) =>
    client.call<NodeObject>('GET', `/api/v1/nodes/${encodeURIComponent(name)}`).catch((err: unknown) => {
      // Say which cluster was asked: a node missing from the wrong one is otherwise a puzzle.
      if (httpStatus(err) === 404)
        throw new Error(`node ${JSON.stringify(name)} not found at ${client.server} (${(err as Error).message})`, {
          cause: err,
        });
      throw err;
    });
  try {
    const [nodes, overlays, pools, claims, classes, launching] = await Promise.all([
      nodeName ? node(nodeName).then((n) => [n]) : all('/api/v1/nodes'),
      all(OVERLAYS_PATH),
      all(NODEPOOLS_PATH),
      all(NODECLAIMS_PATH),
      // Served only where Karpenter's AWS provider is installed; readable only with the chart's rights.
      all(EC2_NODECLASSES_PATH).catch((err: unknown) => {
        const code = httpStatus(err);
        if (code === 404 || code === 403) return [];
        throw err;
      }),
      // Which NodeClaims Karpenter's disruption launched; without the right, the records tell.
      listAll(client, LAUNCHING_EVENTS_PATH, { fieldSelector: LAUNCHING_EVENTS_SELECTOR }).catch((err: unknown) => {
        if (httpStatus(err) === 403) return [];
        throw err;
      }),
    ]);
    return {
      nodes: nodes as NodeObject[],
      overlays: overlays as OverlayObject[],
      nodePools: pools.map((p) => toNodePoolView(p as NodePoolObject)),
      nodeClaims: claims.map((c) => toNodeClaimView(c as Parameters<typeof toNodeClaimView>[0])),
      nodeClassZones: zonesByNodeClass(classes),
      launching: launchingByNodeClaim(launching),
    };
  } finally {
    await client.close();
  }
}

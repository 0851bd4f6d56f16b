// What `explain` and `report` read: files such as `kubectl get ... -o yaml` writes, or the
// cluster itself (read-only).
import { readFileSync } from 'node:fs';
import { parseAllDocuments } from 'yaml';
import {
  countGroups, toNodeClaimView, toNodePoolView, type NodeClaimLookup, type NodeClaimView, type NodeObject, type NodePoolObject, type NodePoolView, type OverlayObject,
} from '../engine/index.ts';

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
  /** EC2NodeClasses by name: the zones of their subnets (empty when not given or not served). */
  nodeClassZones: Map<string, Set<string>>;
}

interface Ec2NodeClassObject {
  metadata?: { name?: string };
  status?: { subnets?: { zone?: string }[] | null } | null;
}

function zonesByNodeClass(objects: readonly Record<string, unknown>[]): Map<string, Set<string>> {
  return new Map((objects as readonly Ec2NodeClassObject[]).map((o) => [o.metadata?.name ?? '', new Set((o.status?.subnets ?? []).flatMap((s) => (s.zone ? [s.zone] : [])))]));
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
    nodeClaims: files.nodeClaimsFile ? readObjects(files.nodeClaimsFile, 'NodeClaim').map((c) => toNodeClaimView(c)) : [],
    nodePools: files.nodePoolsFile ? readObjects(files.nodePoolsFile, 'NodePool').map((p) => toNodePoolView(p as NodePoolObject)) : [],
    nodeClassZones: zonesByNodeClass(files.nodeClassesFile ? readObjects(files.nodeClassesFile, 'EC2NodeClass') : []),
  };
}

export function claimLookup(claims: NodeClaimView[]): NodeClaimLookup {
  const byProviderID = new Map(claims.filter((c) => c.providerID).map((c) => [c.providerID, c]));
  const byName = new Map(claims.map((c) => [c.name, c]));
  return { byProviderID: (id: string) => byProviderID.get(id), byName: (name: string) => byName.get(name), groups: countGroups(claims) };
}

/** From the cluster (KUBECONFIG): one node, or every node a page at a time, with every overlay, NodePool and NodeClaim. */
export async function readLive(nodeName?: string): Promise<Inputs> {
  // Only commands that talk to a cluster load the Kubernetes client (slow to load).
  const k8s = await import('@kubernetes/client-node');
  const kc = new k8s.KubeConfig();
  kc.loadFromDefault();
  const core = kc.makeApiClient(k8s.CoreV1Api);
  const custom = kc.makeApiClient(k8s.CustomObjectsApi);
  const list = async (version: string, plural: string) =>
    ((await custom.listClusterCustomObject({ group: 'karpenter.sh', version, plural })) as { items: Record<string, unknown>[] }).items;
  const allNodes = async () => {
    const nodes: NodeObject[] = [];
    let token: string | undefined;
    do {
      const page = await core.listNode({ limit: 500, ...(token ? { _continue: token } : {}) });
      nodes.push(...(page.items as NodeObject[]));
      token = page.metadata?._continue || undefined;
    } while (token);
    return nodes;
  };
  // Served only where Karpenter's AWS provider is installed; readable only with the chart's rights.
  const nodeClasses = custom.listClusterCustomObject({ group: 'karpenter.k8s.aws', version: 'v1', plural: 'ec2nodeclasses' })
    .then((l) => (l as { items: Record<string, unknown>[] }).items, () => []);
  const [nodes, overlays, pools, claims, classes] = await Promise.all([
    nodeName ? core.readNode({ name: nodeName }).then((n) => [n as NodeObject]) : allNodes(),
    list('v1alpha1', 'nodeoverlays'),
    list('v1', 'nodepools'),
    list('v1', 'nodeclaims'),
    nodeClasses,
  ]);
  return {
    nodes,
    overlays: overlays as OverlayObject[],
    nodePools: pools.map((p) => toNodePoolView(p as NodePoolObject)),
    nodeClaims: claims.map((c) => toNodeClaimView(c)),
    nodeClassZones: zonesByNodeClass(classes),
  };
}

// `veneer-node-watcher explain`: why a node got (or would get) its record, from files such as
// `kubectl get nodes -o yaml` writes, or live from the cluster.
import { readFileSync } from 'node:fs';
import { parseAllDocuments } from 'yaml';
import type { Config } from './config/load.ts';
import {
  explainer, nodeClaimFor, parseSelector, recordKeys, toNodeClaimView, toNodeView, toOverlayView,
  type Explanation, type NodeClaimView, type NodeObject, type OverlayObject,
} from './engine/index.ts';

export interface ExplainArgs {
  nodeName?: string;
  nodesFile?: string;
  overlaysFile?: string;
  nodeClaimsFile?: string;
  at?: string;
  output: 'json' | 'table';
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

/** Objects from JSON or YAML: one object, a List, or several documents. */
export function readObjects(file: string): Record<string, unknown>[] {
  const text = readFileSync(file, 'utf8');
  const json = parseJson(text);
  if (json !== undefined) return asObjects(json);
  const out: Record<string, unknown>[] = [];
  for (const doc of parseAllDocuments(text)) {
    if (doc.errors.length > 0) throw new Error(`${file}: ${doc.errors[0]?.message.split('\n')[0]}`);
    out.push(...asObjects(doc.toJSON()));
  }
  return out;
}

function lookup(claims: NodeClaimView[]) {
  const byProviderID = new Map(claims.filter((c) => c.providerID).map((c) => [c.providerID, c]));
  const byName = new Map(claims.map((c) => [c.name, c]));
  return { byProviderID: (id: string) => byProviderID.get(id), byName: (name: string) => byName.get(name) };
}

interface Inputs {
  nodes: NodeObject[];
  overlays: OverlayObject[];
  nodeClaims: NodeClaimView[];
}

async function liveInputs(nodeName: string): Promise<Inputs> {
  // Only a live explain needs the Kubernetes client (slow to load).
  const k8s = await import('@kubernetes/client-node');
  const kc = new k8s.KubeConfig();
  kc.loadFromDefault();
  const core = kc.makeApiClient(k8s.CoreV1Api);
  const custom = kc.makeApiClient(k8s.CustomObjectsApi);
  const list = async (version: string, plural: string) =>
    ((await custom.listClusterCustomObject({ group: 'karpenter.sh', version, plural })) as { items: Record<string, unknown>[] }).items;
  const [node, overlays, claims] = await Promise.all([core.readNode({ name: nodeName }), list('v1alpha1', 'nodeoverlays'), list('v1', 'nodeclaims')]);
  return { nodes: [node as NodeObject], overlays: overlays as OverlayObject[], nodeClaims: claims.map((c) => toNodeClaimView(c)) };
}

export async function runExplain(args: ExplainArgs, config: Config, now = Date.now()): Promise<string> {
  const at = args.at !== undefined ? Date.parse(args.at) : now;
  if (Number.isNaN(at)) throw new Error(`--at ${JSON.stringify(args.at)} is not a time (use RFC 3339, e.g. 2026-01-12T15:30:00Z)`);
  let inputs: Inputs;
  if (args.nodeName) inputs = await liveInputs(args.nodeName);
  else {
    inputs = {
      nodes: readObjects(args.nodesFile ?? '') as NodeObject[],
      overlays: readObjects(args.overlaysFile ?? '') as OverlayObject[],
      nodeClaims: args.nodeClaimsFile ? readObjects(args.nodeClaimsFile).map((c) => toNodeClaimView(c)) : [],
    };
  }
  const settings = { keys: recordKeys(config.labelNamespace), gracePeriodMs: config.gracePeriodMs };
  const policy = { selector: parseSelector(config.overlaySelector), requireOverlayReady: config.requireOverlayReady };
  const overlays = inputs.overlays.map((o) => toOverlayView(o));
  const claims = lookup(inputs.nodeClaims);
  const explain = explainer(overlays, { now: at, knownSince: at }, settings, policy);
  const results = inputs.nodes.map((n) => {
    const node = toNodeView(n);
    return explain(node, nodeClaimFor(node, claims));
  });
  // Compact JSON: indenting tens of megabytes (200 nodes, each against every overlay) took a third of the run; jq indents.
  return args.output === 'json' ? JSON.stringify(results) : results.map(table).join('\n\n');
}

function requirementText(r: { key: string; operator: string; values: readonly string[]; gte?: string; lte?: string }): string {
  const bounds = [r.gte !== undefined ? ` >=${r.gte}` : '', r.lte !== undefined ? ` <=${r.lte}` : ''].join('');
  return `${r.key} ${r.operator}${r.values.length ? ` [${r.values.join(', ')}]` : ''}${bounds}`;
}

function table(e: Explanation): string {
  const head = e.outcome === 'influenced'
    ? `${e.node}: influenced by ${e.overlay} (launch ${e.evaluatedAt}, basis ${e.basis})`
    : e.outcome === 'not-influenced'
      ? `${e.node}: not influenced: no active overlay matched (launch ${e.evaluatedAt}, basis ${e.basis})`
      : `${e.node}: ${e.outcome}: ${e.reason}`;
  const lines = [head];
  if (e.existingRecord) lines.push(`  existing record: ${Object.entries(e.existingRecord).map(([k, v]) => `${k}=${v}`).join(' ')}`);
  if (Object.keys(e.labels).length > 0) lines.push(`  labels: ${Object.entries(e.labels).map(([k, v]) => `${k}=${v}`).join(' ')}`);
  for (const o of e.overlays) {
    const state = o.winner ? 'WINS' : !o.active ? `inactive: ${o.inactiveReason}` : o.matched ? 'matches (outranked)' : 'no match';
    lines.push(`  - ${o.name} (weight ${o.weight}): ${state}`);
    for (const r of o.requirements) {
      lines.push(`      ${r.pass ? 'pass' : 'FAIL'}  ${requirementText(r)}  node: ${r.nodeValue === null ? '(missing)' : JSON.stringify(r.nodeValue)}`);
      // Say what was written when Karpenter compares something else: several requirements
      // on one key, or a deprecated key.
      const [only] = r.from;
      if (r.from.length > 1 || (only && only.key !== r.key)) {
        lines.push(`            from: ${r.from.map((f) => requirementText({ key: f.key, operator: f.operator, values: f.values ?? [] })).join('; ')}`);
      }
    }
  }
  return lines.join('\n');
}

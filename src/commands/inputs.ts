// What `explain` and `report` read: files such as `kubectl get ... -o yaml` writes, or the
// cluster itself (read-only).
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import {
  type ApprovalSeen,
  type CandidateSeen,
  toNodeClaimView,
  toNodePoolView,
  type NodeClaimLookup,
  type NodeClaimView,
  type NodeClassSizing,
  type NodeObject,
  type NodePoolObject,
  type NodePoolView,
  type OverlayObject,
} from '../engine/index.ts';
import { NodeClaimIndex, nodeClassFacts } from '../state/lookups.ts';

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
  /** EC2NodeClasses by name: their AMI family and kubelet settings (the pods' fit). */
  nodeClassSizing: Map<string, NodeClassSizing>;
  /** Karpenter's DisruptionLaunching Events by NodeClaim, their reason (live only, where they can be read). */
  launching?: Map<string, string>;
  /** Karpenter's ConsolidationCandidate and ConsolidationApproved Events (live only, where they can be read). */
  candidates?: CandidateSeen[];
  approvals?: ApprovalSeen[];
}

/**
 * Each NodeClass's sizing, and the zones of only those whose zones are known, as the watcher's
 * cache answers: one whose subnets are not resolved yet says nothing about its zones (the
 * NodeClaim's own, if any, stand), not that it launches into none.
 */
export function nodeClassesOf(objects: readonly unknown[]): Pick<Inputs, 'nodeClassZones' | 'nodeClassSizing'> {
  const facts = objects.map(nodeClassFacts);
  return {
    nodeClassZones: new Map(facts.filter((c) => c.zones.size > 0).map((c) => [c.name, c.zones])),
    nodeClassSizing: new Map(facts.map((c) => [c.name, c.sizing])),
  };
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
    ...nodeClassesOf(files.nodeClassesFile ? readObjects(files.nodeClassesFile, 'EC2NodeClass') : []),
  };
}

/** NodeClaims found as the watcher finds them. */
export function claimLookup(claims: Iterable<NodeClaimView>): NodeClaimLookup {
  return NodeClaimIndex.of(claims);
}

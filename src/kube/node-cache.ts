// Nodes, paid for by what each one can still change.
//
// Kubelets patch node status all the time, and an EKS node is ~20 KB as served. The watcher
// needs a whole node only while it may still be recorded: an on-demand Karpenter node without
// a record, whose spec.providerID links it to its NodeClaim. Those come from a full-object watch
// that the apiserver filters by label (`undecided`); a node that gains its record leaves it (the
// apiserver sends DELETED), and one whose record a break-glass identity removed comes back.
// Every other node is known by its metadata alone (`all`: names for the webhook, labels for
// the gauges), and a metadata event whose labels did not change is skipped without parsing
// the object: that is every status heartbeat.
import type { NodeView } from '../engine/index.ts';
import { CAPACITY_TYPE_LABEL, NODEPOOL_LABEL } from '../engine/decide.ts';
import { toNodeView, type NodeObject } from '../engine/node.ts';
import { parseEvent, type ListPage, type ParsedEvent, Reflector } from './reflector.ts';
import type { CacheDeps } from './caches.ts';
import { getJson, PARTIAL_METADATA_LIST, PARTIAL_METADATA } from './watch-stream.ts';
import { API_CALL_TIMEOUT_MS } from './call-options.ts';

const PAGE = 500;

export type NodeListener = (node: NodeView, kind: 'upsert' | 'remove') => void;

/** The label selector of nodes that may still need a record: Karpenter's, not spot or reserved, without one. */
export function undecidedSelector(influencedLabel: string): string {
  return `${NODEPOOL_LABEL},${CAPACITY_TYPE_LABEL} notin (spot,reserved),!${influencedLabel}`;
}

interface ListBody {
  metadata?: { resourceVersion?: string; continue?: string };
  items?: unknown[];
}

function lister(deps: CacheDeps, accept: string, labelSelector?: string) {
  return async (token: string | undefined): Promise<ListPage> => {
    const body = await getJson<ListBody>(deps.kc, {
      path: '/api/v1/nodes',
      query: { limit: PAGE, continue: token, labelSelector },
      accept,
      signal: AbortSignal.timeout(API_CALL_TIMEOUT_MS),
    });
    return { items: body.items ?? [], resourceVersion: body.metadata?.resourceVersion ?? '', continueToken: body.metadata?.continue || undefined };
  };
}

function between(line: string, open: string, close: string, from = 0): { value: string; end: number } | undefined {
  const i = line.indexOf(open, from);
  if (i === -1) return undefined;
  const j = line.indexOf(close, i + open.length);
  return j === -1 ? undefined : { value: line.slice(i + open.length, j), end: j };
}

/**
 * Reads a MODIFIED metadata event just far enough to tell whether the node's labels changed.
 * Safe to read by position: Go encodes ObjectMeta in field order (name, uid, resourceVersion,
 * ..., labels, annotations, ..., managedFields), and names, resourceVersions, label keys and
 * label values can hold neither quotes nor braces.
 */
export function unchangedLabels(line: string, known: (name: string) => NodeView | undefined): ParsedEvent | undefined {
  if (!line.startsWith('{"type":"MODIFIED"')) return undefined;
  const name = between(line, '"name":"', '"');
  const rv = between(line, '"resourceVersion":"', '"');
  const labels = between(line, '"labels":{', '}');
  if (!name || !rv || !labels) return undefined;
  const annotations = line.indexOf('"annotations":');
  const managed = line.indexOf('"managedFields":');
  if ((annotations !== -1 && annotations < labels.end) || (managed !== -1 && managed < labels.end)) return undefined;
  const view = known(name.value);
  if (!view) return undefined;
  const now = JSON.parse(`{${labels.value}}`) as Record<string, string>;
  const before = view.labels;
  let count = 0;
  for (const key in now) {
    if (before[key] !== now[key]) return undefined;
    count++;
  }
  return count === Object.keys(before).length ? { type: 'MODIFIED', resourceVersion: rv.value } : undefined;
}

export class NodeCache {
  /** Every node, metadata only. */
  readonly all: Reflector<NodeView>;
  /** On-demand Karpenter nodes without a record, whole. */
  readonly undecided: Reflector<NodeView>;
  private readonly listeners: NodeListener[] = [];

  constructor(deps: CacheDeps, influencedLabel: string) {
    const common = {
      kc: deps.kc,
      watchPath: '/api/v1/nodes',
      keyOf: (obj: unknown) => (obj as NodeObject).metadata?.name ?? '',
      slim: (obj: unknown) => toNodeView(obj as NodeObject),
      metrics: deps.metrics,
      log: deps.log,
      now: deps.now,
      ...(deps.watchdogMs ? { watchdogMs: deps.watchdogMs } : {}),
    };
    this.all = new Reflector({
      ...common,
      resource: 'nodes',
      accept: PARTIAL_METADATA,
      listPage: lister(deps, PARTIAL_METADATA_LIST),
      parseEvent: (line) => unchangedLabels(line, (name) => this.all.store.get(name)) ?? parseEvent(line),
      handlers: { upsert: () => {}, remove: () => {} },
    });
    const selector = undecidedSelector(influencedLabel);
    this.undecided = new Reflector({
      ...common,
      resource: 'undecided-nodes',
      labelSelector: selector,
      listPage: lister(deps, 'application/json', selector),
      handlers: {
        upsert: (node) => this.listeners.forEach((l) => l(node, 'upsert')),
        remove: (node) => this.listeners.forEach((l) => l(node, 'remove')),
      },
    });
  }

  /** The whole view while the node may need a record, else its metadata. */
  get(name: string): NodeView | undefined {
    return this.undecided.store.get(name) ?? this.all.store.get(name);
  }

  /** Undecided nodes as they come and go. */
  subscribe(listener: NodeListener): void {
    this.listeners.push(listener);
  }

  /** Every node, metadata only. */
  nodes(): IterableIterator<NodeView> {
    return this.all.store.values();
  }

  undecidedNodes(): IterableIterator<NodeView> {
    return this.undecided.store.values();
  }
}

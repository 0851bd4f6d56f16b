// Nodes, paid for by what each one can still change.
//
// Kubelets patch node status all the time, and an EKS node is ~20 KB as served. The watcher
// needs a whole node only while it may still be recorded: an on-demand Karpenter node without
// a record, whose spec.providerID links it to its NodeClaim. Those come from a full-object watch
// that the apiserver filters by label (`undecided`); a node that gains its record leaves it (the
// apiserver sends DELETED), and one whose record a break-glass identity removed comes back.
// Every node is known by its metadata (`all`), kept as a decided node (engine/decided-node.ts: the
// record's labels and a few well-known ones, a few hundred bytes however large the node), and a
// metadata event whose labels did not change is skipped without parsing the object: that is
// every status heartbeat. Listeners of a label change still see every label of the node.
import { crc32 } from 'node:zlib';
import {
  decidedNodeLabelKeys,
  toDecidedNodeView,
  toNodeView,
  undecidedSelector,
  type NodeObject,
  type NodeView,
  type RecordKeys,
} from '../engine/index.ts';
import { type CacheDeps, cacheReflector } from '../kube/cache-reflector.ts';
import type { Reflector } from '../kube/reflector.ts';
import { PARTIAL_METADATA, PARTIAL_METADATA_LIST, parseEvent, type ParsedEvent } from '../kube/watch-stream.ts';

type NodeListener = (node: NodeView, kind: 'upsert' | 'remove') => void;

const NODES_PATH = '/api/v1/nodes';
const MODIFIED = Buffer.from('{"type":"MODIFIED"');
const NAME = Buffer.from('"name":"');
const RESOURCE_VERSION = Buffer.from('"resourceVersion":"');
const LABELS = Buffer.from('"labels":{');
const ANNOTATIONS = Buffer.from('"annotations":');
const MANAGED_FIELDS = Buffer.from('"managedFields":');
const QUOTE = 0x22;
const CLOSE_BRACE = 0x7d;

/** The string value after `key`, read from a metadata event's bytes. */
function stringAfter(line: Buffer, key: Buffer): string | undefined {
  const i = line.indexOf(key);
  const j = i === -1 ? -1 : line.indexOf(QUOTE, i + key.length);
  return j === -1 ? undefined : line.toString('latin1', i + key.length, j);
}

/** Where the name, the resourceVersion and the labels object are in a metadata event's bytes. */
function locate(line: Buffer): { name: string; resourceVersion: string; labels: Buffer } | undefined {
  const name = stringAfter(line, NAME);
  const resourceVersion = stringAfter(line, RESOURCE_VERSION);
  const l = line.indexOf(LABELS);
  const end = l === -1 ? -1 : line.indexOf(CLOSE_BRACE, l);
  if (!name || !resourceVersion || end === -1) return undefined;
  // Labels come before annotations and managedFields: only the few bytes before them are searched
  // (a label holds no quote, so neither key can be inside the labels).
  const before = line.subarray(0, l);
  if (before.indexOf(ANNOTATIONS) !== -1 || before.indexOf(MANAGED_FIELDS) !== -1) return undefined;
  return { name, resourceVersion, labels: line.subarray(l, end + 1) };
}

/**
 * How long a fingerprint is trusted before the node's next event is decoded anyway: a checksum
 * can be made to collide, and this bounds how long such a change goes unseen. Each node is then
 * decoded once more: of the twelve heartbeats an hour of a kubelet that reports every 5 minutes,
 * one is decoded instead of none. Every 10 minutes it would be six, half of what skipping saves.
 */
export const FINGERPRINT_TRUST_MS = 60 * 60_000;

/**
 * Skips metadata events that cannot change a node's labels, without decoding them. Safe to read
 * by position: Go encodes ObjectMeta in field order (name, uid, resourceVersion, ..., labels,
 * annotations, ..., managedFields), and names, resourceVersions, label keys and label values
 * hold neither quotes nor braces. A node's labels are known by the CRC-32 and the length of their
 * bytes, taken whenever its event is decoded, under the decoded name (the store's own string, so
 * the map holds no second copy of it); after a relist every node is decoded once again.
 *
 * A CRC, not a cryptographic hash: side by side under heartbeats, SHA-1 cost 5-8 µs more per event
 * (docs/tuning.md, "CPU per heartbeat"). By chance two label sets of one length share a CRC once
 * in 4 billion changes; on purpose, only one who may write the node's labels anyway can make
 * them collide, and every fingerprint is dropped after FINGERPRINT_TRUST_MS, so a change that
 * collides is seen within that time.
 */
export class LabelSkipper {
  private readonly seen = new Map<string, number>();
  private readonly now: () => number;
  private trustedSince: number;

  constructor(now: () => number = Date.now) {
    this.now = now;
    this.trustedSince = now();
  }

  parse(line: Buffer): ParsedEvent {
    if (this.now() - this.trustedSince >= FINGERPRINT_TRUST_MS) this.forget();
    const at = locate(line);
    if (!at) {
      // Decoded without a fingerprint: whatever was seen of this node no longer describes it.
      const event = parseEvent(line);
      this.seen.delete((event.object as NodeObject | undefined)?.metadata?.name ?? '');
      return event;
    }
    const fingerprint = crc32(at.labels) + at.labels.length * 2 ** 32;
    if (
      line.compare(MODIFIED, 0, MODIFIED.length, 0, MODIFIED.length) === 0 &&
      this.seen.get(at.name) === fingerprint
    ) {
      return { type: 'MODIFIED', resourceVersion: at.resourceVersion };
    }
    const event = parseEvent(line);
    const name = (event.object as NodeObject | undefined)?.metadata?.name ?? at.name;
    if (event.type === 'DELETED') this.seen.delete(name);
    else this.seen.set(name, fingerprint);
    return event;
  }

  /** The store was replaced by a list, or the fingerprints are due: every node is decoded once again. */
  forget(): void {
    this.seen.clear();
    this.trustedSince = this.now();
  }
}

export class NodeCache {
  /** Every node, as a decided node keeps it. */
  readonly all: Reflector<NodeView>;
  /** On-demand Karpenter nodes without a record, whole. */
  readonly undecided: Reflector<NodeView>;
  private readonly listeners: NodeListener[] = [];
  private readonly metadataListeners: ((node: NodeView) => void)[] = [];
  private readonly removedListeners: ((node: NodeView) => void)[] = [];

  constructor(deps: CacheDeps, keys: RecordKeys) {
    const keyOf = (obj: unknown) => (obj as NodeObject).metadata?.name ?? '';
    const skipper = new LabelSkipper(deps.now);
    const kept = decidedNodeLabelKeys(keys);
    this.all = cacheReflector(deps, NODES_PATH, {
      resource: 'nodes',
      keyOf,
      accept: PARTIAL_METADATA,
      listAccept: PARTIAL_METADATA_LIST,
      slim: (obj: unknown) => toDecidedNodeView(obj as NodeObject, keys, kept),
      parseEvent: (line) => skipper.parse(line),
      handlers: {
        upsert: (node, _at, raw) => {
          if (this.metadataListeners.length === 0) return;
          // The kept view with every label: an instance type's labels are read from its first node.
          const whole = { ...node, labels: (raw as NodeObject | undefined)?.metadata?.labels ?? node.labels };
          for (const l of this.metadataListeners) l(whole);
        },
        remove: (node) => {
          for (const l of this.removedListeners) l(node);
        },
        // Forgotten when a list begins, not when it ends: a streaming list's objects arrive as
        // events the skipper reads, and their labels are the ones to know.
        listing: () => skipper.forget(),
      },
    });
    const selector = undecidedSelector(keys);
    this.undecided = cacheReflector(deps, NODES_PATH, {
      resource: 'undecided-nodes',
      keyOf,
      slim: (obj: unknown) => toNodeView(obj as NodeObject),
      labelSelector: selector,
      handlers: {
        upsert: (node) => {
          for (const l of this.listeners) l(node, 'upsert');
        },
        remove: (node) => {
          for (const l of this.listeners) l(node, 'remove');
        },
      },
    });
  }

  /** The whole view while the node may need a record, else its metadata. */
  get(name: string): NodeView | undefined {
    return this.undecided.store.get(name) ?? this.all.store.get(name);
  }

  /**
   * The node whole, with the resourceVersion a write is guarded by, while it may still need a
   * record; undefined once it has one, is out of scope, or before the watch of such nodes has
   * brought it (its arrival queues it again). Never the metadata view: that keeps no
   * resourceVersion, and may not have heard yet of a record the other watch has.
   */
  undecidedNode(name: string): NodeView | undefined {
    return this.undecided.store.get(name);
  }

  /** Undecided nodes as they come and go. */
  subscribe(listener: NodeListener): void {
    this.listeners.push(listener);
  }

  /** Every node whose labels are new or changed (or listed), with every label it has. */
  onMetadata(listener: (node: NodeView) => void): void {
    this.metadataListeners.push(listener);
  }

  /** Every node deleted (or gone at a relist), as its metadata view last showed it. */
  onRemoved(listener: (node: NodeView) => void): void {
    this.removedListeners.push(listener);
  }

  /** Every node, as a decided node keeps it. */
  nodes(): IterableIterator<NodeView> {
    return this.all.store.values();
  }

  undecidedNodes(): IterableIterator<NodeView> {
    return this.undecided.store.values();
  }
}

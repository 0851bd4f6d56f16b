// Posts one Event on each node whose record it sees written, whoever wrote it (the webhook
// inline, or the reconciler): the leader alone, off the write path, at a bounded rate.
//
// It is fed by the metadata watch of every node, so a record the apiserver never stored (a dry
// run) can never reach it. Dedup has three layers: nodes announced are remembered here; only
// records written within FRESH_MS count, so a restart does not announce the whole cluster again;
// and the Event's name is fixed per node, so the apiserver refuses a second one (409).
import type { Logger } from 'pino';
import { fromBasicTimestamp, type NodeView, type RecordKeys } from '../../engine/index.ts';
import type { KubeClient } from '../../kube/client.ts';
import { httpStatus } from '../../kube/failures.ts';
import type { LeaderRunnable } from '../../kube/manager.ts';
import type { Metrics } from '../../metrics.ts';
import { EVENT_NAMESPACE, nodeEvent, overlayChurnEvent } from './node-event.ts';

/**
 * Records older than this are history, not news. Kept below the apiserver's default --event-ttl
 * (1 h), so that an Event an earlier leader posted still exists when a new one tries again.
 */
export const FRESH_MS = 10 * 60_000;
/** Beyond this many waiting nodes, new ones are dropped (counted): memory stays bounded in any burst. */
export const MAX_PENDING = 10_000;
const ATTEMPTS = 3;

/** Creates an Event where Kubernetes keeps those about cluster-scoped objects. */
export function postEvent(client: KubeClient): (event: Record<string, unknown>) => Promise<void> {
  return async (body) =>
    void (await client.call('POST', `/apis/events.k8s.io/v1/namespaces/${EVENT_NAMESPACE}/events`, { body }));
}

export interface EventRecorderOptions {
  /** Creates the Event; an ApiError with status 409 means it exists already. */
  post: (event: Record<string, unknown>) => Promise<void>;
  /** The nodes the cache holds, read when leadership is gained. */
  known: () => Iterable<NodeView>;
  keys: RecordKeys;
  enabled: boolean;
  ratePerSecond: number;
  /** This replica, as the Events' reportingInstance. */
  instance: string;
  metrics: Metrics;
  log: Logger;
  now?: () => number;
}

interface Pending {
  event: () => Record<string, unknown>;
  /** Set for a record's Event: the node is remembered as announced once it is posted. */
  node?: NodeView;
  attempts: number;
}

export class EventRecorder implements LeaderRunnable {
  readonly name = 'events';
  private readonly o: EventRecorderOptions;
  private readonly now: () => number;
  /** Node key -> when its record was written, while that is fresh. */
  private readonly announced = new Map<string, number>();
  /** Events waiting to be posted: a node's record (`node`), or a churn Event on a NodeOverlay. */
  private readonly pending = new Map<string, Pending>();
  /** The node being posted: its labels may change meanwhile (Karpenter's registration), and a second post would only earn a 409. */
  private posting: string | undefined;
  private leading = false;
  private stopped = false;
  private draining: Promise<void> | undefined;
  private tokens: number;
  private refilledAt: number;

  constructor(opts: EventRecorderOptions) {
    this.o = opts;
    this.now = opts.now ?? Date.now;
    this.tokens = opts.ratePerSecond;
    this.refilledAt = this.now();
  }

  /** A node as the metadata watch shows it now. */
  seen(node: NodeView): void {
    if (!this.o.enabled || !this.leading || this.stopped) return;
    const key = node.uid ?? node.name;
    if (this.announced.has(key) || this.pending.has(key) || this.posting === key) return;
    const writtenAt = this.writtenAt(node);
    if (writtenAt === undefined || this.now() - writtenAt > FRESH_MS) return;
    this.enqueue(key, {
      event: () => nodeEvent(node, this.o.keys, this.o.instance, this.now()),
      node,
      attempts: 0,
    });
  }

  /** A recorded node Karpenter disrupted after the overlay its record names changed or went. */
  churned(
    node: NodeView,
    overlay: { name: string; uid?: string | undefined },
    state: 'changed' | 'gone',
    reason: string,
  ): void {
    if (!this.o.enabled || !this.leading || this.stopped) return;
    this.enqueue(`churn/${node.uid ?? node.name}`, {
      event: () => overlayChurnEvent(node, overlay, state, reason, this.o.instance, this.now()),
      attempts: 0,
    });
  }

  private enqueue(key: string, item: Pending): void {
    if (this.pending.size >= MAX_PENDING) {
      this.o.metrics.events.inc({ result: 'dropped' });
      return;
    }
    this.pending.set(key, item);
    this.draining ??= this.drain().finally(() => (this.draining = undefined));
  }

  /** Leadership gained: the nodes already known may have records no Event tells yet. */
  lead(): void {
    this.leading = true;
    for (const node of this.o.known()) this.seen(node);
  }

  /** Leadership lost: the new leader posts what is still waiting here. */
  follow(): void {
    this.leading = false;
    this.pending.clear();
  }

  async stop(): Promise<void> {
    this.stopped = true;
    this.pending.clear();
    await this.draining;
  }

  private writtenAt(node: NodeView): number | undefined {
    if (node.labels[this.o.keys.influenced] === undefined) return undefined;
    return fromBasicTimestamp(node.labels[this.o.keys.labeledAt]);
  }

  private async drain(): Promise<void> {
    for (let next = this.pending.entries().next(); !next.done; next = this.pending.entries().next()) {
      await this.token();
      if (!this.leading || this.stopped) return;
      const [key, item] = next.value;
      this.pending.delete(key);
      this.posting = key;
      await this.postOne(key, item).finally(() => (this.posting = undefined));
    }
  }

  /** A token bucket holding one second's worth: short bursts go at once, long ones at the rate. */
  private async token(): Promise<void> {
    const rate = this.o.ratePerSecond;
    const now = this.now();
    this.tokens = Math.min(rate, this.tokens + ((now - this.refilledAt) * rate) / 1000);
    this.refilledAt = now;
    if (this.tokens < 1) {
      await new Promise((r) => setTimeout(r, Math.ceil(((1 - this.tokens) * 1000) / rate)));
      this.tokens = 1;
      this.refilledAt = this.now();
    }
    this.tokens -= 1;
  }

  private async postOne(key: string, item: Pending): Promise<void> {
    const { metrics, log } = this.o;
    try {
      await this.o.post(item.event());
      metrics.events.inc({ result: 'created' });
    } catch (err) {
      if (httpStatus(err) !== 409) {
        if (++item.attempts < ATTEMPTS && !this.stopped) this.pending.set(key, item);
        else {
          metrics.events.inc({ result: 'failed' });
          log.warn(
            { status: httpStatus(err), err: (err as Error).message },
            'posting an Event failed; giving up on it',
          );
        }
        return;
      }
      metrics.events.inc({ result: 'exists' });
    }
    if (item.node) this.announce(key, item.node);
  }

  private announce(key: string, node: NodeView): void {
    const now = this.now();
    this.announced.set(key, this.writtenAt(node) ?? now);
    // Entries leave once their record is no longer fresh: seen() would ignore such a node anyway.
    for (const [k, at] of this.announced) {
      if (now - at <= FRESH_MS) break;
      this.announced.delete(k);
    }
  }
}

// What a Reflector is told: where to list and watch, how to read and slim what it gets, whom to
// tell of changes, and where its metrics go (reflector.ts runs it).
import type { Logger } from 'pino';
import type { KubeClient } from './client.ts';
import type { ListPage } from './list.ts';
import type { ParsedEvent } from './watch-stream.ts';

/**
 * What a watch reports, by resource: events applied or skipped, and restarts by reason. The app's
 * metrics satisfy it; the generic layer does not know them.
 */
export interface WatchMetrics {
  /** The counter of one resource and handling, called per event: it must cost no more than an addition. */
  watchEvents: { tally(labels: { resource: string; handling: 'applied' | 'skipped' }): { inc(): void } };
  watchRestarts: { inc(labels: { resource: string; reason: 'error' | 'expired' | 'idle' | 'closed' }): void };
}

export interface ReflectorHandlers<T> {
  /**
   * A new or changed object (ADDED, MODIFIED, or found by a list); `raw`: the object as decoded,
   * slim() made `item` of; `added`: the store did not hold it before.
   */
  upsert(item: T, at: number, raw?: unknown, added?: boolean): void;
  /** An object that went away (DELETED, or missing from a list). */
  remove(item: T, at: number): void;
  /**
   * Before every list, paged or streaming: what was learned from the events before it may no
   * longer hold once the list has replaced them.
   */
  listing?(): void;
  /**
   * After every complete list: the store now mirrors the cluster as of `at`. `gapSince` is set
   * when the watch had broken: changes between then and `at` were seen late, timed at `at`.
   */
  listed?(at: number, gapSince: number | undefined): void;
}

export interface ReflectorOptions<T> {
  /** Resource name for metrics and logs. */
  resource: string;
  client: KubeClient;
  watchPath: string;
  labelSelector?: string;
  /** Narrows the list and the watch on the server (events by their reason, say). */
  fieldSelector?: string;
  /** The Accept header of the list and the watch (metadata-only views ask for less). */
  accept?: string;
  /** Reads one watch line; may leave out the object when it cannot change the store. */
  parseEvent?: (line: Buffer) => ParsedEvent;
  /**
   * Lists through a watch that begins with every object (sendInitialEvents), where the apiserver
   * serves it (WatchList: on by default in Kubernetes 1.32 and from 1.34; off in 1.33 and before
   * 1.32, where it answers 422 and the list is read in pages instead).
   */
  streamingList?: boolean;
  listPage(continueToken: string | undefined): Promise<ListPage>;
  keyOf(obj: unknown): string;
  slim(obj: unknown): T;
  handlers: ReflectorHandlers<T>;
  metrics: WatchMetrics;
  log: Logger;
  now?: () => number;
  relistIntervalMs?: number;
  watchdogMs?: number;
  /**
   * A resource the cluster may not serve (a CRD of one cloud provider's) or the watcher may not be
   * allowed to read: a 404 is said once at info, a 403 once as a warning, the list is tried again
   * every backoffMaxMs (5 minutes by default), and meanwhile the store counts as synced, empty.
   */
  optional?: boolean;
  /** `served` changed (its first value too). Given, a 404's retries are logged at debug: the caller says it. */
  servedChanged?(served: boolean): void;
  backoffInitialMs?: number;
  backoffMaxMs?: number;
}

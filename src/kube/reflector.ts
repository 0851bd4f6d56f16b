// List, then watch from the list's resourceVersion; keep a store of slim objects; survive
// everything a long watch meets: errors (restart with back-off), 410 Gone (relist), silent
// stalls (a watchdog: no event or bookmark for `watchdogMs` restarts the watch from its
// last resourceVersion), periodic
// safety relists, and a stop() that is never mistaken for a failure.
import type { Logger } from 'pino';
import { backoffDelay, sleep } from './backoff.ts';
import type { KubeClient } from './client.ts';
import { httpStatus } from './failures.ts';
import type { ListPage } from './list.ts';
import { parseEvent, type ParsedEvent, streamLines } from './watch-stream.ts';

/**
 * What a watch reports, by resource: events applied or skipped, and restarts by reason. The app's
 * metrics satisfy it; the generic layer does not know them.
 */
export interface WatchMetrics {
  watchEvents: { labels(labels: { resource: string; handling: 'applied' | 'skipped' }): { inc(): void } };
  watchRestarts: { inc(labels: { resource: string; reason: 'error' | 'expired' | 'idle' | 'closed' }): void };
}

export interface ReflectorHandlers<T> {
  /** A new or changed object (ADDED, MODIFIED, or found by a list). */
  upsert(item: T, at: number): void;
  /** An object that went away (DELETED, or missing from a list). */
  remove(item: T, at: number): void;
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

type WatchEnd = 'closed' | 'expired' | 'idle' | 'relist' | 'stopped';

export class Reflector<T> {
  readonly store = new Map<string, T>();
  private readonly o: ReflectorOptions<T>;
  private readonly now: () => number;
  private readonly stopController = new AbortController();
  private currentWatch: AbortController | undefined;
  private lastEventAt: number;
  private syncedResolve: () => void = () => {};
  readonly synced: Promise<void>;
  private hasSynced = false;
  private loop: Promise<void> | undefined;
  private relistDue = false;
  private gapSince: number | undefined;
  private relistTimer: NodeJS.Timeout | undefined;
  private servedNow: boolean | undefined;

  private readonly counted: { applied: { inc(): void }; skipped: { inc(): void } };

  constructor(opts: ReflectorOptions<T>) {
    this.o = opts;
    this.counted = {
      applied: opts.metrics.watchEvents.labels({ resource: opts.resource, handling: 'applied' }),
      skipped: opts.metrics.watchEvents.labels({ resource: opts.resource, handling: 'skipped' }),
    };
    this.now = opts.now ?? Date.now;
    this.lastEventAt = this.now();
    this.synced = new Promise((resolve) => (this.syncedResolve = resolve));
  }

  get isSynced(): boolean {
    return this.hasSynced;
  }

  /** Whether the apiserver serves the resource: undefined until it has answered a list, false after a 404. */
  get served(): boolean | undefined {
    return this.servedNow;
  }

  private setServed(served: boolean): void {
    if (served === this.servedNow) return;
    this.servedNow = served;
    this.o.servedChanged?.(served);
  }

  /** Seconds since the newest list, event or bookmark. */
  lastEventAgeSeconds(): number {
    return (this.now() - this.lastEventAt) / 1000;
  }

  start(): void {
    if (this.loop) return;
    this.loop = this.run();
    if (this.o.relistIntervalMs) {
      this.relistTimer = setInterval(() => {
        this.relistDue = true;
        this.currentWatch?.abort();
      }, this.o.relistIntervalMs);
      this.relistTimer.unref();
    }
  }

  async stop(): Promise<void> {
    clearInterval(this.relistTimer);
    this.stopController.abort();
    this.currentWatch?.abort();
    await this.loop;
  }

  private get stopped(): boolean {
    return this.stopController.signal.aborted;
  }

  private async run(): Promise<void> {
    let failures = 0;
    while (!this.stopped) {
      try {
        const rv = await this.list();
        failures = 0;
        if ((await this.watchFrom(rv)) === 'expired') this.gapSince ??= this.lastEventAt;
      } catch (err) {
        if (this.stopped) break;
        const code = httpStatus(err);
        if (code === 404) this.setServed(false);
        if (this.o.optional && (code === 404 || code === 403)) {
          if (!this.hasSynced) {
            if (code === 404)
              this.o.log.info(
                { resource: this.o.resource },
                'not served by this cluster; looked for again every few minutes',
              );
            else
              this.o.log.warn(
                { resource: this.o.resource },
                'not allowed to list it (403): what needs it stays unknown; asked again every few minutes',
              );
            this.hasSynced = true;
            this.syncedResolve();
          }
          await sleep(this.o.backoffMaxMs ?? 300_000, this.stopController.signal);
          continue;
        }
        if (this.hasSynced) this.gapSince ??= this.lastEventAt;
        const delay = backoffDelay(failures++, this.o.backoffInitialMs ?? 500, this.o.backoffMaxMs ?? 30_000);
        this.o.metrics.watchRestarts.inc({ resource: this.o.resource, reason: 'error' });
        const quiet = code === 404 && this.o.servedChanged !== undefined;
        this.o.log[quiet ? 'debug' : 'warn'](
          { resource: this.o.resource, err: describe(err), retryInMs: delay },
          'list/watch failed; retrying',
        );
        await sleep(delay, this.stopController.signal);
      }
    }
  }

  private async list(): Promise<string> {
    const seen = new Map<string, T>();
    let token: string | undefined;
    let rv = '';
    do {
      const page = await this.o.listPage(token);
      for (const raw of page.items) seen.set(this.o.keyOf(raw), this.o.slim(raw));
      token = page.continueToken;
      rv = page.resourceVersion;
    } while (token);
    const at = this.now();
    for (const [key, item] of this.store) {
      if (!seen.has(key)) {
        this.store.delete(key);
        this.o.handlers.remove(item, at);
      }
    }
    for (const [key, item] of seen) {
      this.store.set(key, item);
      this.o.handlers.upsert(item, at);
    }
    this.lastEventAt = at;
    this.setServed(true);
    this.relistDue = false;
    this.o.handlers.listed?.(at, this.gapSince);
    this.gapSince = undefined;
    if (!this.hasSynced) {
      this.hasSynced = true;
      this.syncedResolve();
    }
    return rv;
  }

  /** Watches until a relist is needed; a watch that merely closes is resumed from its last resourceVersion. */
  private async watchFrom(resourceVersion: string): Promise<'expired' | 'relist' | 'stopped'> {
    let rv = resourceVersion;
    let fruitless = 0;
    for (;;) {
      const { end, lastRV, events } = await this.watchOnce(rv);
      rv = lastRV;
      if (end === 'stopped') return end;
      if (end === 'expired' || end === 'relist') {
        if (end === 'expired') this.o.metrics.watchRestarts.inc({ resource: this.o.resource, reason: 'expired' });
        return end;
      }
      this.o.metrics.watchRestarts.inc({ resource: this.o.resource, reason: end });
      if (end === 'idle')
        this.o.log.debug(
          { resource: this.o.resource },
          'no event or bookmark within the watchdog period; watch restarted',
        );
      // A watch that keeps ending without delivering anything (an ERROR event, an immediate
      // close) is retried with back-off, never in a tight loop against the apiserver.
      fruitless = events > 0 || end === 'idle' ? 0 : fruitless + 1;
      if (fruitless > 0)
        await sleep(
          backoffDelay(fruitless - 1, this.o.backoffInitialMs ?? 500, this.o.backoffMaxMs ?? 30_000),
          this.stopController.signal,
        );
    }
  }

  private async watchOnce(resourceVersion: string): Promise<{ end: WatchEnd; lastRV: string; events: number }> {
    let rv = resourceVersion;
    let expired = false;
    let events = 0;
    const controller = new AbortController();
    this.currentWatch = controller;
    // A relist or a stop may have been asked for while no watch was running.
    if (this.stopped || this.relistDue) controller.abort();
    const query = {
      resourceVersion: rv,
      allowWatchBookmarks: true,
      watch: true,
      // Server-side end of each watch, spread like client-go's so replicas do not reconnect together.
      timeoutSeconds: 300 + Math.floor(Math.random() * 300),
      labelSelector: this.o.labelSelector,
      fieldSelector: this.o.fieldSelector,
    };
    const handle = (line: Buffer) => {
      const event = (this.o.parseEvent ?? parseEvent)(line);
      const at = this.now();
      this.lastEventAt = at;
      switch (event.type) {
        case 'ADDED':
        case 'MODIFIED': {
          // No object: the parser saw nothing that can matter to this store.
          if (event.object === undefined) {
            this.counted.skipped.inc();
            break;
          }
          this.counted.applied.inc();
          const item = this.o.slim(event.object);
          this.store.set(this.o.keyOf(event.object), item);
          this.o.handlers.upsert(item, at);
          break;
        }
        case 'DELETED': {
          this.counted.applied.inc();
          const key = this.o.keyOf(event.object);
          const known = this.store.get(key) ?? this.o.slim(event.object);
          this.store.delete(key);
          this.o.handlers.remove(known, at);
          break;
        }
        case 'ERROR': {
          const status = event.object as { code?: number; message?: string } | undefined;
          if (status?.code === 410) expired = true;
          else this.o.log.warn({ resource: this.o.resource, status: status?.message }, 'watch error event');
          controller.abort();
          return;
        }
      }
      events++;
      if (event.resourceVersion) rv = event.resourceVersion;
    };
    const onLine = (line: Buffer) => {
      try {
        handle(line);
      } catch (err) {
        // A relist repairs whatever this event would have changed.
        this.o.log.error(
          { resource: this.o.resource, err: (err as Error).message },
          'handling a watch event failed; relisting',
        );
        this.relistDue = true;
        controller.abort();
      }
    };
    let failure: unknown;
    try {
      await streamLines(
        this.o.client,
        {
          path: this.o.watchPath,
          query,
          accept: this.o.accept,
          signal: controller.signal,
          inactivityMs: this.o.watchdogMs ?? 2 * 60_000,
        },
        onLine,
      );
    } catch (err) {
      failure = err;
    } finally {
      this.currentWatch = undefined;
    }
    const end = (e: WatchEnd) => ({ end: e, lastRV: rv, events });
    if (this.stopped) return end('stopped');
    if (expired || httpStatus(failure) === 410) return end('expired');
    if (this.relistDue) return end('relist');
    if (isTimeout(failure)) return end('idle');
    if (failure !== undefined && !isAbort(failure)) throw failure;
    return end('closed');
  }
}

function isTimeout(err: unknown): boolean {
  return (err as { name?: string } | null)?.name === 'TimeoutError';
}

function isAbort(err: unknown): boolean {
  return (err as { name?: string } | null)?.name === 'AbortError';
}

function describe(err: unknown): string {
  return (err as { message?: string } | null)?.message || String(err);
}

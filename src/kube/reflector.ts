// List, then watch from the list's resourceVersion; keep a store of slim objects; survive
// everything a long watch meets: errors (restart with back-off), 410 Gone (relist), silent
// stalls (a watchdog: no event or bookmark for `watchdogMs` restarts the watch from its
// last resourceVersion), periodic safety relists, and a stop() that is never mistaken for a
// failure. The list never holds the collection at once: where the apiserver serves streaming
// lists (a watch with sendInitialEvents, the WatchList feature), the watch itself begins with
// every object, one event at a time; elsewhere the list is read a page at a time, each page
// applied and let go before the next is asked for.
import { backoffDelay, sleep } from './backoff.ts';
import { describe, httpStatus, isAbort, isTimeout } from './failures.ts';
import { InitialEvents, STREAMING_LIST_QUERY, StreamingListRefused, streamingListRefused } from './initial-events.ts';
import type { ReflectorOptions } from './reflector-options.ts';
import { type ParsedEvent, parseEvent, streamLines } from './watch-stream.ts';

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
  /** Whether streaming lists are asked for: the option, until the apiserver refuses one. */
  private streaming: boolean;

  private readonly counted: { applied: { inc(): void }; skipped: { inc(): void } };

  constructor(opts: ReflectorOptions<T>) {
    this.o = opts;
    this.counted = {
      applied: opts.metrics.watchEvents.tally({ resource: opts.resource, handling: 'applied' }),
      skipped: opts.metrics.watchEvents.tally({ resource: opts.resource, handling: 'skipped' }),
    };
    this.now = opts.now ?? Date.now;
    this.streaming = opts.streamingList === true;
    this.lastEventAt = this.now();
    this.synced = new Promise((resolve) => (this.syncedResolve = resolve));
  }

  get isSynced(): boolean {
    return this.hasSynced;
  }

  /** Whether it lists by streaming now: asked for, and not refused by the apiserver (Kubernetes 1.30, 1.31 and 1.33 refuse). */
  get listsByStreaming(): boolean {
    return this.streaming;
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
        const end = this.streaming ? await this.watchFrom(undefined) : await this.watchFrom(await this.list());
        failures = 0;
        if (end === 'expired') this.gapSince ??= this.lastEventAt;
      } catch (err) {
        if (this.stopped) break;
        const code = httpStatus(err);
        if (this.streaming && streamingListRefused(err)) {
          this.streaming = false;
          this.o.log.info(
            { resource: this.o.resource, err: describe(err) },
            'streaming lists are not served; listing in pages',
          );
          continue;
        }
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

  /** Lists a page at a time, each page applied to the store before the next is asked for. */
  private async list(): Promise<string> {
    const seen = new Set<string>();
    let token: string | undefined;
    let rv = '';
    this.o.handlers.listing?.();
    do {
      const page = await this.o.listPage(token);
      const at = this.now();
      for (const raw of page.items) this.apply(raw, at, seen);
      token = page.continueToken;
      rv = page.resourceVersion;
    } while (token);
    this.listed(seen);
    return rv;
  }

  private apply(raw: unknown, at: number, seen?: Set<string>): void {
    const key = this.o.keyOf(raw);
    const item = this.o.slim(raw);
    seen?.add(key);
    const added = !this.store.has(key);
    this.store.set(key, item);
    this.o.handlers.upsert(item, at, raw, added);
  }

  /** The store now mirrors the cluster: what the list did not name is gone. */
  private listed(seen: ReadonlySet<string>): void {
    const at = this.now();
    for (const [key, item] of this.store) {
      if (!seen.has(key)) {
        this.store.delete(key);
        this.o.handlers.remove(item, at);
      }
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
  }

  /**
   * Watches until a relist is needed; a watch that merely closes is resumed from its last
   * resourceVersion. Without one (`undefined`), a streaming list: the watch begins with every
   * object, and one that ends before its closing bookmark is a list to start again.
   */
  private async watchFrom(resourceVersion: string | undefined): Promise<'expired' | 'relist' | 'stopped'> {
    let rv = resourceVersion ?? '';
    const initial = resourceVersion === undefined ? new InitialEvents() : undefined;
    if (initial) {
      // A streaming list is the relist asked for.
      this.relistDue = false;
      this.o.handlers.listing?.();
    }
    let fruitless = 0;
    for (;;) {
      const { end, lastRV, events } = await this.watchOnce(rv, initial?.done === false ? initial : undefined);
      rv = lastRV;
      if (end === 'stopped') return end;
      if (initial?.done === false) {
        if (end === 'expired' || end === 'relist') return end;
        throw new Error(`the streaming list ended (${end}) before its last object`);
      }
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

  private async watchOnce(
    resourceVersion: string,
    initial?: InitialEvents,
  ): Promise<{ end: WatchEnd; lastRV: string; events: number }> {
    let rv = resourceVersion;
    let expired = false;
    let events = 0;
    const controller = new AbortController();
    this.currentWatch = controller;
    // A relist or a stop may have been asked for while no watch was running.
    if (this.stopped || this.relistDue) controller.abort();
    let refused: StreamingListRefused | undefined;
    const onLine = (line: Buffer) => {
      try {
        const event = (this.o.parseEvent ?? parseEvent)(line);
        const ended = this.applyEvent(event, initial);
        if (ended !== undefined) {
          expired = ended === 'expired';
          controller.abort();
          return;
        }
        events++;
        if (event.resourceVersion) rv = event.resourceVersion;
      } catch (err) {
        if (err instanceof StreamingListRefused) refused = err;
        else {
          // A relist repairs whatever this event would have changed.
          this.o.log.error(
            { resource: this.o.resource, err: (err as Error).message },
            'handling a watch event failed; relisting',
          );
          this.relistDue = true;
        }
        controller.abort();
      }
    };
    let failure: unknown;
    try {
      await streamLines(
        this.o.client,
        {
          path: this.o.watchPath,
          query: this.watchQuery(rv, initial),
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
    if (refused) throw refused;
    if (expired || httpStatus(failure) === 410) return end('expired');
    if (this.relistDue) return end('relist');
    if (isTimeout(failure)) return end('idle');
    if (failure !== undefined && !isAbort(failure)) throw failure;
    return end('closed');
  }

  private watchQuery(resourceVersion: string, initial: InitialEvents | undefined) {
    return {
      ...(initial ? STREAMING_LIST_QUERY : { resourceVersion }),
      allowWatchBookmarks: true,
      watch: true,
      // Server-side end of each watch, spread like client-go's so replicas do not reconnect together.
      timeoutSeconds: 300 + Math.floor(Math.random() * 300),
      labelSelector: this.o.labelSelector,
      fieldSelector: this.o.fieldSelector,
    };
  }

  /** Applies one watch event to the store; an ERROR event ends the watch: `expired` (410 Gone), else `error`. */
  private applyEvent(event: ParsedEvent, initial: InitialEvents | undefined): 'expired' | 'error' | undefined {
    const at = this.now();
    this.lastEventAt = at;
    switch (event.type) {
      case 'ADDED':
      case 'MODIFIED': {
        // No object: the parser saw nothing that can matter to this store.
        if (event.object === undefined) {
          this.counted.skipped.inc();
          return undefined;
        }
        this.counted.applied.inc();
        this.apply(event.object, at, initial?.seen);
        return undefined;
      }
      case 'BOOKMARK':
        if (initial?.bookmark(event.object)) this.listed(initial.seen);
        return undefined;
      case 'DELETED': {
        this.counted.applied.inc();
        const key = this.o.keyOf(event.object);
        const known = this.store.get(key) ?? this.o.slim(event.object);
        this.store.delete(key);
        this.o.handlers.remove(known, at);
        return undefined;
      }
      case 'ERROR': {
        const status = event.object as { code?: number; message?: string } | undefined;
        if (status?.code === 410) return 'expired';
        this.o.log.warn({ resource: this.o.resource, status: status?.message }, 'watch error event');
        return 'error';
      }
    }
    return undefined;
  }
}

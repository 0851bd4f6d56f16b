// A work queue in the manner of client-go's: one entry per key however often it is added, a
// key never processed twice at once (an add during processing runs it again afterwards),
// at most `concurrency` keys in flight, per-key exponential back-off for failures, delayed adds.
import { backoffDelay } from './backoff.ts';

export type ProcessResult = { kind: 'done' } | { kind: 'retry'; reason: string } | { kind: 'after'; ms: number };

interface WorkQueueOptions {
  concurrency: number;
  process(key: string): Promise<ProcessResult>;
  backoffInitialMs?: number;
  backoffMaxMs?: number;
  onRetry?(reason: string): void;
  onDepth?(depth: number): void;
}

export class WorkQueue {
  private readonly o: WorkQueueOptions;
  private readonly queue: string[] = [];
  private readonly queued = new Set<string>();
  private readonly processing = new Set<string>();
  private readonly dirty = new Set<string>();
  private readonly timers = new Map<string, { at: number; timer: NodeJS.Timeout }>();
  private readonly failures = new Map<string, number>();
  private running = false;
  private idleWaiters: (() => void)[] = [];

  constructor(opts: WorkQueueOptions) {
    this.o = opts;
  }

  add(key: string): void {
    if (this.processing.has(key)) {
      this.dirty.add(key);
      return;
    }
    if (this.queued.has(key)) return;
    this.queued.add(key);
    this.queue.push(key);
    this.o.onDepth?.(this.queue.length);
    this.pump();
  }

  /** Adds `key` after `ms`; an earlier pending delay for the same key wins. */
  addAfter(key: string, ms: number): void {
    if (ms <= 0) {
      this.add(key);
      return;
    }
    const at = Date.now() + ms;
    const pending = this.timers.get(key);
    if (pending && pending.at <= at) return;
    if (pending) clearTimeout(pending.timer);
    const timer = setTimeout(() => {
      this.timers.delete(key);
      this.add(key);
    }, ms);
    timer.unref();
    this.timers.set(key, { at, timer });
  }

  get depth(): number {
    return this.queue.length;
  }

  get inFlight(): number {
    return this.processing.size;
  }

  /** Starts (or resumes) processing. */
  start(): void {
    this.running = true;
    this.pump();
  }

  /** Stops taking new keys; keys already in flight finish. Queued keys stay queued. */
  async pause(): Promise<void> {
    this.running = false;
    await this.drained();
  }

  async stop(): Promise<void> {
    for (const { timer } of this.timers.values()) clearTimeout(timer);
    this.timers.clear();
    await this.pause();
  }

  /** Resolves when nothing is in flight. */
  private drained(): Promise<void> {
    if (this.processing.size === 0) return Promise.resolve();
    return new Promise((resolve) => this.idleWaiters.push(resolve));
  }

  private pump(): void {
    while (this.running && this.processing.size < this.o.concurrency && this.queue.length > 0) {
      const key = this.queue.shift()!;
      this.queued.delete(key);
      this.processing.add(key);
      this.o.onDepth?.(this.queue.length);
      void this.run(key);
    }
  }

  private async run(key: string): Promise<void> {
    let result: ProcessResult;
    try {
      result = await this.o.process(key);
    } catch (err) {
      result = { kind: 'retry', reason: (err as Error).message };
    }
    this.processing.delete(key);
    if (result.kind === 'retry') {
      // The back-off timer re-adds the key; an add that arrived meanwhile must not skip it.
      this.dirty.delete(key);
      const attempt = this.failures.get(key) ?? 0;
      this.failures.set(key, attempt + 1);
      this.o.onRetry?.(result.reason);
      this.addAfter(key, backoffDelay(attempt, this.o.backoffInitialMs ?? 200, this.o.backoffMaxMs ?? 60_000));
    } else {
      this.failures.delete(key);
      if (result.kind === 'after') this.addAfter(key, result.ms);
    }
    if (this.dirty.delete(key)) this.add(key);
    if (this.processing.size === 0) for (const w of this.idleWaiters.splice(0)) w();
    this.pump();
  }
}

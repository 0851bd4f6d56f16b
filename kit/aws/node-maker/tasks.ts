// How the node maker runs its work: bounded concurrency, timers that die with it, retries of what
// an apiserver under load fails transiently, and a record of what went wrong.
import { sleep } from '../../process.ts';

export const codeOf = (err: unknown) => (err as { code?: number }).code;
export const message = (err: unknown) => (err instanceof Error ? err.message : String(err)).slice(0, 500);

/** No answer (a connection the apiserver closed, an HTTP/2 stream reset), too many requests, or a server error. */
export const transient = (err: unknown) => {
  const code = codeOf(err);
  return code === undefined || code === 429 || code >= 500;
};

/** Runs at most `max` tasks at once, the rest in arrival order. */
export class Limiter {
  private readonly max: number;
  private active = 0;
  private readonly waiting: (() => void)[] = [];

  constructor(max: number) {
    this.max = max;
  }

  async run<T>(task: () => Promise<T>): Promise<T> {
    if (this.active >= this.max) await new Promise<void>((resolve) => this.waiting.push(resolve));
    this.active++;
    try {
      return await task();
    } finally {
      this.active--;
      this.waiting.shift()?.();
    }
  }
}

/**
 * Promises and timers owned by one component: `stop()` clears every timer and waits for what is in
 * flight, and a failure of anything tracked lands in the error log rather than nowhere.
 */
export class Tasks {
  private readonly inFlight = new Set<Promise<unknown>>();
  private readonly timers = new Set<NodeJS.Timeout>();
  private readonly errorLog: string[] = [];
  private errorCount = 0;
  stopped = false;

  track<T>(p: Promise<T>): void {
    const settled = p.catch((err) => this.fail('node maker', err)).finally(() => this.inFlight.delete(settled));
    this.inFlight.add(settled);
  }

  after(ms: number, fn: () => void): NodeJS.Timeout {
    const timer = setTimeout(() => {
      this.timers.delete(timer);
      if (!this.stopped) fn();
    }, ms);
    this.timers.add(timer);
    return timer;
  }

  /** `fn` every `ms`, never two at once. */
  every(ms: number, fn: () => Promise<void> | void): void {
    let running = false;
    const timer = setInterval(() => {
      if (this.stopped || running) return;
      running = true;
      this.track(
        Promise.resolve()
          .then(fn)
          .finally(() => (running = false)),
      );
    }, ms);
    this.timers.add(timer);
  }

  /** `call`, again after 0.25, 0.5, 1, 2, 4, 4... s while its failure is transient (at most 10 tries). */
  async retrying<T>(call: () => Promise<T>, onRetry: () => void): Promise<T> {
    for (let attempt = 1; ; attempt++) {
      try {
        return await call();
      } catch (err) {
        if (!transient(err) || attempt >= 10 || this.stopped) throw err;
        onRetry();
        await sleep(Math.min(250 * 2 ** (attempt - 1), 4000));
      }
    }
  }

  fail(what: string, err: unknown): void {
    this.errorCount++;
    this.errorLog.push(`${new Date().toISOString()} ${what}: ${message(err)}`);
    if (this.errorLog.length > 50) this.errorLog.shift();
  }

  get errors(): number {
    return this.errorCount;
  }

  /** The last errors (at most 50), oldest first. */
  recentErrors(): string[] {
    return [...this.errorLog];
  }

  async stop(): Promise<void> {
    this.stopped = true;
    for (const timer of this.timers) clearTimeout(timer); // intervals too
    this.timers.clear();
    await Promise.allSettled([...this.inFlight]);
  }
}

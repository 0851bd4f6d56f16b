// Runs the parts of `serve` as controller-runtime's Manager runs its runnables: each started in
// the order given, and stopped in the reverse order, so that whatever a part relies on is still
// there while it stops. A part that fails to start stops the ones already started.

export interface Runnable {
  /** For the error that names a part that failed to stop. */
  readonly name: string;
  start(): void | Promise<void>;
  stop(): void | Promise<void>;
}

export class Manager {
  private readonly runnables: Runnable[];
  private started: Runnable[] = [];
  private stopping: Promise<void> | undefined;

  constructor(runnables: Runnable[]) {
    this.runnables = runnables;
  }

  async start(): Promise<void> {
    for (const r of this.runnables) {
      try {
        await r.start();
      } catch (err) {
        await this.stopStarted().catch(() => {});
        throw err;
      }
      this.started.push(r);
    }
  }

  /** Stopping twice waits for the first stop instead of stopping things twice. */
  stop(): Promise<void> {
    this.stopping ??= this.stopStarted();
    return this.stopping;
  }

  /** Every part is asked to stop, even after one failed to; the first failure is reported. */
  private async stopStarted(): Promise<void> {
    const failures: unknown[] = [];
    for (const r of this.started.reverse()) {
      try {
        await r.stop();
      } catch (err) {
        failures.push(new Error(`stopping ${r.name}: ${(err as Error).message}`, { cause: err }));
      }
    }
    this.started = [];
    if (failures.length > 0) throw failures[0];
  }
}

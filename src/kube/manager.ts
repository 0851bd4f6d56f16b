// Runs the parts of `serve` as controller-runtime's Manager runs its runnables. Every part is
// started in the order given and stopped in the reverse order, so that whatever a part relies on
// is still there while it stops; a part that fails to start stops the ones already started. Then
// the elector: the leader-only parts lead in order when this replica gains the Lease, and follow
// in reverse when it loses it, each resolving only once its work has stopped, before the Lease is
// released. On stop the elector goes first, so a successor takes over at once.

/** A part of the process: with it from start to stop. Both hooks are optional; a gauge needs neither. */
export interface Runnable {
  /** For the error that names a part that failed to stop. */
  readonly name: string;
  start?(): void | Promise<void>;
  stop?(): void | Promise<void>;
}

/** What works only while this replica leads. */
export interface Leader {
  /** Leadership gained: begin. */
  lead(): void;
  /** Leadership lost: resolve once the work has stopped; the Lease is released after. */
  follow(): void | Promise<void>;
}

/** A runnable that also works only while this replica leads (the leader-only runnable). */
export interface LeaderRunnable extends Runnable, Leader {}

function isLeaderRunnable(r: Runnable): r is LeaderRunnable {
  const l = r as Partial<LeaderRunnable>;
  return typeof l.lead === 'function' && typeof l.follow === 'function';
}

/** Every part is asked, even after one failed; the first failure is thrown. */
async function each<T extends Runnable>(parts: readonly T[], act: (part: T) => void | Promise<void>, verb: string) {
  const failures: unknown[] = [];
  for (const part of parts) {
    try {
      await act(part);
    } catch (err) {
      failures.push(new Error(`${verb} ${part.name}: ${(err as Error).message}`, { cause: err }));
    }
  }
  if (failures.length > 0) throw failures[0];
}

/** The leader-only parts as one: lead in order, follow in reverse. */
function leaderGroup(parts: readonly Runnable[]): Leader {
  const leaders = parts.filter(isLeaderRunnable);
  return {
    lead: () => {
      for (const l of leaders) l.lead();
    },
    follow: () => each([...leaders].reverse(), (l) => l.follow(), 'following'),
  };
}

export class Manager {
  private readonly runnables: Runnable[];
  private started: Runnable[] = [];
  private stopping: Promise<void> | undefined;

  /**
   * `elect` is given the leader-only parts as one and returns what campaigns for the Lease (or,
   * without election, what leads from the start); it runs last.
   */
  constructor(runnables: Runnable[], elect?: (leader: Leader) => Runnable) {
    this.runnables = elect ? [...runnables, elect(leaderGroup(runnables))] : runnables;
  }

  async start(): Promise<void> {
    for (const r of this.runnables) {
      try {
        await r.start?.();
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

  private async stopStarted(): Promise<void> {
    const started = this.started.reverse();
    this.started = [];
    await each(started, (r) => r.stop?.(), 'stopping');
  }
}

// Leader election on a coordination.k8s.io/v1 Lease, as client-go does it: the holder renews
// every retryPeriod; a candidate takes the lease once it has seen the same record unchanged
// for leaseDuration (judged on its own clock, so clock skew between nodes does not matter);
// a leader that cannot renew within renewDeadline steps down; a graceful stop releases the
// lease so that a successor takes over at once.
import type { KubeClient } from './client.ts';
import { httpStatus } from './failures.ts';
import type { Logger } from 'pino';
import { sleep } from './backoff.ts';
import { microTime } from './time.ts';
import type { Leader, Runnable } from './manager.ts';

/** What leader election reports: 1 while this replica leads, else 0 (the app's leader gauge). */
interface LeaderMetrics {
  leader: { set(value: number): void };
}

interface LeaderElectionOptions {
  client: KubeClient;
  leaseNamespace: string;
  leaseName: string;
  identity: string;
  leaseDurationMs: number;
  renewDeadlineMs: number;
  retryPeriodMs: number;
  metrics: LeaderMetrics;
  log: Logger;
  /** What works while this replica leads; its follow() resolves before the lease is released. */
  leader: Leader;
}

interface LeaseSpec {
  holderIdentity?: string;
  leaseDurationSeconds?: number;
  acquireTime?: string;
  renewTime?: string;
  leaseTransitions?: number;
}
interface Lease {
  metadata?: { name?: string; namespace?: string; resourceVersion?: string };
  spec?: LeaseSpec;
}

class LeaderElector implements Runnable {
  readonly name = 'leader election';
  private readonly o: LeaderElectionOptions;
  private readonly path: string;
  private readonly stopController = new AbortController();
  private leading = false;
  private lastRenew = 0;
  private observed: { record: string; at: number } | undefined;
  private loop: Promise<void> | undefined;

  constructor(opts: LeaderElectionOptions) {
    this.o = opts;
    this.path = `/apis/coordination.k8s.io/v1/namespaces/${encodeURIComponent(opts.leaseNamespace)}/leases`;
    opts.metrics.leader.set(0);
  }

  get isLeader(): boolean {
    return this.leading;
  }

  start(): void {
    this.loop ??= this.run();
  }

  /** Stops; a leader first stops its work, then releases the lease so a successor starts at once. */
  async stop(): Promise<void> {
    this.stopController.abort();
    await this.loop;
    if (this.leading) {
      await this.setLeading(false);
      await this.release().catch((err: unknown) =>
        this.o.log.warn({ err: (err as Error).message }, 'could not release the lease'),
      );
    }
  }

  /** A Lease call that hangs must not keep a leader leading past its renew deadline. */
  private async attempt(budgetMs: number): Promise<'leader' | 'follower' | 'error'> {
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<'error'>(
      (resolve) => (timer = setTimeout(() => resolve('error'), Math.max(1, budgetMs))),
    );
    try {
      return await Promise.race([
        this.tryAcquireOrRenew().then((ok): 'leader' | 'follower' => (ok ? 'leader' : 'follower')),
        timeout,
      ]);
    } catch (err) {
      this.o.log.warn({ err: (err as Error).message }, 'lease update failed');
      return 'error';
    } finally {
      clearTimeout(timer);
    }
  }

  private async run(): Promise<void> {
    while (!this.stopController.signal.aborted) {
      const startedAt = Date.now();
      const budget = this.leading ? this.lastRenew + this.o.renewDeadlineMs - startedAt : this.o.renewDeadlineMs;
      const outcome = await this.attempt(budget);
      // Stopping: a late success must not make a stopping replica start work.
      if (this.stopController.signal.aborted) break;
      if (outcome === 'leader') {
        // The renewTime written was taken at the start of the attempt: count from there.
        this.lastRenew = startedAt;
        if (!this.leading) void this.setLeading(true);
      } else if (this.leading && outcome === 'follower') {
        this.o.log.warn('another replica holds the lease; stepping down');
        void this.setLeading(false);
      } else if (this.leading && Date.now() - this.lastRenew > this.o.renewDeadlineMs) {
        this.o.log.warn(
          { renewDeadlineMs: this.o.renewDeadlineMs },
          'could not renew the lease in time; stepping down',
        );
        void this.setLeading(false);
      }
      await sleep(this.o.retryPeriodMs, this.stopController.signal);
    }
  }

  private async setLeading(leading: boolean): Promise<void> {
    this.leading = leading;
    this.o.metrics.leader.set(leading ? 1 : 0);
    this.o.log.info(
      { identity: this.o.identity, lease: `${this.o.leaseNamespace}/${this.o.leaseName}` },
      leading ? 'became leader' : 'no longer leader',
    );
    if (leading) this.o.leader.lead();
    else await this.o.leader.follow();
  }

  private spec(now: number, transitions: number, acquire: boolean, previous?: LeaseSpec): LeaseSpec {
    return {
      holderIdentity: this.o.identity,
      leaseDurationSeconds: Math.ceil(this.o.leaseDurationMs / 1000),
      acquireTime: acquire ? microTime(now) : (previous?.acquireTime ?? microTime(now)),
      renewTime: microTime(now),
      leaseTransitions: transitions,
    };
  }

  private async tryAcquireOrRenew(): Promise<boolean> {
    const now = Date.now();
    const { leaseNamespace: namespace, leaseName: name } = this.o;
    let lease: Lease;
    try {
      lease = await this.read();
    } catch (err) {
      if (httpStatus(err) !== 404) throw err;
      await this.o.client.call('POST', this.path, {
        body: {
          apiVersion: 'coordination.k8s.io/v1',
          kind: 'Lease',
          metadata: { name, namespace },
          spec: this.spec(now, 0, true),
        },
      });
      return true;
    }
    const spec = lease.spec ?? {};
    const record = JSON.stringify([spec.holderIdentity, spec.renewTime, spec.leaseDurationSeconds]);
    if (this.observed?.record !== record) this.observed = { record, at: now };
    const held = spec.holderIdentity !== undefined && spec.holderIdentity !== '';
    const mine = spec.holderIdentity === this.o.identity;
    const expired = now - this.observed.at > (spec.leaseDurationSeconds ?? 0) * 1000;
    if (held && !mine && !expired) return false;
    const transitions = (spec.leaseTransitions ?? 0) + (mine ? 0 : 1);
    // replace carries the resourceVersion we read: if anyone wrote in between, we get 409 and lose.
    await this.replace({ ...lease, spec: this.spec(now, transitions, !mine, spec) });
    return true;
  }

  private read(): Promise<Lease> {
    return this.o.client.call<Lease>('GET', `${this.path}/${encodeURIComponent(this.o.leaseName)}`);
  }

  private async replace(lease: Lease): Promise<void> {
    await this.o.client.call('PUT', `${this.path}/${encodeURIComponent(this.o.leaseName)}`, { body: lease });
  }

  private async release(): Promise<void> {
    const lease = await this.read();
    if (lease.spec?.holderIdentity !== this.o.identity) return;
    await this.replace({
      ...lease,
      spec: { ...lease.spec, holderIdentity: '', leaseDurationSeconds: 1, renewTime: microTime(Date.now()) },
    });
  }
}

/** Leader election as configured, for the Manager: the Lease, or, turned off, this replica alone. */
export function electLeader(
  o: Omit<LeaderElectionOptions, 'leader'> & { enabled: boolean },
): (leader: Leader) => Runnable {
  return (leader) => (o.enabled ? new LeaderElector({ ...o, leader }) : soleLeader(o.metrics, leader));
}

/** Leader election turned off: this replica leads from the start, alone, and never follows. */
function soleLeader(metrics: LeaderMetrics, leader: Leader): Runnable {
  return {
    name: 'leader election',
    start: () => {
      metrics.leader.set(1);
      leader.lead();
    },
  };
}

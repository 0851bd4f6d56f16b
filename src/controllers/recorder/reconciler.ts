// The safety net: records every node the webhook missed. Source (cache events) -> filter
// (the engine's scope) -> de-duplicating queue -> reconcile (reads only the caches, writes
// one merge patch guarded by the resourceVersion it decided on). Only the leader processes.
import type { Logger } from 'pino';
import {
  decide,
  decisionInput,
  mergePatch,
  needsRecord,
  nodeClaimFor,
  REGISTERED_LABEL,
  type EngineSettings,
  type LaunchKnowledge,
  type NodeView,
} from '../../engine/index.ts';
import type { ClusterCaches } from '../../state/caches.ts';
import type { Metrics } from '../../metrics.ts';
import { type ProcessResult, WorkQueue } from '../../kube/work-queue.ts';
import type { KubeClient } from '../../kube/client.ts';
import { failureKind, httpStatus } from '../../kube/failures.ts';
import type { LeaderRunnable } from '../../kube/manager.ts';
import type { ControllerContext } from '../context.ts';

/**
 * How long a node Karpenter has not registered yet is left to the webhook. Karpenter's
 * registration UPDATE follows the kubelet's CREATE, and the webhook records the node inline then;
 * a reconciler that heard of the node's NodeClaim in between and wrote first only raced it (seen
 * under load: the NodeClaim's watch event handled just after the CREATE's review). Past this, the
 * webhook is taken to have missed the node.
 */
export const WEBHOOK_FIRST_MS = 2000;

interface ReconcilerOptions {
  caches: ClusterCaches;
  client: KubeClient;
  settings: EngineSettings;
  /** Prices and what else the effect's replay reads. */
  launch?: LaunchKnowledge;
  hold: ControllerContext['hold'];
  concurrency: number;
  metrics: Metrics;
  log: Logger;
  now: () => number;
}

/** The recorder: a reconciler that writes, so only the leader processes. */
export function recorder(ctx: ControllerContext): Reconciler {
  const { caches, client, settings, launch, hold, metrics, log, now } = ctx;
  const reconciler = new Reconciler({
    caches,
    client,
    settings,
    launch,
    hold,
    concurrency: ctx.options.maxConcurrentReconciles,
    metrics,
    log,
    now,
  });
  ctx.prices.onDueEnded(() => reconciler.requeueUndecided());
  hold.onLift(() => reconciler.requeueUndecided());
  return reconciler;
}

class Reconciler implements LeaderRunnable {
  readonly name = 'recorder';
  readonly queue: WorkQueue;
  private readonly o: ReconcilerOptions;

  constructor(opts: ReconcilerOptions) {
    this.o = opts;
    this.queue = new WorkQueue({
      concurrency: opts.concurrency,
      process: (name) => this.reconcile(name),
      onRetry: () => opts.metrics.workqueueRetries.inc(),
      onDepth: (depth) => opts.metrics.workqueueDepth.set(depth),
    });
    opts.caches.nodes.subscribe((node, kind) => {
      if (kind === 'upsert' && this.wants(node)) this.queue.add(node.name);
    });
    // A NodeClaim that changed, or that Karpenter said is a replacement: its node may be decidable now.
    const claimChanged = (claim: { nodeName?: string } | undefined) => {
      const node = claim?.nodeName ? opts.caches.nodes.get(claim.nodeName) : undefined;
      if (node && this.wants(node)) this.queue.add(node.name);
    };
    opts.caches.disruption.onReplacement((name) => claimChanged(opts.caches.nodeClaims.byName(name)));
    opts.caches.nodeClaims.subscribe(claimChanged);
  }

  /** The filter: on-demand Karpenter nodes without a record. */
  private wants(node: NodeView): boolean {
    return needsRecord(node, nodeClaimFor(node, this.o.caches.nodeClaims), this.o.settings.keys);
  }

  /** Leadership gained: process, starting with every undecided node the caches know. */
  lead(): void {
    this.requeueUndecided();
    this.queue.start();
  }

  /**
   * Every undecided node, at once: what they waited for may have come (the prices they were
   * undetermined for), sooner than the time their decision said to try again.
   */
  requeueUndecided(): void {
    for (const node of this.o.caches.nodes.undecidedNodes()) if (this.wants(node)) this.queue.add(node.name);
  }

  /** Leadership lost: finish what is in flight, take nothing new. */
  async follow(): Promise<void> {
    await this.queue.pause();
  }

  async stop(): Promise<void> {
    await this.queue.stop();
  }

  private async reconcile(name: string): Promise<ProcessResult> {
    const { caches, settings, metrics, log } = this.o;
    if (!caches.ready) return { kind: 'after', ms: 1000 };
    // Held nodes are not kept in the queue: the hold's end requeues every undecided node.
    if (this.o.hold.reason() !== undefined) return { kind: 'done' };
    // Only a node that may still need a record is written, and only from the view whose
    // resourceVersion guards the write: from the metadata view, a record the reconciler had just
    // written but that view had not heard of yet was written a second time.
    const node = caches.nodes.undecidedNode(name);
    if (!node) return { kind: 'done' };
    const now = this.o.now();
    if (
      node.labels[REGISTERED_LABEL] !== 'true' &&
      node.createdAt !== undefined &&
      now < node.createdAt + WEBHOOK_FIRST_MS
    ) {
      return { kind: 'after', ms: node.createdAt + WEBHOOK_FIRST_MS - now };
    }
    const end = metrics.reconcileDuration.startTimer();
    const decision = decide(
      decisionInput(node, { nodeClaims: caches.nodeClaims, launch: this.o.launch }, now, 'reconciler'),
      caches.overlays.index,
      settings,
    );
    if (decision.outcome === 'out-of-scope' || decision.outcome === 'recorded') return { kind: 'done' };
    if (decision.outcome === 'undetermined') return { kind: 'after', ms: Math.max(100, decision.retryAt - now) };
    try {
      await this.o.client.call('PATCH', `/api/v1/nodes/${encodeURIComponent(name)}`, {
        body: mergePatch(decision.record, node.resourceVersion),
        contentType: 'application/merge-patch+json',
      });
    } catch (err) {
      const code = httpStatus(err);
      if (code === 404) return { kind: 'done' };
      // 409: the node changed since the decision; decide again from the fresher cache.
      metrics.labelingErrors.inc({ error_type: failureKind(err) });
      if (code !== 409) log.warn({ code, err: (err as Error).message }, 'writing a record failed; will retry');
      return { kind: 'retry', reason: code === 409 ? 'conflict' : 'write failed' };
    } finally {
      end();
    }
    log.debug(
      {
        node: name,
        outcome: decision.outcome,
        basis: decision.basis,
        provider: decision.provider.name,
        providerWarning: decision.provider.warning,
      },
      'recorded',
    );
    return { kind: 'done' };
  }
}

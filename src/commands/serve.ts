// Wires the watcher from its configuration: caches, webhooks, metrics and probes, and the
// reconciler. The same function runs in `serve`, in the demo and in the tests.
import type { Logger } from 'pino';
import type { Config } from '../config/load.ts';
import { EFFECTS, nodeClaimFor, scope, type EngineSettings } from '../engine/index.ts';
import { engineSettings, overlayPolicy } from '../config/engine-settings.ts';
import { priceSettings } from '../prices/settings.ts';
import { randomUUID } from 'node:crypto';
import { hostname } from 'node:os';
import { ClusterCaches } from '../state/caches.ts';
import { whoAmI } from '../kube/access-review.ts';
import type { KubeClient } from '../kube/client.ts';
import { LeaderElector } from '../kube/leader.ts';
import { Reconciler } from '../controllers/recorder/reconciler.ts';
import { createMetrics, type Metrics } from '../metrics.ts';
import { EventRecorder } from '../controllers/events/recorder.ts';
import { EVENT_NAMESPACE } from '../controllers/events/node-event.ts';
import { exportOverlayNodes, exportOverlayStates } from '../controllers/gauges/overlays.ts';
import { ProviderWatch } from '../controllers/gauges/providers.ts';
import { PriceSource } from '../prices/source.ts';
import { type OpsListeners, startOpsListeners } from '../server/ops.ts';
import { type RunningServer, startWebhookServer } from '../admission/server.ts';
import { CertificateReloader } from '../server/tls.ts';

export interface WatcherOptions {
  config: Config;
  client: KubeClient;
  log: Logger;
  metrics?: Metrics;
  /** Listen address; the container listens on all interfaces, tests on loopback. */
  host?: string;
  now?: () => number;
  /** Tests shorten the watch watchdog and the certificate poll. */
  watchdogMs?: number;
  certPollMs?: number;
  /** Leader-election identity; defaults to POD_NAME (or the host name) plus a random suffix. */
  identity?: string;
}

export interface RunningWatcher {
  metrics: Metrics;
  caches: ClusterCaches | undefined;
  reconciler: Reconciler | undefined;
  webhookPort: number | undefined;
  metricsPort: number;
  healthPort: number;
  /** Readiness fails first, in-flight reviews finish, then everything stops. */
  stop(): Promise<void>;
}

async function ownUsername(client: KubeClient, log: Logger): Promise<string | undefined> {
  try {
    return await whoAmI(client);
  } catch (err) {
    log.warn({ err: (err as Error).message }, 'could not learn the watcher\'s own identity; only configured identities may change records');
    return undefined;
  }
}

export async function startWatcher(o: WatcherOptions): Promise<RunningWatcher> {
  const { config, log } = o;
  const metrics = o.metrics ?? createMetrics();
  const host = o.host ?? '0.0.0.0';
  const now = o.now ?? Date.now;
  let stopping = false;

  // The webhooks' certificate also serves /metrics, so a disabled watcher with secure metrics loads it too.
  const loadTls = () => new CertificateReloader({ certFile: config.webhook.certFile, keyFile: config.webhook.keyFile }, metrics, log, o.certPollMs);
  const opsOptions = { host, config, client: o.client, metrics, log };

  if (!config.enabled) {
    log.info('Node watcher disabled (set nodeWatcher.enabled=true to enable)');
    const ops = await startOpsListeners({ ...opsOptions, tls: config.metrics.secure ? loadTls() : undefined, ready: () => !stopping });
    return {
      metrics, caches: undefined, reconciler: undefined, webhookPort: undefined, metricsPort: ops.metricsPort, healthPort: ops.healthPort,
      stop: once(async () => {
        stopping = true;
        await ops.close();
      }),
    };
  }

  const settings: EngineSettings = engineSettings(config);
  const policy = overlayPolicy(config);
  const tls = loadTls();
  const caches = new ClusterCaches(
    { client: o.client, metrics, log, now, ...(o.watchdogMs ? { watchdogMs: o.watchdogMs } : {}) },
    { policy, retentionMs: config.historyRetentionMs, relistIntervalMs: config.overlayCacheTTLMs },
    settings.keys.influenced,
    config.events.enabled ? settings.keys.decisionAnnotation : undefined,
  );
  metrics.atScrape.nodeCounts = () => {
    metrics.nodesInfluenced.reset();
    const byEffect = new Map<string, number>(EFFECTS.map((e) => [e, 0]));
    for (const node of caches.nodes.nodes()) {
      if (node.labels[settings.keys.influenced] === 'true') {
        metrics.nodesInfluenced.inc({ capacity_type: node.labels[settings.keys.copied['capacity-type']] ?? 'unknown' });
      }
      const effect = node.labels[settings.keys.effect];
      if (effect !== undefined && byEffect.has(effect)) byEffect.set(effect, byEffect.get(effect)! + 1);
    }
    for (const [effect, n] of byEffect) metrics.nodesByEffect.set({ effect }, n);
    let pending = 0;
    for (const node of caches.nodes.undecidedNodes()) {
      const s = scope(node, nodeClaimFor(node, caches.nodeClaims), settings.keys);
      if (s.inScope && !s.recorded) pending++;
    }
    metrics.nodesPending.set(pending);
  };
  exportOverlayNodes(metrics, {
    nodes: () => caches.nodes.nodes(),
    active: () => caches.overlays.index.activeVersionsAt(now()).filter((v) => v.ineligible === undefined && v.selected).map((v) => v.overlay),
  }, settings.keys, config.metrics.maxOverlaySeries);
  // The overlays of the selector's: the watch also brings the others, which only outrank them.
  exportOverlayStates(metrics, () => [...caches.overlays.reflector.store.values()].filter((o) => policy.selector.matches(o.labels)));
  const providers = new ProviderWatch({ settings, groups: caches.nodeClaims.groups, metrics, log });
  caches.nodeClaims.subscribe((claim) => providers.seen(claim));
  const prices = new PriceSource({ ...priceSettings(config), metrics, log, now });
  const launch = caches.launchKnowledge(() => prices.current());
  const reconciler = new Reconciler({ caches, client: o.client, settings, launch, concurrency: config.maxConcurrentReconciles, metrics, log, now });
  const identity = o.identity ?? `${process.env.POD_NAME ?? hostname()}_${randomUUID().slice(0, 8)}`;
  const events = new EventRecorder({
    post: async (body) => void (await o.client.call('POST', `/apis/events.k8s.io/v1/namespaces/${EVENT_NAMESPACE}/events`, { body })),
    keys: settings.keys, enabled: config.events.enabled, ratePerSecond: config.events.ratePerSecond, instance: identity, metrics, log, now,
  });
  caches.nodes.onMetadata((node) => events.seen(node));
  const le = config.leaderElection;
  const elector = le.enabled
    ? new LeaderElector({
        client: o.client,
        namespace: le.leaseNamespace,
        name: le.leaseName,
        identity,
        leaseDurationMs: le.leaseDurationMs,
        renewDeadlineMs: le.renewDeadlineMs,
        retryPeriodMs: le.retryPeriodMs,
        metrics,
        log,
        onStartedLeading: () => {
          reconciler.startProcessing();
          events.lead(caches.nodes.nodes());
        },
        onStoppedLeading: () => {
          events.follow();
          return reconciler.stopProcessing();
        },
      })
    : undefined;
  let selfUsername: string | undefined;

  // Listeners first: a port that cannot be bound stops start-up before anything watches or writes.
  let webhook: RunningServer | undefined;
  let ops: OpsListeners | undefined;
  try {
    // Ready when the webhook listens and every cache has synced, until shutdown begins.
    ops = await startOpsListeners({ ...opsOptions, tls, ready: () => !stopping && webhook !== undefined && caches.ready });
    webhook = await startWebhookServer({
      host,
      port: config.webhook.port,
      deadlineMs: config.webhook.deadlineMs,
      tls,
      metrics,
      log,
      mutate: {
        index: caches.overlays.index,
        nodeClaims: caches.nodeClaims,
        existingNode: (name) => caches.nodes.get(name),
        ready: () => caches.ready,
        settings,
        launch,
        now,
      },
      validate: {
        keys: settings.keys,
        selfUsername: () => selfUsername,
        allowedUsers: config.webhook.allowedUsers,
        allowedGroups: config.webhook.allowedGroups,
      },
    });
  } catch (err) {
    tls.stop();
    await ops?.close();
    throw err;
  }
  caches.start();
  // Read in the background: a node decided before the first reading gets the static table's prices.
  void prices.start();
  if (elector) elector.start();
  else {
    metrics.leader.set(1);
    reconciler.startProcessing();
    events.lead(caches.nodes.nodes());
  }
  void ownUsername(o.client, log).then((u) => (selfUsername = u));
  const listening = webhook;
  const opsServer = ops;
  log.info({ webhookPort: listening.port, metricsPort: opsServer.metricsPort, metricsSecure: config.metrics.secure, healthPort: opsServer.healthPort, labelNamespace: config.labelNamespace, karpenterProvider: config.karpenterProvider }, 'node watcher started');

  return {
    metrics,
    caches,
    reconciler,
    webhookPort: listening.port,
    metricsPort: opsServer.metricsPort,
    healthPort: opsServer.healthPort,
    stop: once(async () => {
      stopping = true;
      // Readiness fails now; reviews keep being answered until endpoints have caught up.
      await new Promise((r) => setTimeout(r, config.shutdownDelayMs));
      await listening.close();
      // Releasing the lease lets another replica take over at once instead of after leaseDuration.
      await elector?.stop();
      await reconciler.stop();
      await events.stop();
      await caches.stop();
      await prices.stop();
      await opsServer.close();
    }),
  };
}

/** Stopping twice waits for the first stop instead of closing things twice. */
function once(fn: () => Promise<void>): () => Promise<void> {
  let running: Promise<void> | undefined;
  return () => (running ??= fn());
}

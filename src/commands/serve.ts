// `serve`: wires the watcher from its configuration and runs its parts in order (manager.ts):
// the probe and metrics listeners, the webhooks, the caches, the prices, then the controllers
// that write, under leader election. The same function runs in `serve`, in the demo and in the tests.
import { randomUUID } from 'node:crypto';
import { hostname } from 'node:os';
import type { Logger } from 'pino';
import { startWebhookServer } from '../admission/server.ts';
import { engineSettings, overlayPolicy } from '../config/engine-settings.ts';
import type { Config } from '../config/load.ts';
import { EVENT_NAMESPACE } from '../controllers/events/node-event.ts';
import { EventRecorder } from '../controllers/events/recorder.ts';
import { exportNodeCounts } from '../controllers/gauges/nodes.ts';
import { exportOverlayNodes, exportOverlayStates, exportOverlaysSeen } from '../controllers/gauges/overlays.ts';
import { exportOverlayDollars } from '../controllers/gauges/dollars.ts';
import { LaunchCounter } from '../controllers/launches/counter.ts';
import { countDisruptions } from '../controllers/disruptions/counter.ts';
import { ProviderWatch } from '../controllers/gauges/providers.ts';
import { exportCrdsServed } from '../controllers/gauges/crds.ts';
import { exportWatchAges } from '../controllers/gauges/watches.ts';
import { Reconciler } from '../controllers/recorder/reconciler.ts';
import { whoAmI } from '../kube/access-review.ts';
import { KubeClient } from '../kube/client.ts';
import { loadClusterAccess } from '../kube/kubeconfig.ts';
import { LeaderElector } from '../kube/leader.ts';
import { createLogger } from '../log.ts';
import { createMetrics, type Metrics } from '../metrics.ts';
import { anyAddress, type RunningServer } from '../server/listener.ts';
import { startOpsListeners, type OpsListeners } from '../server/ops.ts';
import { CertificateReloader } from '../server/tls.ts';
import { ClusterCaches } from '../state/caches.ts';
import { Manager, type Runnable } from './manager.ts';
import { servePrices } from './serve-prices.ts';

export interface WatcherOptions {
  config: Config;
  client: KubeClient;
  log: Logger;
  metrics?: Metrics;
  /** Listen address; by default every address of both families (anyAddress), tests on loopback. */
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
    log.warn(
      { err: (err as Error).message },
      "could not learn the watcher's own identity; only configured identities may change records",
    );
    return undefined;
  }
}

/** A listener as a part of the Manager: bound at start (a port in use stops start-up), closed at stop. */
function listener<T extends { close(): Promise<void> }>(
  name: string,
  bind: () => Promise<T>,
): Runnable & { bound(): T } {
  let server: T | undefined;
  return {
    name,
    start: async () => {
      server = await bind();
    },
    stop: () => server?.close(),
    bound: () => server!,
  };
}

export async function startWatcher(o: WatcherOptions): Promise<RunningWatcher> {
  const { config, log } = o;
  const metrics = o.metrics ?? createMetrics();
  const host = o.host ?? (await anyAddress(log));
  const now = o.now ?? Date.now;
  let stopping = false;
  const shuttingDown = () => (stopping ? 'shutting down' : undefined);

  // The webhooks' certificate also serves /metrics, so a disabled watcher with secure metrics loads it too.
  const loadTls = () =>
    new CertificateReloader(
      { certFile: config.webhook.certFile, keyFile: config.webhook.keyFile },
      metrics,
      log,
      o.certPollMs,
    );
  const opsOptions = { host, config, client: o.client, metrics, log };

  if (!config.enabled) {
    log.info('Node watcher disabled (set nodeWatcher.enabled=true to enable)');
    const ops = listener<OpsListeners>('ops listeners', () =>
      startOpsListeners({ ...opsOptions, tls: config.metrics.secure ? loadTls() : undefined, notReady: shuttingDown }),
    );
    const manager = new Manager([ops]);
    await manager.start();
    return {
      metrics,
      caches: undefined,
      reconciler: undefined,
      webhookPort: undefined,
      metricsPort: ops.bound().metricsPort,
      healthPort: ops.bound().healthPort,
      stop: () => {
        stopping = true;
        return manager.stop();
      },
    };
  }

  const settings = engineSettings(config);
  const policy = overlayPolicy(config);
  const tls = loadTls();
  const caches = new ClusterCaches(
    { client: o.client, metrics, log, now, ...(o.watchdogMs ? { watchdogMs: o.watchdogMs } : {}) },
    { policy, retentionMs: config.historyRetentionMs, relistIntervalMs: config.overlayCacheTTLMs },
    settings.keys,
    config.events.enabled ? settings.keys.decisionAnnotation : undefined,
  );

  // Gauges: each family computed from the caches at scrape time.
  exportNodeCounts(metrics, caches.nodes, caches.nodeClaims, settings.keys);
  exportWatchAges(metrics, caches.watches());
  exportCrdsServed(metrics, () => caches.crds());
  const { maxOverlaySeries } = config.metrics;
  const allNodes = () => caches.nodes.nodes();
  const selectedActive = () =>
    caches.overlays.index
      .activeVersionsAt(now())
      .filter((v) => v.ineligible === undefined && v.selected)
      .map((v) => v.overlay);
  exportOverlayNodes(metrics, { nodes: allNodes, active: selectedActive }, settings.keys, maxOverlaySeries);
  // The overlays of the selector's: the watch also brings the others, which only outrank them.
  exportOverlayStates(metrics, () =>
    [...caches.overlays.reflector.store.values()].filter((ov) => policy.selector.matches(ov.labels)),
  );
  // All of them, selected or not: a selector that matches none of the cluster's overlays shows.
  exportOverlaysSeen(
    metrics,
    () => caches.overlays.reflector.store.values(),
    (ov) => policy.selector.matches(ov.labels),
  );
  const providers = new ProviderWatch({ settings, groups: caches.nodeClaims.groups, metrics, log });
  caches.nodeClaims.subscribe((claim) => providers.seen(claim));

  const { prices, said: pricesSaid } = servePrices(config, caches.nodes, { metrics, log, now });
  exportOverlayDollars(metrics, allNodes, () => prices.current(), settings.keys, maxOverlaySeries);
  const launch = caches.launchKnowledge(prices);
  const reconciler = new Reconciler({
    caches,
    client: o.client,
    settings,
    launch,
    concurrency: config.maxConcurrentReconciles,
    metrics,
    log,
    now,
  });
  prices.onDueEnded(() => reconciler.requeueUndecided());
  const identity = o.identity ?? `${process.env.POD_NAME ?? hostname()}_${randomUUID().slice(0, 8)}`;
  const events = new EventRecorder({
    post: async (body) =>
      void (await o.client.call('POST', `/apis/events.k8s.io/v1/namespaces/${EVENT_NAMESPACE}/events`, { body })),
    keys: settings.keys,
    enabled: config.events.enabled,
    ratePerSecond: config.events.ratePerSecond,
    instance: identity,
    metrics,
    log,
    now,
  });
  caches.nodes.onMetadata((node) => events.seen(node));
  const active = () => selectedActive().map((o) => o.nameLabelValue);
  const launches = new LaunchCounter({ metrics, keys: settings.keys, max: maxOverlaySeries, active, now });
  caches.nodes.onMetadata((node) => launches.seen(node));
  const counts = (ov: { name: string }) => selectedActive().some((a) => a.name === ov.name);
  const churned = events.churned.bind(events);
  const disruptions = countDisruptions(caches, { metrics, keys: settings.keys, counts, churned, now });

  // The writers (the reconciler and Events) work only while this replica leads.
  const lead = () => {
    reconciler.startProcessing();
    launches.lead();
    disruptions.lead();
    events.lead(caches.nodes.nodes());
  };
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
        onStartedLeading: lead,
        onStoppedLeading: () => {
          events.follow();
          launches.follow();
          disruptions.follow();
          return reconciler.stopProcessing();
        },
      })
    : undefined;

  let selfUsername: string | undefined;
  // Ready when the webhook listens, the caches have synced and Karpenter's CRDs are served; /readyz says why not.
  const notReady = () =>
    shuttingDown() ?? (webhook.bound() ? caches.notReady().join('; ') || undefined : 'the webhooks do not listen yet');
  const ops = listener<OpsListeners>('ops listeners', () => startOpsListeners({ ...opsOptions, tls, notReady }));
  const webhook = listener<RunningServer>('webhooks', () =>
    startWebhookServer({
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
    }),
  );
  // Listeners first: a port that cannot be bound stops start-up before anything watches or
  // writes. Stopped in reverse: leadership is released first (a successor takes over at once,
  // not after leaseDuration), the webhooks answer to the last.
  const manager = new Manager([
    ops,
    webhook,
    { name: 'caches', start: () => caches.start(), stop: () => caches.stop() },
    // Read in the background: a node decided before the first reading gets the static table's prices.
    { name: 'prices', start: () => void prices.start(), stop: () => prices.stop() },
    { name: 'events', start: () => {}, stop: () => events.stop() },
    { name: 'recorder', start: () => {}, stop: () => reconciler.stop() },
    {
      name: 'leader election',
      start: () => {
        if (elector) return elector.start();
        metrics.leader.set(1);
        lead();
      },
      stop: () => elector?.stop(),
    },
  ]);
  try {
    await manager.start();
  } catch (err) {
    // The certificate is watched from the start; no listener holds it when binding failed.
    tls.stop();
    throw err;
  }
  void ownUsername(o.client, log).then((u) => (selfUsername = u));
  log.info(
    {
      webhookPort: webhook.bound().port,
      metricsPort: ops.bound().metricsPort,
      metricsSecure: config.metrics.secure,
      healthPort: ops.bound().healthPort,
      labelNamespace: config.labelNamespace,
      karpenterProvider: config.karpenterProvider,
      prices: pricesSaid,
    },
    'node watcher started',
  );

  return {
    metrics,
    caches,
    reconciler,
    webhookPort: webhook.bound().port,
    metricsPort: ops.bound().metricsPort,
    healthPort: ops.bound().healthPort,
    stop: once(async () => {
      stopping = true;
      // Readiness fails now; reviews keep being answered until endpoints have caught up.
      await new Promise((r) => setTimeout(r, config.shutdownDelayMs));
      await manager.stop();
    }),
  };
}

/** Stopping twice waits for the first stop instead of closing things twice. */
function once(fn: () => Promise<void>): () => Promise<void> {
  let running: Promise<void> | undefined;
  return () => (running ??= fn());
}

/** SIGTERM must end the process well inside Kubernetes' 30 s grace period. */
const SHUTDOWN_BOUND_MS = 20_000;

/** The `serve` command: the watcher against the cluster the kubeconfig order finds, until SIGTERM or SIGINT. */
export async function serve(config: Config): Promise<void> {
  const log = createLogger(config.logLevel);
  const watcher = await startWatcher({ config, client: new KubeClient(loadClusterAccess()), log });
  let stopping = false;
  const shutdown = (signal: string) => {
    if (stopping) return;
    stopping = true;
    log.info({ signal }, 'shutting down: readiness off, draining in-flight reviews');
    const bound = setTimeout(() => {
      log.error({ boundMs: SHUTDOWN_BOUND_MS }, 'shutdown took too long; exiting');
      process.exit(1);
    }, SHUTDOWN_BOUND_MS);
    bound.unref();
    watcher.stop().then(
      () => {
        log.info('stopped');
        process.exit(0);
      },
      (err: unknown) => {
        log.error({ err }, 'error while stopping');
        process.exit(1);
      },
    );
  };
  process.on('SIGTERM', () => shutdown('SIGTERM'));
  process.on('SIGINT', () => shutdown('SIGINT'));
}

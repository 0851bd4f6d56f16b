// `serve`: wires the watcher from its configuration and runs its parts in order (kube/manager.ts):
// the probe and metrics listeners, the webhooks, the caches, the prices, the controllers
// (controllers/index.ts), then leader election. The same function runs in `serve`, in the demo and
// in the tests.
import { randomUUID } from 'node:crypto';
import { hostname } from 'node:os';
import type { Logger } from 'pino';
import { startWebhookServer } from '../admission/server.ts';
import { engineSettings, karpenterSettings, overlayPolicy } from '../config/engine-settings.ts';
import type { Config } from '../config/load.ts';
import { CONTROLLERS, makeControllers, OBSERVING } from '../controllers/index.ts';
import { KubeClient } from '../kube/client.ts';
import { loadClusterAccess } from '../kube/kubeconfig.ts';
import { electLeader } from '../kube/leader.ts';
import { Manager } from '../kube/manager.ts';
import { createLogger } from '../log.ts';
import { createMetrics, type Metrics } from '../metrics.ts';
import { anyAddress, listenerRunnable as listener, type RunningServer } from '../server/listener.ts';
import { startOpsListeners, type OpsListeners } from '../server/ops.ts';
import { CertificateReloader } from '../server/tls.ts';
import { ClusterCaches } from '../state/caches.ts';
import { exportHeld, RecordHold } from '../state/record-hold.ts';
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
  webhookPort: number | undefined;
  metricsPort: number;
  healthPort: number;
  /** Readiness fails first, in-flight reviews finish, then everything stops. */
  stop(): Promise<void>;
}

/** What both ways of starting share: the process's metrics, address, clock, certificate and shutdown state. */
interface Wiring {
  readonly o: WatcherOptions;
  readonly metrics: Metrics;
  readonly host: string;
  readonly now: () => number;
  /** The webhooks' certificate also serves /metrics, so a disabled watcher with secure metrics loads it too. */
  readonly loadTls: () => CertificateReloader;
  /** Readiness fails first while stopping. */
  readonly shutdown: { stopping: boolean; readonly reason: () => string | undefined };
}

export async function startWatcher(o: WatcherOptions): Promise<RunningWatcher> {
  const metrics = o.metrics ?? createMetrics();
  const shutdown = {
    stopping: false,
    reason: () => (shutdown.stopping ? 'shutting down' : undefined),
  };
  const w: Wiring = {
    o,
    metrics,
    host: o.host ?? (await anyAddress(o.log)),
    now: o.now ?? Date.now,
    loadTls: () =>
      new CertificateReloader(
        { certFile: o.config.webhook.certFile, keyFile: o.config.webhook.keyFile },
        metrics,
        o.log,
        o.certPollMs,
      ),
    shutdown,
  };
  return o.config.enabled ? startEnabled(w) : startDisabled(w);
}

const opsOptions = (w: Wiring) => ({
  host: w.host,
  config: w.o.config,
  client: w.o.client,
  metrics: w.metrics,
  log: w.o.log,
});

/** Disabled: the probe and metrics listeners only, nothing watched or written. */
async function startDisabled(w: Wiring): Promise<RunningWatcher> {
  const { config, log } = w.o;
  log.info('Node watcher disabled (set nodeWatcher.enabled=true to enable)');
  exportHeld(w.metrics.recordsHeld, 'disabled');
  const ops = listener<OpsListeners>('ops listeners', () =>
    startOpsListeners({
      ...opsOptions(w),
      tls: config.metrics.secure ? w.loadTls() : undefined,
      notReady: w.shutdown.reason,
    }),
  );
  const manager = new Manager([ops]);
  await manager.start();
  return {
    metrics: w.metrics,
    caches: undefined,
    webhookPort: undefined,
    metricsPort: ops.bound().metricsPort,
    healthPort: ops.bound().healthPort,
    stop: () => {
      w.shutdown.stopping = true;
      return manager.stop();
    },
  };
}

async function startEnabled(w: Wiring): Promise<RunningWatcher> {
  const { o, metrics, now } = w;
  const { config, log } = o;
  const settings = engineSettings(config);
  const tls = w.loadTls();
  const caches = new ClusterCaches(
    { client: o.client, metrics, log, now, ...(o.watchdogMs ? { watchdogMs: o.watchdogMs } : {}) },
    {
      policy: overlayPolicy(config),
      retentionMs: config.historyRetentionMs,
      relistIntervalMs: config.overlayCacheTTLMs,
    },
    settings.keys,
  );
  const { prices, said: pricesSaid } = servePrices(config, caches.nodes, { metrics, log, now });
  const launch = caches.launchKnowledge(prices, karpenterSettings(config));
  const hold = new RecordHold(caches.overlays, config, metrics.recordsHeld, log);
  const observing = config.mode === 'observe';
  const identity = o.identity ?? `${process.env.POD_NAME ?? hostname()}_${randomUUID().slice(0, 8)}`;
  const controllers = makeControllers(
    { caches, client: o.client, settings, options: config, launch, prices, hold, identity, metrics, log, now },
    observing ? OBSERVING : CONTROLLERS,
  );
  // Ready when the webhook listens (observe has none), the caches have synced and Karpenter's CRDs
  // are served; /readyz says why not.
  const notReady = () =>
    w.shutdown.reason() ??
    (observing || webhook.bound() ? caches.notReady().join('; ') || undefined : 'the webhooks do not listen yet');
  const ops = listener<OpsListeners>('ops listeners', () => startOpsListeners({ ...opsOptions(w), tls, notReady }));
  const webhook = listener<RunningServer>('webhooks', () =>
    startWebhookServer({
      host: w.host,
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
        held: () => hold.reason() !== undefined,
        settings,
        launch,
        now,
      },
    }),
  );
  // Listeners first: a port that cannot be bound stops start-up before anything watches or
  // writes. Stopped in reverse: leadership is released first (a successor takes over at once,
  // not after leaseDuration), the webhooks answer to the last.
  const manager = new Manager(
    [
      ops,
      ...(observing ? [] : [webhook]),
      { name: 'caches', start: () => caches.start(), stop: () => caches.stop() },
      // Read in the background: a node decided before the first reading gets the static table's prices.
      { name: 'prices', start: () => void prices.start(), stop: () => prices.stop() },
      ...controllers,
    ],
    electLeader({ ...config.leaderElection, client: o.client, identity, metrics, log }),
  );
  try {
    await manager.start();
  } catch (err) {
    // The certificate is watched from the start; no listener holds it when binding failed.
    tls.stop();
    throw err;
  }
  const webhookPort = observing ? undefined : webhook.bound().port;
  const { metricsPort, healthPort } = ops.bound();
  const { labelNamespace, karpenterProvider, metrics: m } = config;
  const said = {
    mode: config.mode,
    webhookPort,
    metricsPort,
    metricsSecure: m.secure,
    healthPort,
    labelNamespace,
    karpenterProvider,
  };
  log.info({ ...said, prices: pricesSaid }, 'node watcher started');
  return { metrics, caches, webhookPort, metricsPort, healthPort, stop: drainThenStop(w, manager) };
}

/** Readiness off, reviews answered until endpoints have caught up, then every part stopped; stopping twice waits for the first. */
function drainThenStop(w: Wiring, manager: Manager): () => Promise<void> {
  let stopped: Promise<void> | undefined;
  const drain = async () => {
    w.shutdown.stopping = true;
    await new Promise((r) => setTimeout(r, w.o.config.shutdownDelayMs));
    await manager.stop();
  };
  return () => (stopped ??= drain());
}

/** SIGTERM must end the process well inside Kubernetes' 30 s grace period. */
const SHUTDOWN_BOUND_MS = 20_000;

/** The `serve` command: the watcher against the cluster the kubeconfig order finds, until SIGTERM or SIGINT. */
export async function serve(config: Config, warnings: readonly string[] = []): Promise<void> {
  const log = createLogger(config.logLevel);
  for (const warning of warnings) log.warn({ warning }, 'configuration: a setting this version does not know');
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

// Wires the watcher from its configuration: caches, webhooks, metrics and probes, and the
// reconciler. The same function runs in `serve`, in the demo and in the tests.
import * as k8s from '@kubernetes/client-node';
import type { Logger } from 'pino';
import type { Config } from './config/load.ts';
import { nodeClaimFor, recordKeys, scope, type EngineSettings } from './engine/index.ts';
import { ClusterCaches } from './kube/caches.ts';
import { createMetrics, type Metrics } from './metrics.ts';
import { type RunningServer, startOpsServer, startWebhookServer } from './webhook/server.ts';
import { CertificateReloader } from './webhook/tls.ts';

export interface WatcherOptions {
  config: Config;
  kc: k8s.KubeConfig;
  log: Logger;
  metrics?: Metrics;
  /** Listen address; the container listens on all interfaces, tests on loopback. */
  host?: string;
  now?: () => number;
  /** Tests shorten the watch watchdog and the certificate poll. */
  watchdogMs?: number;
  certPollMs?: number;
}

export interface RunningWatcher {
  metrics: Metrics;
  caches: ClusterCaches | undefined;
  webhookPort: number | undefined;
  opsPort: number;
  /** Readiness fails first, in-flight reviews finish, then everything stops. */
  stop(): Promise<void>;
}

async function whoAmI(kc: k8s.KubeConfig, log: Logger): Promise<string | undefined> {
  try {
    const review = await kc.makeApiClient(k8s.AuthenticationV1Api).createSelfSubjectReview({ body: {} });
    return review.status?.userInfo?.username;
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

  if (!config.enabled) {
    log.info('Node watcher disabled (set nodeWatcher.enabled=true to enable)');
    const ops = await startOpsServer({ host, port: config.metrics.port, metrics, log, ready: () => !stopping });
    return {
      metrics, caches: undefined, webhookPort: undefined, opsPort: ops.port,
      stop: async () => {
        stopping = true;
        await ops.close();
      },
    };
  }

  const settings: EngineSettings = { keys: recordKeys(config.labelNamespace), gracePeriodMs: config.gracePeriodMs };
  const tls = new CertificateReloader({ certFile: config.webhook.certFile, keyFile: config.webhook.keyFile }, metrics, log, o.certPollMs);
  const caches = new ClusterCaches(
    { kc: o.kc, metrics, log, now, ...(o.watchdogMs ? { watchdogMs: o.watchdogMs } : {}) },
    { selector: config.overlaySelector, requireOverlayReady: config.requireOverlayReady, retentionMs: config.historyRetentionMs, relistIntervalMs: config.overlayCacheTTLMs },
  );
  metrics.atScrape.nodeCounts = () => {
    metrics.nodesInfluenced.reset();
    let pending = 0;
    for (const node of caches.nodes.nodes()) {
      if (node.labels[settings.keys.influenced] === 'true') {
        metrics.nodesInfluenced.inc({ capacity_type: node.labels[settings.keys.copied['capacity-type']] ?? 'unknown' });
      } else {
        const s = scope(node, nodeClaimFor(node, caches.nodeClaims), settings.keys);
        if (s.inScope && !s.recorded) pending++;
      }
    }
    metrics.nodesPending.set(pending);
  };
  caches.start();
  let selfUsername: string | undefined;
  void whoAmI(o.kc, log).then((u) => (selfUsername = u));

  const ops = await startOpsServer({ host, port: config.metrics.port, metrics, log, ready: () => !stopping && caches.ready });
  let webhook: RunningServer;
  try {
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
    await Promise.all([ops.close(), caches.stop()]);
    throw err;
  }
  log.info({ webhookPort: webhook.port, metricsPort: ops.port, labelNamespace: config.labelNamespace }, 'node watcher started');

  return {
    metrics,
    caches,
    webhookPort: webhook.port,
    opsPort: ops.port,
    stop: async () => {
      stopping = true;
      // Readiness fails now; reviews keep being answered until endpoints have caught up.
      await new Promise((r) => setTimeout(r, config.shutdownDelayMs));
      await webhook.close();
      await caches.stop();
      await ops.close();
    },
  };
}

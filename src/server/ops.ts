// The listeners besides the webhooks, apart as kubebuilder lays them out: the probes over plain
// HTTP (the kubelet calls them without a token), and /metrics on a port of its own, over HTTPS
// with the webhooks' certificate and behind Kubernetes authentication and authorization
// (metrics-auth.ts), unless metrics.secure is false.
import Fastify, { type FastifyInstance, type FastifyReply, type FastifyRequest } from 'fastify';
import type { Logger } from 'pino';
import type { Config } from '../config/load.ts';
import { accessReviews } from '../kube/access-review.ts';
import type { KubeClient } from '../kube/client.ts';
import { METRICS_PATH, MetricsAuth, type Verdict } from './metrics-auth.ts';
import type { Metrics } from '../metrics.ts';
import { listen, type RunningServer, SLOW_CLIENT_LIMITS } from './listener.ts';
import { type CertificateReloader, type ReloadTarget, secureContextOptions } from './tls.ts';

interface OpsListenersOptions {
  host: string;
  config: Config;
  client: KubeClient;
  metrics: Metrics;
  log: Logger;
  /** The webhooks' certificate; required when metrics.secure is true. */
  tls: CertificateReloader | undefined;
  /** Why the watcher is not ready (/readyz answers 503 and says it), or undefined when it is. */
  notReady(): string | undefined;
}

export interface OpsListeners {
  healthPort: number;
  metricsPort: number;
  close(): Promise<void>;
}

export async function startOpsListeners(o: OpsListenersOptions): Promise<OpsListeners> {
  const health = await startHealthServer(o);
  try {
    const metrics = await startMetricsServer(o);
    return {
      healthPort: health.port,
      metricsPort: metrics.port,
      close: async () => {
        await metrics.close();
        await health.close();
      },
    };
  } catch (err) {
    await health.close();
    throw err;
  }
}

const quietLogger = (log: Logger) => log.child({}, { level: 'warn' });

async function startHealthServer(o: OpsListenersOptions): Promise<RunningServer> {
  const app = Fastify({ loggerInstance: quietLogger(o.log), requestTimeout: 10_000, http: SLOW_CLIENT_LIMITS });
  app.get('/healthz', async () => 'ok');
  app.get('/readyz', async (_req, reply) => {
    const why = o.notReady();
    return why === undefined ? 'ok' : reply.code(503).send(`not ready: ${why}\n`);
  });
  return { port: await listen(app, o.host, o.config.health.port), close: () => app.close() };
}

/** What each refusal answers; `error` is not the caller's fault, and says so. */
const REFUSALS: Record<
  Exclude<Verdict['result'], 'allowed'>,
  { status: number; headers: Record<string, string>; body: (v: Verdict) => string }
> = {
  unauthenticated: {
    status: 401,
    headers: { 'www-authenticate': 'Bearer realm="veneer-node-watcher"' },
    body: () => 'Unauthorized: send a bearer token the Kubernetes API accepts (a ServiceAccount token)\n',
  },
  forbidden: {
    status: 403,
    headers: {},
    body: (v) =>
      `Forbidden: ${'user' in v ? JSON.stringify(v.user) : 'the user'} may not get ${METRICS_PATH} (bind it to the metrics-reader ClusterRole)\n`,
  },
  throttled: {
    status: 429,
    headers: { 'retry-after': '1' },
    body: () => 'Too Many Requests: too many unknown tokens to check at once\n',
  },
  error: {
    status: 503,
    headers: { 'retry-after': '5' },
    body: () => 'Service Unavailable: the Kubernetes API could not check the token\n',
  },
};

async function startMetricsServer(o: OpsListenersOptions): Promise<RunningServer> {
  const { secure, port, authCacheTTLMs } = o.config.metrics;
  if (secure && !o.tls) throw new Error('metrics.secure needs the serving certificate');
  const common = { loggerInstance: quietLogger(o.log), requestTimeout: 10_000, exposeHeadRoutes: false };
  const app = (secure && o.tls
    ? Fastify({ ...common, https: { ...secureContextOptions(o.tls.keyPair), ...SLOW_CLIENT_LIMITS } })
    : Fastify({ ...common, http: SLOW_CLIENT_LIMITS })) as unknown as FastifyInstance;
  const auth = secure
    ? new MetricsAuth({ reviews: accessReviews(o.client), allowTTLMs: authCacheTTLMs, log: o.log })
    : undefined;
  const authorize = async (req: FastifyRequest, reply: FastifyReply) => {
    const verdict = await auth!.check(req.headers.authorization);
    o.metrics.metricsAuth.inc({ result: verdict.result });
    if (verdict.result === 'allowed') return;
    o.log.debug(
      { result: verdict.result, ...('user' in verdict ? { user: verdict.user } : {}) },
      'metrics scrape refused',
    );
    const refusal = REFUSALS[verdict.result];
    return reply.code(refusal.status).headers(refusal.headers).send(refusal.body(verdict));
  };
  app.get(METRICS_PATH, auth ? { onRequest: authorize } : {}, async (_req, reply) => {
    reply.header('content-type', o.metrics.registry.contentType);
    return o.metrics.registry.metrics();
  });
  const bound = await listen(app, o.host, port);
  const detach = secure ? o.tls?.attach(app.server as unknown as ReloadTarget) : undefined;
  return {
    port: bound,
    close: async () => {
      detach?.();
      await app.close();
    },
  };
}

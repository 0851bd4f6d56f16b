// The admission webhooks' HTTPS listener. Metrics and probes have their own (server/ops.ts).
import Fastify, { type FastifyReply, type FastifyRequest } from 'fastify';
import type { Logger } from 'pino';
import { parseDuration } from '../config/duration.ts';
import type { Metrics } from '../metrics.ts';
import { mutate, type MutateDeps } from './mutate.ts';
import { type AdmissionResponse, allow, parseReview } from './review.ts';
import { listen, type RunningServer, SLOW_CLIENT_LIMITS } from '../server/listener.ts';
import { type CertificateReloader, type ReloadTarget, secureContextOptions } from '../server/tls.ts';

/**
 * An UPDATE review carries the object twice; the apiserver accepts request bodies up to
 * 3 MiB, so two full objects and the envelope fit in 7 MiB (controller-runtime's limit too).
 */
const BODY_LIMIT_BYTES = 7 * 1024 * 1024;

/**
 * Reviews being read or answered at once, and the bytes their bodies declare: past either, a new
 * one is answered 429 before its body is read (the apiserver fails open on it, failurePolicy
 * Ignore, and the reconciler records the node). A review is answered within a millisecond, so a
 * full house is a flood, a storm or forged requests; and a 7 MiB body, parsed, is some 30 MiB of
 * heap (test/apiserver/webhook-flood.test.ts), so the byte budget keeps a flood of the largest
 * well under the pod's memory limit, beside caches of 100,000 nodes. One review is always taken,
 * whatever its size: alone it fits.
 */
export const MAX_IN_FLIGHT = 64;
const MAX_IN_FLIGHT_BYTES = 32 * 1024 * 1024;

interface WebhookServerOptions {
  host: string;
  port: number;
  deadlineMs: number;
  tls: CertificateReloader;
  mutate: MutateDeps;
  metrics: Metrics;
  log: Logger;
}

function deadlineFor(req: FastifyRequest, receivedAt: number, deadlineMs: number): number {
  // The apiserver says how long it will wait (?timeout=10s); answer well inside it.
  const timeout = parseDuration(String((req.query as { timeout?: string }).timeout ?? ''));
  return receivedAt + (timeout !== undefined ? Math.min(deadlineMs, timeout * 0.8) : deadlineMs);
}

export async function startWebhookServer(o: WebhookServerOptions): Promise<RunningServer> {
  const app = Fastify({
    https: { ...secureContextOptions(o.tls.keyPair), ...SLOW_CLIENT_LIMITS },
    // No Fastify logger: it builds a child logger for every request, a measured share of a
    // review's cost. A review is not news; refusals are logged below at debug.
    logger: false,
    bodyLimit: BODY_LIMIT_BYTES,
    // A client that dribbles headers or a body is cut off; reviews arrive in milliseconds.
    connectionTimeout: 15_000,
    requestTimeout: 10_000,
    keepAliveTimeout: 30_000,
    return503OnClosing: true,
  });
  // Only JSON is an AdmissionReview: anything else is the client's mistake (400), not 415.
  app.addContentTypeParser('*', (_req, _payload, done) => {
    done(Object.assign(new Error('content-type must be application/json'), { statusCode: 400 }), undefined);
  });
  // Label children are looked up once: prom-client hashes the label set on every call otherwise.
  const requestCounters = new Map<string, { inc(): void }>();
  const countRequest = (webhook: string, operation: string, outcome: string, dryRun: boolean) => {
    const key = `${webhook} ${operation} ${outcome} ${dryRun}`;
    let counter = requestCounters.get(key);
    if (!counter) {
      counter = o.metrics.admissionRequests.labels({ webhook, operation, outcome, dry_run: String(dryRun) });
      requestCounters.set(key, counter);
    }
    counter.inc();
  };
  const taken = { reviews: 0, bytes: 0 };
  app.addHook('onRequest', (req, reply, done) => {
    // A body without a length is taken as the largest there may be.
    const bytes = Number(req.headers['content-length']) || BODY_LIMIT_BYTES;
    if (taken.reviews > 0 && (taken.reviews >= MAX_IN_FLIGHT || taken.bytes + bytes > MAX_IN_FLIGHT_BYTES)) {
      countRequest(webhookOf(req), 'unknown', 'throttled', false);
      reply.code(429).header('retry-after', '1').send({
        error: 'Too Many Requests',
        message: 'too many reviews in flight; the node is admitted without a record',
      });
      return;
    }
    taken.reviews++;
    taken.bytes += bytes;
    // Released however the exchange ends: answered, refused, or the client gone.
    reply.raw.once('close', () => {
      taken.reviews--;
      taken.bytes -= bytes;
    });
    done();
  });
  app.setErrorHandler((err: { statusCode?: number; message: string }, req, reply) => {
    const status = err.statusCode && err.statusCode >= 400 && err.statusCode < 500 ? err.statusCode : 400;
    countRequest(webhookOf(req), 'unknown', status === 413 ? 'too_large' : 'invalid', false);
    o.log.debug({ status, err: err.message }, 'request refused');
    reply.code(status).send({ error: status === 413 ? 'Payload Too Large' : 'Bad Request', message: err.message });
  });

  const handle = (name: 'mutate') => {
    const duration = o.metrics.admissionDuration.labels({ webhook: name });
    const inFlight = o.metrics.admissionInFlight.labels({ webhook: name });
    return async (req: FastifyRequest, reply: FastifyReply) => {
      const receivedAt = Date.now();
      const end = duration.startTimer();
      inFlight.inc();
      try {
        const parsed = parseReview(req.body);
        if ('error' in parsed) {
          countRequest(name, 'unknown', 'invalid', false);
          return reply.code(400).send({ error: 'Bad Request', message: parsed.error });
        }
        const { request } = parsed.review;
        const dryRun = request.dryRun === true;
        let answer: AdmissionResponse;
        let outcome: string;
        try {
          const result = mutate(parsed.review, o.mutate, deadlineFor(req, receivedAt, o.deadlineMs));
          ({ answer, outcome } = result);
          if (result.detail) o.log.debug({ node: request.name, outcome, detail: result.detail }, 'mutate');
        } catch (err) {
          // Never block a node: an internal error allows it unchanged.
          o.log.error({ err }, `${name} webhook failed internally; allowing without a change`);
          o.metrics.labelingErrors.inc({ error_type: 'webhook_internal' });
          answer = allow(request.uid);
          outcome = 'error';
        }
        countRequest(name, operationLabel(request.operation), outcome, dryRun);
        return reply.send(answer);
      } finally {
        inFlight.dec();
        end();
      }
    };
  };
  app.post('/mutate-node', handle('mutate'));
  const port = await listen(app, o.host, o.port);
  const detach = o.tls.attach(app.server as unknown as ReloadTarget);
  return {
    port,
    close: async () => {
      detach();
      // close() ends idle keep-alive connections and waits for reviews in flight, which take
      // milliseconds. A connection opened but never used (the apiserver dials spares) counts as
      // busy and would hold shutdown until connectionTimeout: whatever is left after the drain
      // period is cut.
      const cut = setTimeout(() => app.server.closeAllConnections(), DRAIN_MS);
      try {
        await app.close();
      } finally {
        clearTimeout(cut);
      }
    },
  };
}

const DRAIN_MS = 3_000;

const OPERATIONS = new Set(['CREATE', 'UPDATE', 'DELETE', 'CONNECT']);

/** The operation comes from the request body: only known values may become a label value. */
function operationLabel(operation: string): string {
  return OPERATIONS.has(operation) ? operation : 'other';
}

function webhookOf(req: FastifyRequest): string {
  return req.url.startsWith('/mutate') ? 'mutate' : 'unknown';
}

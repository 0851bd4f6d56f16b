// Lists and watches read as raw bytes. Lists go over the KubeConfig's shared HTTP/2
// connection; each watch gets an HTTP/1.1 connection of its own (connections.ts says why).
//
// @kubernetes/client-node's Watch goes through fetch, a web stream and readline, and parses
// every event into an object before anyone may look at it. At kubelet heartbeat rates that
// parse is most of the watcher's CPU (an EKS node is ~20 KB as served, its metadata ~7 KB),
// and a consumer that falls behind is cut by the apiserver. Here each event's bytes are handed
// over as they arrive, so that the caller can skip events it already knows the answer to.
import * as k8s from '@kubernetes/client-node';
import { request } from 'undici';
import { request as httpsRequest } from 'node:https';
import { watchAgent } from './connections.ts';

/** Metadata only: labels, annotations, owners and timestamps, without spec and status. */
export const PARTIAL_METADATA = 'application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1';
export const PARTIAL_METADATA_LIST = 'application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1';

export interface StreamRequest {
  path: string;
  query: Record<string, string | number | boolean | undefined>;
  accept?: string;
  signal: AbortSignal;
}

/** A non-200 answer; its statusCode is what the reflector reads (410: relist). */
class HttpError extends Error {
  readonly statusCode: number;
  constructor(statusCode: number, message: string) {
    super(message);
    this.statusCode = statusCode;
  }
}

async function prepare(kc: k8s.KubeConfig, req: StreamRequest) {
  const cluster = kc.getCurrentCluster();
  if (!cluster) throw new Error('no current cluster in the kubeconfig');
  const url = new URL(cluster.server + req.path);
  for (const [k, v] of Object.entries(req.query)) if (v !== undefined) url.searchParams.set(k, String(v));
  // Authentication and the shared dispatcher (connections.ts) come from the client itself.
  const ctx = new k8s.RequestContext(url.toString(), k8s.HttpMethod.GET);
  await kc.applySecurityAuthentication(ctx);
  return { url, headers: { ...ctx.getHeaders(), accept: req.accept ?? 'application/json' }, dispatcher: ctx.getDispatcher() };
}

type Prepared = Awaited<ReturnType<typeof prepare>>;

async function get({ url, headers, dispatcher }: Prepared, req: StreamRequest): Promise<AsyncIterable<Buffer> & { json(): Promise<unknown> }> {
  const res = await request(url, { method: 'GET', headers, dispatcher: dispatcher as never, signal: req.signal });
  if (res.statusCode !== 200) {
    const text = await res.body.text().catch(() => '');
    throw new HttpError(res.statusCode, `${res.statusCode} ${text.slice(0, 300)}`);
  }
  return res.body;
}

/** A watch on a connection of its own (connections.ts says why), or the shared one behind a proxy. */
async function openWatch(kc: k8s.KubeConfig, req: StreamRequest): Promise<AsyncIterable<Buffer>> {
  const prepared = await prepare(kc, req);
  const { url, headers } = prepared;
  const agent = watchAgent(prepared.dispatcher);
  if (!agent || url.protocol !== 'https:') return get(prepared, req);
  return new Promise((resolve, reject) => {
    const r = httpsRequest(url, { method: 'GET', headers, agent, signal: req.signal }, (res) => {
      if (res.statusCode === 200) return resolve(res);
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (c: string) => (text += c));
      res.on('end', () => reject(new HttpError(res.statusCode ?? 0, `${res.statusCode} ${text.slice(0, 300)}`)));
      res.on('error', reject);
    });
    r.on('error', reject);
    r.end();
  });
}

/** GETs `path` and returns the parsed JSON body (a list page). */
export async function getJson<T>(kc: k8s.KubeConfig, req: StreamRequest): Promise<T> {
  return (await (await get(await prepare(kc, req), req)).json()) as T;
}

/**
 * Streams a watch, calling `onLine` with each event's JSON bytes as they arrive (a view valid only
 * during the call: decode what you keep). Resolves when the server ends the watch; rejects on a
 * transport error, on abort (with the abort's reason), or with a TimeoutError when nothing
 * arrives for `inactivityMs`. Plain 'data' events and a coarse inactivity check keep the cost per
 * event low: at kubelet heartbeat rates a promise and a timer per chunk showed in profiles.
 */
export async function streamLines(kc: k8s.KubeConfig, req: StreamRequest & { inactivityMs: number }, onLine: (line: Buffer) => void): Promise<void> {
  const inactivity = new AbortController();
  const signal = AbortSignal.any([req.signal, inactivity.signal]);
  let lastData = Date.now();
  const check = setInterval(() => {
    if (Date.now() - lastData >= req.inactivityMs) inactivity.abort(new DOMException('no watch event within the watchdog period', 'TimeoutError'));
  }, Math.max(10, Math.min(1000, req.inactivityMs / 4)));
  check.unref();
  try {
    const body = (await openWatch(kc, { ...req, signal })) as unknown as NodeJS.ReadableStream & { destroy(err?: unknown): void };
    await new Promise<void>((resolve, reject) => {
      let rest: Buffer | undefined;
      let ended = false;
      const onAbort = () => body.destroy(signal.reason);
      signal.addEventListener('abort', onAbort, { once: true });
      const settle = (err?: unknown) => {
        signal.removeEventListener('abort', onAbort);
        if (signal.aborted) reject(signal.reason);
        else if (err) reject(err);
        else if (!ended) reject(new Error('the watch connection closed before the response ended'));
        else resolve();
      };
      body.on('data', (chunk: Buffer) => {
        lastData = Date.now();
        const data = rest ? Buffer.concat([rest, chunk]) : chunk;
        let start = 0;
        for (let nl = data.indexOf(10); nl !== -1; nl = data.indexOf(10, start)) {
          if (nl > start) onLine(data.subarray(start, nl));
          start = nl + 1;
        }
        rest = start < data.length ? data.subarray(start) : undefined;
      });
      body.once('end', () => (ended = true));
      body.once('error', settle);
      body.once('close', () => settle());
    });
  } catch (err) {
    // An abort surfaces as the reason it was given, so callers can tell a watchdog from a stop.
    if (signal.aborted) throw signal.reason;
    throw err;
  } finally {
    clearInterval(check);
  }
}

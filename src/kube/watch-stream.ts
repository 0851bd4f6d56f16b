// A watch (or list) request on the KubeConfig's shared connection, read as raw lines.
//
// @kubernetes/client-node's Watch goes through fetch, a web stream and readline, and parses
// every event into an object before anyone may look at it. At kubelet heartbeat rates that
// parse is most of the watcher's CPU (an EKS node is ~20 KB as served, its metadata ~7 KB),
// and a consumer that falls behind is cut by the apiserver. Here the body is read as it
// arrives and each line handed over as a string, so that the caller can skip events it
// already knows the answer to.
import * as k8s from '@kubernetes/client-node';
import { request } from 'undici';

/** Metadata only: labels, annotations, owners and timestamps, without spec and status. */
export const PARTIAL_METADATA = 'application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1';
export const PARTIAL_METADATA_LIST = 'application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1';

export interface StreamRequest {
  path: string;
  query: Record<string, string | number | boolean | undefined>;
  accept?: string;
  signal: AbortSignal;
}

export class HttpError extends Error {
  readonly statusCode: number;
  constructor(statusCode: number, message: string) {
    super(message);
    this.statusCode = statusCode;
  }
}

async function open(kc: k8s.KubeConfig, req: StreamRequest) {
  const cluster = kc.getCurrentCluster();
  if (!cluster) throw new Error('no current cluster in the kubeconfig');
  const url = new URL(cluster.server + req.path);
  for (const [k, v] of Object.entries(req.query)) if (v !== undefined) url.searchParams.set(k, String(v));
  // Authentication and the shared dispatcher (connections.ts) come from the client itself.
  const ctx = new k8s.RequestContext(url.toString(), k8s.HttpMethod.GET);
  await kc.applySecurityAuthentication(ctx);
  const headers = { ...ctx.getHeaders(), accept: req.accept ?? 'application/json' };
  const res = await request(url, { method: 'GET', headers, dispatcher: ctx.getDispatcher() as never, signal: req.signal });
  if (res.statusCode !== 200) {
    const text = await res.body.text().catch(() => '');
    throw new HttpError(res.statusCode, `${res.statusCode} ${text.slice(0, 300)}`);
  }
  return res.body;
}

/** GETs `path` and returns the parsed JSON body (a list page). */
export async function getJson<T>(kc: k8s.KubeConfig, req: StreamRequest): Promise<T> {
  return (await (await open(kc, req)).json()) as T;
}

/**
 * Streams a watch, calling `onLine` with each event's JSON text as it arrives. Resolves when the
 * server ends the watch; rejects on a transport error, on abort, or (TimeoutError) when nothing
 * arrives for `inactivityMs`.
 */
export async function streamLines(kc: k8s.KubeConfig, req: StreamRequest & { inactivityMs: number }, onLine: (line: string) => void): Promise<void> {
  const inactivity = new AbortController();
  const signal = AbortSignal.any([req.signal, inactivity.signal]);
  let timer: NodeJS.Timeout | undefined;
  const arm = () => {
    clearTimeout(timer);
    timer = setTimeout(() => inactivity.abort(new DOMException('no watch event within the watchdog period', 'TimeoutError')), req.inactivityMs);
    timer.unref();
  };
  arm();
  try {
    const body = await open(kc, { ...req, signal });
    let rest: Buffer | undefined;
    for await (const chunk of body as AsyncIterable<Buffer>) {
      arm();
      const data = rest ? Buffer.concat([rest, chunk]) : chunk;
      let start = 0;
      for (let nl = data.indexOf(10); nl !== -1; nl = data.indexOf(10, start)) {
        if (nl > start) onLine(data.toString('utf8', start, nl));
        start = nl + 1;
      }
      rest = start < data.length ? data.subarray(start) : undefined;
    }
  } catch (err) {
    // An abort surfaces as the reason it was given, so callers can tell a watchdog from a stop.
    if (signal.aborted) throw signal.reason;
    throw err;
  } finally {
    clearTimeout(timer);
  }
}

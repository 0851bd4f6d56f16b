// The watcher's own client for the few things `serve` asks of the apiserver (list pages, watch
// streams, merge patches, Leases, and access reviews) and for what `explain` and `report` read
// live, so that they read the cluster `serve` would.
//
// The official JavaScript client's configuration module imports all ~2,700 generated model
// classes: 1.2-1.6 s and about 60 MB of RSS before any work, for a process whose whole live heap
// is a few tens of MB. It is loaded only for a kubeconfig whose credentials come from a plugin
// (kubeconfig.ts); the tests keep it.
//
// API calls share one undici dispatcher, so they ride one HTTP/2 connection, as in client-go;
// if it goes silent (a NAT or load balancer dropping its state), all of them stall: like
// client-go's ReadIdleTimeout, an HTTP/2 PING every 10 s finds out, and undici tears the session
// down when a PING goes unanswered for a whole interval. Watches get HTTP/1.1 connections of
// their own, read by Node's own HTTP client: on one HTTP/2 connection the apiserver writes every
// stream from one loop, so a burst of big node events on one watch, or a large list or patch
// response, held up the others until the apiserver cut them for falling behind; with a
// connection each, as a plain HTTP/1.1 client has, it never did. Node's native parser also costs
// a fraction of undici's per event. (The PING does not guard these: the reflector's watchdog
// restarts a watch that delivers nothing, bookmarks included.)
import type { IncomingMessage } from 'node:http';
import { Agent as HttpsAgent, request as httpsRequest } from 'node:https';
import { Agent, ProxyAgent, request, type Dispatcher } from 'undici';

/**
 * A dead connection is noticed within two intervals. Shorter than client-go's 30 s read-idle
 * plus 15 s ping timeout, so that a stall costs seconds, not a minute; long enough that a busy
 * event loop does not look like a dead peer.
 */
export const HTTP2_PING_INTERVAL_MS = 10_000;
/**
 * client-go's HTTP/2 flow-control windows (4 MB per stream, 1 GB per connection) instead of
 * undici's (256 KB and 512 KB, shared by every call): a window that filled during a burst of
 * 20 KB node events stopped the apiserver's sender. undici 8.13 reads the stream window from
 * `h2Options.initialWindowSize`, not from `h2Options.settings.initialWindowSize` as its typings say.
 */
export const H2_OPTIONS = {
  pingInterval: HTTP2_PING_INTERVAL_MS,
  connectionWindowSize: 1 << 30,
  initialWindowSize: 4 << 20,
};
/**
 * The deadline of every API call. A call on a connection that went silent (no FIN) would hang
 * for good, and with it the work-queue key or the relist waiting on it; the PING catches a dead
 * connection first, this is the backstop. Just above the apiserver's own 60 s request timeout: a
 * call still running then can only be on a dead connection. Shorter would abort writes that are
 * merely slow, for example behind another admission webhook with a long timeoutSeconds.
 */
export const API_CALL_TIMEOUT_MS = 65_000;
/** A request may hold the old connections between choosing them and sending on them. */
const RETIRE_AFTER_MS = 30_000;

export interface TlsMaterial {
  ca?: Buffer;
  cert?: Buffer;
  key?: Buffer;
  rejectUnauthorized: boolean;
  servername?: string;
}

/** Where the apiserver is and who we are to it; each function is asked again for every request. */
export interface ClusterAccess {
  server: string;
  proxyUrl?: string;
  /** The same object for as long as the material stays the same (rotated files make a new one, and new connections). */
  tls(): TlsMaterial;
  /** The Authorization header's value, if any (may change: rotated tokens). */
  authorization(): Promise<string | undefined>;
}

/** An answer other than 2xx, with what the apiserver's Status said. */
export class ApiError extends Error {
  readonly statusCode: number;
  readonly reason: string | undefined;
  constructor(statusCode: number, body: string) {
    let status: { message?: string; reason?: string } = {};
    try {
      status = JSON.parse(body) as typeof status;
    } catch {
      // Not a Status: a proxy's page or nothing; its start is message enough.
    }
    super(`${statusCode} ${status.message ?? body.slice(0, 300)}`.trim());
    this.name = 'ApiError';
    this.statusCode = statusCode;
    this.reason = status.reason;
  }
}

export type Query = Record<string, string | number | boolean | undefined>;

export interface CallOptions {
  query?: Query;
  body?: unknown;
  contentType?: string;
  accept?: string;
  timeoutMs?: number;
}

interface Connections {
  tls: TlsMaterial;
  calls: Dispatcher;
  /** Absent behind a proxy or on plain HTTP: watches then share the calls' dispatcher. */
  watches: HttpsAgent | undefined;
}

export class KubeClient {
  readonly server: string;
  private readonly access: ClusterAccess;
  private current: Connections | undefined;
  private readonly retiring = new Set<Connections>();

  constructor(access: ClusterAccess) {
    this.access = access;
    this.server = access.server.replace(/\/+$/, '');
  }

  /** A JSON call; resolves with the decoded answer, rejects with an ApiError or the transport's error. */
  async call<T>(method: 'GET' | 'POST' | 'PUT' | 'PATCH' | 'DELETE', path: string, o: CallOptions = {}): Promise<T> {
    const { url, headers } = await this.prepare(path, o.query, o.accept);
    const body = o.body === undefined ? undefined : JSON.stringify(o.body);
    if (body !== undefined) headers['content-type'] = o.contentType ?? 'application/json';
    const res = await request(url, {
      method,
      headers,
      body,
      dispatcher: this.connections().calls,
      signal: AbortSignal.timeout(o.timeoutMs ?? API_CALL_TIMEOUT_MS),
    });
    const text = await res.body.text();
    if (res.statusCode < 200 || res.statusCode > 299) throw new ApiError(res.statusCode, text);
    return (text ? JSON.parse(text) : undefined) as T;
  }

  /** A streamed GET (a watch): the response once its status is 200, on a connection of its own. */
  async stream(
    path: string,
    query: Query,
    accept: string,
    signal: AbortSignal,
  ): Promise<NodeJS.ReadableStream & { destroy(err?: unknown): void }> {
    const { url, headers } = await this.prepare(path, query, accept);
    const { watches, calls } = this.connections();
    if (!watches) {
      const res = await request(url, { method: 'GET', headers, dispatcher: calls, signal });
      if (res.statusCode === 200) return res.body;
      throw new ApiError(res.statusCode, await res.body.text().catch(() => ''));
    }
    return new Promise((resolve, reject) => {
      const req = httpsRequest(url, { method: 'GET', headers, agent: watches, signal }, (res: IncomingMessage) => {
        if (res.statusCode === 200) return resolve(res);
        let text = '';
        res.setEncoding('utf8');
        res.on('data', (chunk: string) => (text += chunk));
        res.on('end', () => reject(new ApiError(res.statusCode ?? 0, text)));
        res.on('error', reject);
      });
      req.on('error', reject);
      req.end();
    });
  }

  /** Closes every connection; calls still running fail. */
  async close(): Promise<void> {
    const all = [...this.retiring, ...(this.current ? [this.current] : [])];
    this.current = undefined;
    this.retiring.clear();
    await Promise.all(
      all.map(async (c) => {
        c.watches?.destroy();
        await c.calls.destroy().catch(() => {});
      }),
    );
  }

  private async prepare(path: string, query: Query | undefined, accept = 'application/json') {
    const url = new URL(this.server + path);
    for (const [k, v] of Object.entries(query ?? {})) if (v !== undefined) url.searchParams.set(k, String(v));
    const headers: Record<string, string> = { accept };
    const authorization = await this.access.authorization();
    if (authorization) headers.authorization = authorization;
    return { url, headers };
  }

  /** The connections for the current TLS material; a change (a rotated certificate) retires the old ones gracefully. */
  private connections(): Connections {
    const tls = this.access.tls();
    if (this.current?.tls === tls) return this.current;
    const connect = { ...tls };
    const https = this.server.startsWith('https:');
    const next: Connections = {
      tls,
      calls: this.access.proxyUrl
        ? new ProxyAgent({ uri: this.access.proxyUrl, requestTls: connect })
        : new Agent({ connect, h2Options: H2_OPTIONS }),
      watches: https && !this.access.proxyUrl ? new HttpsAgent({ ...connect, keepAlive: true }) : undefined,
    };
    const old = this.current;
    this.current = next;
    if (old) {
      this.retiring.add(old);
      setTimeout(() => {
        this.retiring.delete(old);
        old.watches?.destroy();
        void old.calls.close().catch(() => {});
      }, RETIRE_AFTER_MS).unref();
    }
    return next;
  }
}

// One connection for all of a KubeConfig's API calls and watches, with a health check.
//
// @kubernetes/client-node 2.0.1 builds a new undici Agent for every request (its https.Agent
// path is cached, the undici one is not), so each patch, list page and lease renewal opens a
// fresh TLS connection, and the Agents with their sockets linger until GC. A profiling run
// counted 2,001 TLS sockets for 2,000 calls against 1 with one shared Agent; the test in
// reflector.test.ts counts 20 connections for 20 calls against 1.
//
// A shared Agent speaks HTTP/2 to the apiserver, so every stream rides one connection, as in
// client-go. If that connection goes silent (a NAT or load balancer dropping its state), all of
// them stall: like client-go's ReadIdleTimeout, an HTTP/2 PING every 10 s finds out, and
// undici tears the session down when a PING goes unanswered for a whole interval.
import { createHash } from 'node:crypto';
import type * as k8s from '@kubernetes/client-node';
import { Agent as HttpsAgent } from 'node:https';
import { Agent } from 'undici';

/**
 * A dead connection is noticed within two intervals. Shorter than client-go's 30 s read-idle
 * plus 15 s ping timeout, so that a stall costs seconds, not a minute; long enough that a busy
 * event loop does not look like a dead peer.
 */
export const HTTP2_PING_INTERVAL_MS = 10_000;
/**
 * client-go's HTTP/2 flow-control windows (4 MB per stream, 1 GB per connection) instead of
 * undici's (256 KB and 512 KB, shared by every watch and call): a window that filled during a
 * burst of 20 KB node events stopped the apiserver's sender, and the apiserver cut the watch
 * (apiserver_terminated_watchers_total). The stream window still bounds what one watch buffers.
 * undici 8.13 reads the stream window from `h2Options.initialWindowSize`, not from
 * `h2Options.settings.initialWindowSize` as its typings say.
 */
const H2_OPTIONS = { pingInterval: HTTP2_PING_INTERVAL_MS, connectionWindowSize: 1 << 30, initialWindowSize: 4 << 20 };
/**
 * Watches get HTTP/1.1 connections of their own, read by Node's own HTTP client. On one HTTP/2
 * connection the apiserver writes every stream from one loop, so a burst of big node events on
 * one watch, or a large list or patch response, held up the others until the apiserver cut them
 * for falling behind; with a connection each, as a plain HTTP/1.1 client has, it never did. Node's
 * native parser also costs a fraction of undici's per event. (The HTTP/2 PING does not guard
 * these connections: the watchdog restarts a watch that delivers nothing, bookmarks included.)
 */
const WATCHES = new WeakMap<object, HttpsAgent>();

/** The agent for watches that goes with the dispatcher API calls use; none behind a proxy. */
export function watchAgent(calls: unknown): HttpsAgent | undefined {
  return calls ? WATCHES.get(calls) : undefined;
}

/** A request may hold the old dispatcher between choosing it and sending on it. */
const RETIRE_AFTER_MS = 30_000;
const SHARED = Symbol('veneer.sharedConnections');

type Cluster = k8s.Cluster | null;
type AgentOptions = Parameters<k8s.KubeConfig['createDispatcherOptions']>[1];
interface Dispatcher { close(): Promise<void> }
interface DispatcherFactory { createDispatcher(cluster: Cluster, agentOptions: AgentOptions): Dispatcher | undefined }

/**
 * Makes `kc` reuse one dispatcher for as long as the TLS material it is built from stays the
 * same; when that changes (a rotated client certificate), the old one is closed gracefully a
 * little later. Proxied clusters keep the client's own dispatcher, shared the same way. Calling
 * it again on the same KubeConfig changes nothing.
 */
export function shareConnections(kc: k8s.KubeConfig): k8s.KubeConfig {
  const factory = kc as unknown as DispatcherFactory & { [SHARED]?: true };
  if (factory[SHARED]) return kc;
  factory[SHARED] = true;
  const clientDispatcher = factory.createDispatcher.bind(kc);
  let current: { key: string; dispatcher: Dispatcher | undefined } | undefined;
  factory.createDispatcher = (cluster, agentOptions) => {
    const options = kc.createDispatcherOptions(cluster, agentOptions);
    const key = createHash('sha256').update(JSON.stringify([cluster?.name, cluster?.server, options])).digest('base64');
    if (current?.key !== key) {
      const old = current?.dispatcher;
      let dispatcher: Dispatcher | undefined;
      if (options.type === 'agent') {
        dispatcher = new Agent({ connect: options.connect, h2Options: H2_OPTIONS });
        WATCHES.set(dispatcher, new HttpsAgent({ ...options.connect, keepAlive: true }));
      } else {
        dispatcher = clientDispatcher(cluster, agentOptions);
      }
      current = { key, dispatcher };
      if (old) {
        setTimeout(() => {
          void old.close().catch(() => {});
          WATCHES.get(old)?.destroy();
        }, RETIRE_AFTER_MS).unref();
      }
    }
    return current.dispatcher;
  };
  return kc;
}

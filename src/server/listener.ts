// What the watcher's HTTP listeners (the webhooks', the probes', the metrics') have in common.
import { type AddressInfo, createServer } from 'node:net';
import type { Logger } from 'pino';
import type { Runnable } from '../kube/manager.ts';

export interface RunningServer {
  port: number;
  /** Stops accepting, lets in-flight requests finish, then resolves. */
  close(): Promise<void>;
}

/** A listener as a part of the Manager: bound at start (a port in use stops start-up), closed at stop. */
export function listenerRunnable<T extends { close(): Promise<void> }>(
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

/**
 * Node checks for expired requests only every connectionsCheckingInterval (30 s by default)
 * and waits 60 s for headers: a client dribbling bytes could hold a connection for 90 s.
 * Reviews and scrapes arrive whole in milliseconds, so headers get 5 s, the whole request 10 s,
 * checked every second.
 */
export const SLOW_CLIENT_LIMITS = { headersTimeout: 5_000, requestTimeout: 10_000, connectionsCheckingInterval: 1_000 };

interface Listenable {
  listen(options: { host: string; port: number }): Promise<unknown>;
  server: { address(): unknown };
}

/** Binds `app` and says the port it got (port 0: any free one). */
export async function listen(app: Listenable, host: string, port: number): Promise<number> {
  await app.listen({ host, port });
  return (app.server.address() as AddressInfo).port;
}

/** Why `::` could not be bound: a kernel built or booted without IPv6. */
const NO_IPV6 = new Set(['EAFNOSUPPORT', 'EADDRNOTAVAIL']);

type Bind = (host: string) => Promise<void>;

/** Binds an ephemeral port on `host` and lets it go again. */
const probe: Bind = (host) =>
  new Promise((resolve, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen({ host, port: 0 }, () => server.close(() => resolve()));
  });

/**
 * The address every listener binds: `::`, which Node binds dual-stack (libuv clears IPV6_V6ONLY,
 * whatever net.ipv6.bindv6only says), so the kubelet, the apiserver and Prometheus reach the pod
 * at its IPv6 address on an IPv6 cluster and at its IPv4 one elsewhere. A kernel without IPv6
 * refuses `::`: then 0.0.0.0, said once here rather than by each listener.
 */
export async function anyAddress(log: Pick<Logger, 'warn'>, bind: Bind = probe): Promise<string> {
  try {
    await bind('::');
    return '::';
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    if (code === undefined || !NO_IPV6.has(code)) throw err;
    log.warn({ code }, 'no IPv6 on this kernel: listening on 0.0.0.0 (IPv4 only)');
    return '0.0.0.0';
  }
}

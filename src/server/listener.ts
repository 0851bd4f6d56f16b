// What the watcher's HTTP listeners (the webhooks', the probes', the metrics') have in common.
import type { AddressInfo } from 'node:net';

export interface RunningServer {
  port: number;
  /** Stops accepting, lets in-flight requests finish, then resolves. */
  close(): Promise<void>;
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

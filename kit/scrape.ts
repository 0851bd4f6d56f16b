// A scrape of the watcher's secure /metrics as Prometheus makes it: HTTPS verified against the
// CA that issued the serving certificate, with a bearer token when one is given.
import { request } from 'node:https';
import { connect } from 'node:tls';

export interface ScrapeResult {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  body: string;
}

export interface ScrapeOptions {
  caPem: string;
  token?: string;
  /** Where the pod is (127.0.0.1 by default), and the name its certificate must carry. */
  host?: string;
  servername?: string;
  path?: string;
  method?: string;
}

export function scrape(port: number, o: ScrapeOptions): Promise<ScrapeResult> {
  return new Promise((resolve, reject) => {
    const req = request(
      {
        host: o.host ?? '127.0.0.1',
        port,
        ...(o.servername ? { servername: o.servername } : {}),
        path: o.path ?? '/metrics',
        method: o.method ?? 'GET',
        ca: o.caPem,
        // A new connection every time: each scrape is judged on its own, not on a kept-alive socket.
        agent: false,
        headers: o.token ? { authorization: `Bearer ${o.token}` } : {},
        timeout: 15_000,
      },
      (res) => {
        let body = '';
        res.setEncoding('utf8');
        res.on('data', (c: string) => (body += c));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body }));
      },
    );
    req.on('timeout', () => req.destroy(new Error(`scrape of ${port} timed out`)));
    req.on('error', reject);
    req.end();
  });
}

/** The TLS version a handshake settles on when the client offers at most `maxVersion`, or `refused: ...`. */
export function tlsHandshake(port: number, caPem: string, maxVersion: 'TLSv1.1' | 'TLSv1.2'): Promise<string> {
  return new Promise((resolve) => {
    const s = connect({ host: '127.0.0.1', port, ca: caPem, maxVersion, minVersion: 'TLSv1' }, () => {
      resolve(s.getProtocol() ?? 'unknown');
      s.end();
    });
    s.on('error', (e) => resolve(`refused: ${e.message}`));
  });
}

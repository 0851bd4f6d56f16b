// Webhook endpoints that fail the way real ones do: a process that accepts connections and
// never answers, one that answers garbage, one that presents a certificate the apiserver must
// refuse. Each counts the calls it gets, so a test can prove the apiserver really called it.
import { createServer as createHttpsServer, type Server as HttpsServer } from 'node:https';
import { createServer as createTcpServer, type Server as TcpServer, type Socket } from 'node:net';
import { readFileSync } from 'node:fs';
import type { KeyPair } from '../../kit/pki.ts';

export type Fault = 'hang' | 'garbage' | 'certificate';

/** Malformed answers, one per call in turn: none of them is a valid AdmissionReview response. */
interface Answer {
  status: number;
  body: string;
  contentType?: string;
}

const GARBAGE: ((uid: string) => Answer)[] = [
  () => ({ status: 200, body: 'this is not JSON' }),
  () => ({ status: 200, body: '{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","response":{"uid":' }),
  () => ({
    status: 200,
    body: JSON.stringify({
      apiVersion: 'admission.k8s.io/v1',
      kind: 'AdmissionReview',
      response: { uid: 'not-the-request-uid', allowed: true },
    }),
  }),
  (uid) => ({
    status: 200,
    body: JSON.stringify({
      apiVersion: 'admission.k8s.io/v1',
      kind: 'AdmissionReview',
      response: { uid, allowed: true, patchType: 'JSONPatch', patch: '%%% not base64 %%%' },
    }),
  }),
  (uid) => ({
    status: 200,
    body: JSON.stringify({
      apiVersion: 'admission.k8s.io/v1',
      kind: 'AdmissionReview',
      response: { uid, allowed: true, patchType: 'JSONPatch', patch: Buffer.from('{"op":"add"}').toString('base64') },
    }),
  }),
  () => ({ status: 500, body: 'internal error' }),
  () => ({ status: 200, body: '<html>a proxy error page</html>', contentType: 'text/html' }),
];

/**
 * Behind a certificate the apiserver must refuse, a well-formed answer with a record no one
 * else writes: if it ever reaches a node, the apiserver trusted what it should not have.
 */
export const UNTRUSTED_VALUE = 'untrusted';
const UNTRUSTED_RECORD = (uid: string): Answer => ({
  status: 200,
  body: JSON.stringify({
    apiVersion: 'admission.k8s.io/v1',
    kind: 'AdmissionReview',
    response: {
      uid,
      allowed: true,
      patchType: 'JSONPatch',
      patch: Buffer.from(
        JSON.stringify([{ op: 'add', path: '/metadata/labels/veneer.io~1overlay-influenced', value: UNTRUSTED_VALUE }]),
      ).toString('base64'),
    },
  }),
});

export class FaultServer {
  calls = 0;
  readonly fault: Fault;
  private server: HttpsServer | TcpServer | undefined;
  private readonly sockets = new Set<Socket>();

  constructor(fault: Fault) {
    this.fault = fault;
  }

  /** `pair` is the certificate presented: for 'certificate' an expired or foreign one. */
  async listen(pair: KeyPair): Promise<number> {
    if (this.fault === 'hang') {
      this.server = createTcpServer(() => this.calls++);
    } else {
      const https = createHttpsServer(
        { cert: readFileSync(pair.certPath), key: readFileSync(pair.keyPath) },
        (req, res) => {
          let body = '';
          req.on('data', (c) => (body += c));
          req.on('end', () => {
            const uid = (() => {
              try {
                return JSON.parse(body).request.uid as string;
              } catch {
                return '';
              }
            })();
            const answer =
              this.fault === 'certificate' ? UNTRUSTED_RECORD(uid) : GARBAGE[this.calls++ % GARBAGE.length]!(uid);
            res.writeHead(answer.status, { 'content-type': answer.contentType ?? 'application/json' });
            res.end(answer.body);
          });
        },
      );
      // A refused certificate shows up here: the apiserver hung up during the handshake.
      https.on('tlsClientError', () => this.calls++);
      this.server = https;
    }
    this.server.on('connection', (s: Socket) => {
      this.sockets.add(s);
      s.on('close', () => this.sockets.delete(s));
    });
    await new Promise<void>((r) => this.server!.listen(0, '127.0.0.1', r));
    return (this.server.address() as { port: number }).port;
  }

  async close(): Promise<void> {
    for (const s of this.sockets) s.destroy();
    await new Promise<void>((r) => (this.server ? this.server.close(() => r()) : r()));
  }
}

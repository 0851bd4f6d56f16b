// An AdmissionReview of a Node as the apiserver sends it, for the tests that call the webhook port
import { request } from 'node:https';
// themselves: forged, flooded or hostile requests, as anyone who reaches the port could send them.
export function nodeReview(
  uid: string,
  o: { name?: string; labels?: Record<string, string>; operation?: string } = {},
): string {
  return JSON.stringify({
    apiVersion: 'admission.k8s.io/v1',
    kind: 'AdmissionReview',
    request: {
      uid,
      kind: { group: '', version: 'v1', kind: 'Node' },
      operation: o.operation ?? 'CREATE',
      object: { metadata: { name: o.name ?? uid, labels: o.labels ?? {} } },
    },
  });
}

/** POSTs `body` to the webhook port as the apiserver does (HTTPS, verified against `caPem`), on a connection of its own. */
export function post(
  to: { host?: string; port: number; caPem: string },
  path: string,
  body: string | Buffer,
  contentType = 'application/json',
): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const req = request(
      {
        host: to.host ?? '127.0.0.1',
        port: to.port,
        path,
        method: 'POST',
        ca: to.caPem,
        agent: false,
        headers: { 'content-type': contentType },
      },
      (res) => {
        let data = '';
        res.on('data', (c) => (data += c));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, body: data }));
      },
    );
    req.on('error', reject);
    req.end(body);
  });
}

// The limit any webhook can reach: bare Fastify over the same TLS settings, answering every
// review with a constant body. argv: PORT CERT KEY BODY_FILE
import { readFileSync } from 'node:fs';
import Fastify from 'fastify';

const [port = '0', cert = '', key = '', bodyFile = ''] = process.argv.slice(2);
const template = readFileSync(bodyFile, 'utf8');
const app = Fastify({
  https: { cert: readFileSync(cert), key: readFileSync(key), minVersion: 'TLSv1.2' },
  bodyLimit: 7 * 1024 * 1024,
});
// The uid must be echoed for the apiserver to accept the answer; everything else is constant.
app.post('/*', async (req, reply) => {
  const uid = (req.body as { request?: { uid?: string } }).request?.uid ?? '';
  reply.header('content-type', 'application/json');
  return template.replace('"__UID__"', JSON.stringify(uid));
});
await app.listen({ host: '127.0.0.1', port: Number(port) });
process.on('SIGTERM', () => void app.close().then(() => process.exit(0)));

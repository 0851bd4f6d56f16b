import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t from 'tap';
import { loadKeyPair } from '../../src/server/tls.ts';
import { issueCert, makeCA } from '../../kit/pki.ts';

const dir = mkdtempSync(join(tmpdir(), 'veneer-tls-'));
const ca = await makeCA(join(dir, 'ca'), 'test-ca');
const a = await issueCert(ca, dir, 'a', { commonName: 'a', usage: 'server', ipAddresses: ['127.0.0.1'] });
const b = await issueCert(ca, dir, 'b', { commonName: 'b', usage: 'server', ipAddresses: ['127.0.0.1'] });

t.test('a valid pair loads with its expiry', async (t) => {
  const pair = loadKeyPair({ certFile: a.certPath, keyFile: a.keyPath });
  t.ok(pair.notAfter > Date.now() + 300 * 86_400_000);
  t.match(pair.fingerprint, /^[0-9a-f]{64}$/);
});

t.test('each problem is named, and the key never appears in a message', async (t) => {
  const garbage = join(dir, 'garbage.pem');
  writeFileSync(garbage, 'not pem');
  t.throws(
    () => loadKeyPair({ certFile: join(dir, 'nope.crt'), keyFile: a.keyPath }),
    /cannot read serving certificate .*nope.crt: ENOENT/,
  );
  t.throws(
    () => loadKeyPair({ certFile: a.certPath, keyFile: join(dir, 'nope.key') }),
    /cannot read serving key .*nope.key: ENOENT/,
  );
  t.throws(() => loadKeyPair({ certFile: garbage, keyFile: a.keyPath }), /garbage.pem is not a PEM certificate/);
  t.throws(() => loadKeyPair({ certFile: a.certPath, keyFile: garbage }), /garbage.pem is not a PEM private key/);
  t.throws(
    () => loadKeyPair({ certFile: a.certPath, keyFile: b.keyPath }),
    /b.key does not belong to the certificate in .*a.crt/,
  );
});

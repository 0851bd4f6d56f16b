// Real X.509 material for tests and local runs, made with the openssl CLI (Node can parse
// certificates but not issue them, and openssl is what operators use by hand anyway).
import { execFile } from 'node:child_process';
import { mkdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { promisify } from 'node:util';

const run = promisify(execFile);

export interface KeyPair {
  certPath: string;
  keyPath: string;
}

export interface IssueOptions {
  commonName: string;
  organizations?: string[];
  dnsNames?: string[];
  ipAddresses?: string[];
  usage: 'server' | 'client';
  days?: number;
}

async function openssl(args: string[]): Promise<string> {
  try {
    const { stdout } = await run('openssl', args, { maxBuffer: 1 << 20 });
    return stdout;
  } catch (err) {
    const e = err as NodeJS.ErrnoException & { stderr?: string };
    if (e.code === 'ENOENT') throw new Error('openssl is not installed (Debian: apt-get install openssl)');
    throw new Error(`openssl ${args[0]} failed: ${e.stderr ?? e.message}`);
  }
}

export async function makeCA(dir: string, commonName: string): Promise<KeyPair> {
  await mkdir(dir, { recursive: true });
  const pair = { certPath: join(dir, 'ca.crt'), keyPath: join(dir, 'ca.key') };
  await openssl([
    'req',
    '-x509',
    '-newkey',
    'ec',
    '-pkeyopt',
    'ec_paramgen_curve:P-256',
    '-nodes',
    '-keyout',
    pair.keyPath,
    '-out',
    pair.certPath,
    '-days',
    '3650',
    '-subj',
    `/CN=${commonName}`,
    '-addext',
    'basicConstraints=critical,CA:TRUE',
    '-addext',
    'keyUsage=critical,keyCertSign,cRLSign',
  ]);
  return pair;
}

function subject(cn: string, orgs: string[]): string {
  return `${orgs.map((o) => `/O=${o}`).join('')}/CN=${cn}`;
}

export async function issueCert(ca: KeyPair, dir: string, name: string, opts: IssueOptions): Promise<KeyPair> {
  await mkdir(dir, { recursive: true });
  const pair = { certPath: join(dir, `${name}.crt`), keyPath: join(dir, `${name}.key`) };
  const csrPath = join(dir, `${name}.csr`);
  const extPath = join(dir, `${name}.ext`);
  const sans = [...(opts.dnsNames ?? []).map((d) => `DNS:${d}`), ...(opts.ipAddresses ?? []).map((ip) => `IP:${ip}`)];
  const ext = [
    'basicConstraints=critical,CA:FALSE',
    'keyUsage=critical,digitalSignature,keyEncipherment',
    `extendedKeyUsage=${opts.usage === 'server' ? 'serverAuth' : 'clientAuth'}`,
    ...(sans.length > 0 ? [`subjectAltName=${sans.join(',')}`] : []),
  ];
  await writeFile(extPath, `${ext.join('\n')}\n`);
  await openssl([
    'req',
    '-newkey',
    'ec',
    '-pkeyopt',
    'ec_paramgen_curve:P-256',
    '-nodes',
    '-keyout',
    pair.keyPath,
    '-out',
    csrPath,
    '-subj',
    subject(opts.commonName, opts.organizations ?? []),
  ]);
  await openssl([
    'x509',
    '-req',
    '-in',
    csrPath,
    '-CA',
    ca.certPath,
    '-CAkey',
    ca.keyPath,
    '-CAcreateserial',
    '-out',
    pair.certPath,
    '-extfile',
    extPath,
    '-days',
    String(opts.days ?? 365),
  ]);
  return pair;
}

// A real etcd + kube-apiserver on loopback for the tests, the demo and the benchmarks. Every
// process it starts dies with the process that started it (setpriv --pdeathsig) and every
// directory it makes is removed on stop, on exit and on SIGINT/SIGTERM; directories left by a
// process that was SIGKILLed are swept by the next start.
import { generateKeyPairSync, randomBytes } from 'node:crypto';
import { existsSync, mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { request } from 'node:https';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import * as k8s from '@kubernetes/client-node';
import { KubeClient } from '../src/kube/client.ts';
import { kubeconfigAccess } from '../src/kube/kubeconfig.ts';
import { binary } from './binaries.ts';
import { issueCert, type KeyPair, makeCA } from './pki.ts';
import { freePort, httpGet, isAlive, ManagedProcess, sleep } from './process.ts';

export { freePort };
export { binary };

const scratchRoot = join(tmpdir(), 'veneer-control-plane');

export interface TokenUser {
  name: string;
  groups?: string[];
}

export interface ControlPlaneOptions {
  /** Users authenticated by bearer token, beside the built-in `admin` (system:masters). */
  users?: TokenUser[];
  /** An audit policy (YAML); the log is then readable with `auditEvents()`. */
  auditPolicy?: string;
  startTimeoutMs?: number;
  /** More kube-apiserver flags (for example a short --etcd-compaction-interval). */
  extraApiServerArgs?: string[];
  /** More etcd flags (for example a larger --quota-backend-bytes for 100,000 real-size nodes). */
  extraEtcdArgs?: string[];
  /** More environment for kube-apiserver (a GOMEMLIMIT, say). */
  apiServerEnv?: Record<string, string>;
  /**
   * Serve a real node (kit/node/) at this address of the test's network namespace: the apiserver
   * listens there too (pods reach it through the `kubernetes` Service, which the node's DNAT
   * stands in for kube-proxy for), authorizes the kubelet as a node, mounts ServiceAccount tokens
   * into pods, reaches the kubelet (logs, exec) at its InternalIP and a Service at its endpoints.
   */
  nodeAddress?: string;
}

export interface AuditEvent {
  verb: string;
  user: { username: string; groups?: string[] };
  objectRef?: { resource?: string; name?: string; namespace?: string; subresource?: string };
  responseStatus?: { code?: number };
  stage: string;
  /** RFC 3339 with microseconds. */
  stageTimestamp?: string;
}

// Without a node nothing creates ServiceAccounts (no kube-controller-manager), so the admission
// plugin that would refuse pods without one is off.
const loopbackArgs = [
  '--bind-address=127.0.0.1',
  '--advertise-address=127.0.0.1',
  '--authorization-mode=RBAC',
  '--disable-admission-plugins=ServiceAccount',
];

function nodeServingArgs(address: string): string[] {
  return [
    '--bind-address=0.0.0.0',
    `--advertise-address=${address}`,
    '--authorization-mode=Node,RBAC',
    '--enable-admission-plugins=NodeRestriction',
    '--enable-aggregator-routing=true',
    // The node's name resolves nowhere in the namespace: reach the kubelet at its address.
    '--kubelet-preferred-address-types=InternalIP',
  ];
}

const live = new Set<ControlPlane>();
let exitHooksInstalled = false;

function installExitHooks(): void {
  if (exitHooksInstalled) return;
  exitHooksInstalled = true;
  process.once('exit', () => {
    for (const cp of live) cp.killNow();
  });
  for (const signal of ['SIGINT', 'SIGTERM'] as const) {
    process.once(signal, () => {
      for (const cp of live) cp.killNow();
      process.exit(signal === 'SIGINT' ? 130 : 143);
    });
  }
}

function sweepStaleDirs(): void {
  if (!existsSync(scratchRoot)) return;
  for (const entry of readdirSync(scratchRoot)) {
    const pid = Number(entry.split('-')[0]);
    if (!Number.isInteger(pid) || isAlive(pid)) continue;
    rmSync(join(scratchRoot, entry), { recursive: true, force: true });
  }
}

interface ControlPlaneParts {
  dir: string;
  etcd: ManagedProcess;
  etcdHealthUrl: string;
  apiserver: ManagedProcess;
  port: number;
  caPem: string;
  ca: KeyPair;
  tokens: Map<string, string>;
  auditLogPath: string | undefined;
  startTimeoutMs: number;
}

export class ControlPlane {
  readonly dir: string;
  readonly server: string;
  readonly port: number;
  readonly caPem: string;
  private readonly ca: KeyPair;
  private readonly etcd: ManagedProcess;
  private readonly etcdHealthUrl: string;
  private readonly apiserver: ManagedProcess;
  private readonly tokens: Map<string, string>;
  private readonly auditLogPath: string | undefined;
  private readonly startTimeoutMs: number;
  private stopped = false;
  private readonly companions: (() => Promise<void>)[] = [];

  private constructor(parts: ControlPlaneParts) {
    this.dir = parts.dir;
    this.port = parts.port;
    this.server = `https://127.0.0.1:${parts.port}`;
    this.caPem = parts.caPem;
    this.ca = parts.ca;
    this.etcd = parts.etcd;
    this.etcdHealthUrl = parts.etcdHealthUrl;
    this.apiserver = parts.apiserver;
    this.tokens = parts.tokens;
    this.auditLogPath = parts.auditLogPath;
    this.startTimeoutMs = parts.startTimeoutMs;
  }

  static async start(opts: ControlPlaneOptions = {}): Promise<ControlPlane> {
    installExitHooks();
    sweepStaleDirs();
    const bins = { apiserver: binary('apiserver'), etcd: binary('etcd') };
    mkdirSync(scratchRoot, { recursive: true });
    const dir = join(scratchRoot, `${process.pid}-${randomBytes(4).toString('hex')}`);
    mkdirSync(dir, { recursive: true });

    const [etcdClient, etcdPeer, securePort] = [await freePort(), await freePort(), await freePort()];
    const pki = join(dir, 'pki');
    const ca = await makeCA(pki, 'veneer-test-ca');
    const serving = await issueCert(ca, pki, 'apiserver', {
      commonName: 'kube-apiserver',
      usage: 'server',
      dnsNames: ['localhost', 'kubernetes', 'kubernetes.default', 'kubernetes.default.svc'],
      ipAddresses: ['127.0.0.1', '10.0.0.1', ...(opts.nodeAddress ? [opts.nodeAddress] : [])],
    });
    const saKey = generateKeyPairSync('rsa', { modulusLength: 2048 });
    const saKeyPath = join(pki, 'sa.key');
    const saPubPath = join(pki, 'sa.pub');
    writeFileSync(saKeyPath, saKey.privateKey.export({ type: 'pkcs8', format: 'pem' }));
    writeFileSync(saPubPath, saKey.publicKey.export({ type: 'spki', format: 'pem' }));

    const users: TokenUser[] = [{ name: 'admin', groups: ['system:masters'] }, ...(opts.users ?? [])];
    const tokens = new Map<string, string>();
    const tokenLines = users.map((u, i) => {
      const token = randomBytes(24).toString('hex');
      tokens.set(u.name, token);
      return `${token},${u.name},uid-${i},"${(u.groups ?? []).join(',')}"`;
    });
    const tokenFile = join(pki, 'tokens.csv');
    writeFileSync(tokenFile, `${tokenLines.join('\n')}\n`, { mode: 0o600 });

    const etcd = new ManagedProcess(
      'etcd',
      bins.etcd,
      [
        '--name=test',
        `--data-dir=${join(dir, 'etcd')}`,
        `--listen-client-urls=http://127.0.0.1:${etcdClient}`,
        `--advertise-client-urls=http://127.0.0.1:${etcdClient}`,
        `--listen-peer-urls=http://127.0.0.1:${etcdPeer}`,
        `--initial-advertise-peer-urls=http://127.0.0.1:${etcdPeer}`,
        `--initial-cluster=test=http://127.0.0.1:${etcdPeer}`,
        '--unsafe-no-fsync=true',
        '--log-level=warn',
        ...(opts.extraEtcdArgs ?? []),
      ],
      join(dir, 'etcd.log'),
    );

    let auditLogPath: string | undefined;
    const auditArgs: string[] = [];
    if (opts.auditPolicy) {
      const policyPath = join(dir, 'audit-policy.yaml');
      auditLogPath = join(dir, 'audit.log');
      writeFileSync(policyPath, opts.auditPolicy);
      auditArgs.push(
        `--audit-policy-file=${policyPath}`,
        `--audit-log-path=${auditLogPath}`,
        '--audit-log-mode=blocking',
      );
    }
    const apiserver = new ManagedProcess(
      'kube-apiserver',
      bins.apiserver,
      [
        `--etcd-servers=http://127.0.0.1:${etcdClient}`,
        ...(opts.nodeAddress ? nodeServingArgs(opts.nodeAddress) : loopbackArgs),
        // The default reconciler publishes the advertise address as the `kubernetes` Service's
        // endpoint, which 1.37 refuses for a loopback address; nothing here uses that Service.
        '--endpoint-reconciler-type=none',
        `--secure-port=${securePort}`,
        `--cert-dir=${join(dir, 'apiserver-certs')}`,
        `--tls-cert-file=${serving.certPath}`,
        `--tls-private-key-file=${serving.keyPath}`,
        `--token-auth-file=${tokenFile}`,
        `--client-ca-file=${ca.certPath}`,
        `--service-account-issuer=https://127.0.0.1:${securePort}`,
        `--service-account-key-file=${saPubPath}`,
        `--service-account-signing-key-file=${saKeyPath}`,
        '--service-cluster-ip-range=10.0.0.0/24',
        '--allow-privileged=true',
        ...auditArgs,
        ...(opts.extraApiServerArgs ?? []),
      ],
      join(dir, 'kube-apiserver.log'),
      { ...process.env, ...opts.apiServerEnv },
    );

    const cp = new ControlPlane({
      dir,
      etcd,
      etcdHealthUrl: `http://127.0.0.1:${etcdClient}/health`,
      apiserver,
      port: securePort,
      caPem: readFileSync(ca.certPath, 'utf8'),
      ca,
      tokens,
      auditLogPath,
      startTimeoutMs: opts.startTimeoutMs ?? 90_000,
    });
    live.add(cp);
    try {
      await cp.startEtcd();
      await cp.startApiServer();
    } catch (err) {
      await cp.stop();
      throw err;
    }
    return cp;
  }

  /** The pids of kube-apiserver and etcd, while they run (0 otherwise): a benchmark reads their memory. */
  pids(): { apiserver: number; etcd: number } {
    return { apiserver: this.apiserver.pid ?? 0, etcd: this.etcd.pid ?? 0 };
  }

  async startEtcd(): Promise<void> {
    this.etcd.start();
    await this.waitFor(this.etcd, async () => {
      const body = await httpGet(this.etcdHealthUrl);
      return body.includes('"health":"true"');
    });
  }

  async stopEtcd(): Promise<void> {
    await this.etcd.stop();
  }

  async startApiServer(): Promise<void> {
    this.apiserver.start();
    await this.waitFor(this.apiserver, async () => (await this.get('/readyz')).status === 200);
  }

  async stopApiServer(): Promise<void> {
    await this.apiserver.stop(15_000);
  }

  /** A restart as a crash looks to clients: 3 s to stop, then SIGKILL. */
  async restartApiServer(): Promise<void> {
    await this.apiserver.stop(3000);
    await this.startApiServer();
  }

  private async waitFor(proc: ManagedProcess, ready: () => Promise<boolean>): Promise<void> {
    const deadline = Date.now() + this.startTimeoutMs;
    while (Date.now() < deadline) {
      if (!proc.running) throw new Error(`${proc.name} exited during start-up:\n${proc.logTail()}`);
      if (await ready().catch(() => false)) return;
      await sleep(200);
    }
    throw new Error(`${proc.name} was not ready within ${this.startTimeoutMs} ms:\n${proc.logTail()}`);
  }

  tokenFor(user: string): string {
    const token = this.tokens.get(user);
    if (!token) throw new Error(`no token user ${user}: pass it in ControlPlaneOptions.users`);
    return token;
  }

  /** A KubeConfig for a bearer token: a token user's, or a minted ServiceAccount token. */
  kubeConfigForToken(token: string, userName = 'token-user'): k8s.KubeConfig {
    const kc = new k8s.KubeConfig();
    kc.loadFromOptions({
      clusters: [
        { name: 'test', server: this.server, caData: Buffer.from(this.caPem).toString('base64'), skipTLSVerify: false },
      ],
      users: [{ name: userName, token }],
      contexts: [{ name: 'test', cluster: 'test', user: userName }],
      currentContext: 'test',
    });
    return kc;
  }

  adminKubeConfig(): k8s.KubeConfig {
    return this.kubeConfigForToken(this.tokenFor('admin'), 'admin');
  }

  userKubeConfig(user: string): k8s.KubeConfig {
    return this.kubeConfigForToken(this.tokenFor(user), user);
  }

  /** Mints a token for a ServiceAccount through the TokenRequest API (creating the account). */
  async serviceAccountKubeConfig(namespace: string, name: string, expirationSeconds = 3600): Promise<k8s.KubeConfig> {
    return this.kubeConfigForToken(
      await this.serviceAccountToken(namespace, name, expirationSeconds),
      `system:serviceaccount:${namespace}:${name}`,
    );
  }

  /** A ServiceAccount token from the TokenRequest API, as a projected volume holds it (creating the account). */
  async serviceAccountToken(namespace: string, name: string, expirationSeconds = 3600): Promise<string> {
    const core = this.adminKubeConfig().makeApiClient(k8s.CoreV1Api);
    await core.createNamespace({ body: { metadata: { name: namespace } } }).catch(ignoreConflict);
    await core.createNamespacedServiceAccount({ namespace, body: { metadata: { name } } }).catch(ignoreConflict);
    const tr = await core.createNamespacedServiceAccountToken({
      namespace,
      name,
      body: { spec: { audiences: [], expirationSeconds } },
    });
    const token = tr.status?.token;
    if (!token) throw new Error(`TokenRequest for ${namespace}/${name} returned no token`);
    return token;
  }

  /** A client certificate the apiserver accepts as `user` (its CommonName) in `groups`. */
  async clientCertificate(user: string, groups: string[] = []): Promise<KeyPair> {
    return issueCert(this.ca, join(this.dir, 'pki', 'clients'), `${user}-${randomBytes(3).toString('hex')}`, {
      commonName: user,
      organizations: groups,
      usage: 'client',
    });
  }

  /** Writes a kubeconfig file (admin unless a KubeConfig is given) and returns its path. */
  writeKubeConfig(kc: k8s.KubeConfig = this.adminKubeConfig(), fileName = 'kubeconfig'): string {
    const path = join(this.dir, fileName);
    writeFileSync(path, kc.exportConfig(), { mode: 0o600 });
    return path;
  }

  /** A raw GET as admin (for /readyz, /metrics and other non-resource paths). */
  async get(path: string): Promise<{ status: number; body: string }> {
    return new Promise((resolve, reject) => {
      const req = request(
        `${this.server}${path}`,
        {
          ca: this.caPem,
          headers: { authorization: `Bearer ${this.tokenFor('admin')}` },
          timeout: 5000,
        },
        (res) => {
          let body = '';
          res.setEncoding('utf8');
          res.on('data', (c: string) => (body += c));
          res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
        },
      );
      req.on('timeout', () => req.destroy(new Error(`GET ${path} timed out`)));
      req.on('error', reject);
      req.end();
    });
  }

  auditEvents(): AuditEvent[] {
    if (!this.auditLogPath) throw new Error('start the control plane with auditPolicy to read audit events');
    if (!existsSync(this.auditLogPath)) return [];
    return readFileSync(this.auditLogPath, 'utf8')
      .split('\n')
      .filter(Boolean)
      .map((l) => JSON.parse(l) as AuditEvent);
  }

  /** Synchronous last resort for exit paths: no awaiting possible there. */
  killNow(): void {
    this.apiserver.killNow();
    this.etcd.killNow();
    rmSync(this.dir, { recursive: true, force: true });
    live.delete(this);
  }

  /** Work that talks to this control plane (a stand-in controller) and stops before it does. */
  onStop(stop: () => Promise<void>): void {
    this.companions.push(stop);
  }

  async stop(): Promise<void> {
    if (this.stopped) return;
    this.stopped = true;
    for (const stop of this.companions.splice(0)) await stop();
    await this.apiserver.stop();
    await this.etcd.stop();
    rmSync(this.dir, { recursive: true, force: true });
    live.delete(this);
  }
}

function ignoreConflict(err: unknown): void {
  if ((err as { code?: number }).code !== 409) throw err;
}

/** The watcher's own client (src/kube/client.ts), as the same user of the same cluster. */
export function clientFor(kc: k8s.KubeConfig): KubeClient {
  return new KubeClient(kubeconfigAccess(JSON.parse(kc.exportConfig())));
}

/** The same kubeconfig, reaching the apiserver at another local port (a proxy in front of it). */
export function viaPort(kc: k8s.KubeConfig, port: number): k8s.KubeConfig {
  kc.loadFromOptions({
    clusters: kc.clusters.map((c) => ({ ...c, server: c.server.replace(/:\d+$/, `:${port}`) })),
    users: kc.users,
    contexts: kc.contexts,
    currentContext: kc.currentContext,
  });
  return kc;
}

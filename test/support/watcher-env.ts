// A real apiserver, the Karpenter CRDs, the watcher running under its own least-privilege
// identity with real certificates, and both webhooks registered against it.
import { mkdirSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import * as k8s from '@kubernetes/client-node';
import { loadConfig, type Config } from '../../src/config/load.ts';
import { createLogger } from '../../src/log.ts';
import { startWatcher, type RunningWatcher } from '../../src/watcher.ts';
import { mutatingWebhookConfiguration, validatingWebhookConfiguration } from '../../src/webhook/registration.ts';
import { ControlPlane, freePort, type TokenUser } from './control-plane.ts';
import { installKarpenterCRDs } from './karpenter.ts';
import { issueCert, makeCA, type KeyPair } from './pki.ts';

export const WATCHER_USER = 'veneer-watcher';

/** The watcher's rights: what the chart grants, nothing more. */
export async function grantWatcherRole(kc: k8s.KubeConfig, subject: k8s.RbacV1Subject): Promise<void> {
  const rbac = kc.makeApiClient(k8s.RbacAuthorizationV1Api);
  await rbac.createClusterRole({
    body: {
      metadata: { name: 'veneer-node-watcher' },
      rules: [
        { apiGroups: [''], resources: ['nodes'], verbs: ['get', 'list', 'watch', 'patch'] },
        { apiGroups: ['karpenter.sh'], resources: ['nodeoverlays', 'nodeclaims'], verbs: ['get', 'list', 'watch'] },
      ],
    },
  });
  await rbac.createClusterRoleBinding({
    body: {
      metadata: { name: 'veneer-node-watcher' },
      roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: 'veneer-node-watcher' },
      subjects: [subject],
    },
  });
}

export interface WebhookCerts {
  ca: KeyPair;
  serving: KeyPair;
  caPem: string;
}

export async function makeWebhookCerts(dir: string): Promise<WebhookCerts> {
  const ca = await makeCA(join(dir, 'ca'), 'veneer-webhook-ca');
  const serving = await issueCert(ca, dir, 'webhook', { commonName: 'veneer-node-watcher', usage: 'server', ipAddresses: ['127.0.0.1'], dnsNames: ['localhost'] });
  return { ca, serving, caPem: readFileSync(ca.certPath, 'utf8') };
}

export interface WatcherEnv {
  cp: ControlPlane;
  admin: k8s.KubeConfig;
  watcher: RunningWatcher;
  config: Config;
  certs: WebhookCerts;
  stop(): Promise<void>;
}

export interface WatcherEnvOptions {
  users?: TokenUser[];
  flags?: Record<string, string>;
  register?: boolean;
  timeoutSeconds?: number;
}

export async function startWatcherEnv(opts: WatcherEnvOptions = {}): Promise<WatcherEnv> {
  const cp = await ControlPlane.start({ users: [{ name: WATCHER_USER }, ...(opts.users ?? [])] });
  try {
    const admin = cp.adminKubeConfig();
    await installKarpenterCRDs(admin);
    await grantWatcherRole(admin, { kind: 'User', name: WATCHER_USER, apiGroup: 'rbac.authorization.k8s.io' });
    const certDir = join(cp.dir, 'webhook-certs');
    mkdirSync(certDir, { recursive: true });
    const certs = await makeWebhookCerts(certDir);
    const { config } = loadConfig({
      flags: {
        '--enabled': 'true',
        '--webhook-port': String(await freePort()),
        '--metrics-port': String(await freePort()),
        '--shutdown-delay': '0s',
        '--webhook-cert-file': certs.serving.certPath,
        '--webhook-key-file': certs.serving.keyPath,
        ...opts.flags,
      },
    });
    const log = createLogger(process.env.VENEER_TEST_LOG ?? 'silent');
    const watcher = await startWatcher({ config, kc: cp.userKubeConfig(WATCHER_USER), log, host: '127.0.0.1', certPollMs: 200 });
    await watcher.caches?.synced();
    const env: WatcherEnv = {
      cp, admin, watcher, config, certs,
      stop: async () => {
        await watcher.stop();
        await cp.stop();
      },
    };
    if (opts.register !== false) await registerWebhooks(env, opts.timeoutSeconds ?? 5);
    return env;
  } catch (err) {
    await cp.stop();
    throw err;
  }
}

export async function registerWebhooks(env: WatcherEnv, timeoutSeconds: number): Promise<void> {
  const api = env.admin.makeApiClient(k8s.AdmissionregistrationV1Api);
  const reg = { name: 'veneer-node-watcher', caBundle: env.certs.caPem, url: `https://127.0.0.1:${env.watcher.webhookPort}`, labelNamespace: env.config.labelNamespace, timeoutSeconds };
  await api.createMutatingWebhookConfiguration({ body: mutatingWebhookConfiguration(reg) });
  await api.createValidatingWebhookConfiguration({ body: validatingWebhookConfiguration(reg) });
  await waitForMutatingWebhook(env.admin, env.config.labelNamespace);
}

/** A new webhook configuration takes a moment to be used: probe with dry-run creates. */
export async function waitForMutatingWebhook(kc: k8s.KubeConfig, labelNamespace: string, timeoutMs = 30_000): Promise<void> {
  const core = kc.makeApiClient(k8s.CoreV1Api);
  const deadline = Date.now() + timeoutMs;
  for (let i = 0; Date.now() < deadline; i++) {
    const node = await core.createNode({
      body: { metadata: { name: `webhook-probe-${i}`, labels: { 'karpenter.sh/nodepool': 'probe', 'karpenter.sh/capacity-type': 'on-demand', 'karpenter.sh/registered': 'true' } } },
      dryRun: 'All',
    });
    if (node.metadata?.labels?.[`${labelNamespace}/overlay-influenced`] !== undefined) return;
    await new Promise((r) => setTimeout(r, 200));
  }
  throw new Error(`the mutating webhook did not become active within ${timeoutMs} ms`);
}

export function writeFileAtomic(path: string, content: string): void {
  writeFileSync(`${path}.tmp`, content);
  // rename is atomic: a reader sees the old or the new file, never half of one.
  renameSync(`${path}.tmp`, path);
}

// A real apiserver, the Karpenter CRDs, the watcher running under its own least-privilege
// identity with real certificates, and both webhooks registered against it.
import { mkdirSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import * as k8s from '@kubernetes/client-node';
import { loadConfig, type Config } from '../src/config/load.ts';
import { createLogger, type Logger } from '../src/log.ts';
import { startWatcher, type RunningWatcher } from '../src/commands/serve.ts';
import { mutatingWebhookConfiguration, recordGuardBinding, recordGuardPolicy } from './webhook-registration.ts';
import { clientFor, ControlPlane, freePort, type TokenUser, viaPort } from './control-plane.ts';
import { installKarpenterCRDs } from './karpenter-crds.ts';
import type { KeyPair } from './pki.ts';
import { execFileSync } from 'node:child_process';
import { dirname } from 'node:path';
import { fileURLToPath } from 'node:url';

const repoRoot = join(dirname(fileURLToPath(import.meta.url)), '..');

export const WATCHER_USER = 'veneer-watcher';
/** Every identity a kit watcher runs as: the one, and the replicas of multi-replica tests. */
export const WATCHER_USERS = [WATCHER_USER, 'veneer-watcher-a', 'veneer-watcher-b'];

export const LEASE_NAMESPACE = 'veneer-system';

/** The watcher's cluster-wide rights, as the chart's ClusterRole grants them (test/packaging/chart.test.ts compares). */
export const WATCHER_CLUSTER_RULES: k8s.V1PolicyRule[] = [
  { apiGroups: [''], resources: ['nodes'], verbs: ['get', 'list', 'watch', 'patch'] },
  {
    apiGroups: ['karpenter.sh'],
    resources: ['nodeoverlays', 'nodepools', 'nodeclaims'],
    verbs: ['get', 'list', 'watch'],
  },
  { apiGroups: ['karpenter.k8s.aws'], resources: ['ec2nodeclasses'], verbs: ['get', 'list', 'watch'] },
  { apiGroups: ['events.k8s.io'], resources: ['events'], verbs: ['create'] },
  { apiGroups: ['authentication.k8s.io'], resources: ['tokenreviews'], verbs: ['create'] },
  { apiGroups: ['authorization.k8s.io'], resources: ['subjectaccessreviews'], verbs: ['create'] },
];

/** The chart's Role in `default`: Karpenter's Events on NodeClaims (DisruptionLaunching tells a replacement). */
export const KARPENTER_EVENTS_RULES: k8s.V1PolicyRule[] = [
  { apiGroups: [''], resources: ['events'], verbs: ['list', 'watch'] },
];

/** What the chart's metrics-reader ClusterRole grants: the right to scrape the watcher. */
export const METRICS_READER_RULES: k8s.V1PolicyRule[] = [{ nonResourceURLs: ['/metrics'], verbs: ['get'] }];

/** A metrics-reader ClusterRole, as the chart makes it, bound to `subjects` (Prometheus' ServiceAccount). */
export async function grantMetricsReader(kc: k8s.KubeConfig, subjects: k8s.RbacV1Subject[]): Promise<void> {
  const rbac = kc.makeApiClient(k8s.RbacAuthorizationV1Api);
  await rbac.createClusterRole({
    body: { metadata: { name: 'veneer-node-watcher-metrics-reader' }, rules: METRICS_READER_RULES },
  });
  await rbac.createClusterRoleBinding({
    body: {
      metadata: { name: 'veneer-node-watcher-metrics-reader' },
      roleRef: {
        apiGroup: 'rbac.authorization.k8s.io',
        kind: 'ClusterRole',
        name: 'veneer-node-watcher-metrics-reader',
      },
      subjects,
    },
  });
}

/** The watcher's rights: what the chart grants, nothing more. */
export async function grantWatcherRole(kc: k8s.KubeConfig, subjects: k8s.RbacV1Subject[]): Promise<void> {
  const rbac = kc.makeApiClient(k8s.RbacAuthorizationV1Api);
  await kc.makeApiClient(k8s.CoreV1Api).createNamespace({ body: { metadata: { name: LEASE_NAMESPACE } } });
  await rbac.createNamespacedRole({
    namespace: LEASE_NAMESPACE,
    body: {
      metadata: { name: 'veneer-node-watcher-leader-election' },
      rules: [{ apiGroups: ['coordination.k8s.io'], resources: ['leases'], verbs: ['get', 'create', 'update'] }],
    },
  });
  await rbac.createNamespacedRoleBinding({
    namespace: LEASE_NAMESPACE,
    body: {
      metadata: { name: 'veneer-node-watcher-leader-election' },
      roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'Role', name: 'veneer-node-watcher-leader-election' },
      subjects,
    },
  });
  await rbac.createClusterRole({
    body: {
      metadata: { name: 'veneer-node-watcher' },
      rules: WATCHER_CLUSTER_RULES,
    },
  });
  await rbac.createClusterRoleBinding({
    body: {
      metadata: { name: 'veneer-node-watcher' },
      roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: 'veneer-node-watcher' },
      subjects,
    },
  });
  const events = 'veneer-node-watcher-karpenter-events';
  await rbac.createNamespacedRole({
    namespace: 'default',
    body: { metadata: { name: events }, rules: KARPENTER_EVENTS_RULES },
  });
  await rbac.createNamespacedRoleBinding({
    namespace: 'default',
    body: {
      metadata: { name: events },
      roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'Role', name: events },
      subjects,
    },
  });
}

export interface WebhookCerts {
  ca: KeyPair;
  serving: KeyPair;
  caPem: string;
}

/** The development certificates users make for local runs: certs/make-dev-certs.sh. */
export async function makeWebhookCerts(dir: string): Promise<WebhookCerts> {
  execFileSync('bash', [join(repoRoot, 'certs', 'make-dev-certs.sh'), dir], { stdio: 'ignore' });
  const ca = { certPath: join(dir, 'ca.crt'), keyPath: join(dir, 'ca.key') };
  const serving = { certPath: join(dir, 'tls.crt'), keyPath: join(dir, 'tls.key') };
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
  /** More watcher identities (each gets the watcher's role) for multi-replica tests. */
  extraWatchers?: string[];
  flags?: Record<string, string>;
  register?: boolean;
  timeoutSeconds?: number;
  auditPolicy?: string;
  /** More kube-apiserver flags (a higher -v to see why it cut a watch, for example). */
  extraApiServerArgs?: string[];
  extraEtcdArgs?: string[];
  apiServerEnv?: Record<string, string>;
  /** Installs the Karpenter CRDs (default: kit/crds with the overlay-validation stand-in; kit/karpenter.ts installs real Karpenter's). */
  installCRDs?: (cp: ControlPlane) => Promise<void>;
  /** Who else the record's guard lets change a record, beside the kit's watchers (recordGuard in the chart). */
  guard?: { allowedUsers?: string[]; allowedGroups?: string[] };
}

export interface ClusterEnv {
  cp: ControlPlane;
  admin: k8s.KubeConfig;
  certs: WebhookCerts;
}

/** Audit every request of the watcher identities, at Metadata level. */
export const WATCHER_AUDIT_POLICY = `apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived]
rules:
  - level: Metadata
    users: [${WATCHER_USERS.join(', ')}]
  - level: None
`;

/**
 * Metrics are served over plain HTTP here: these tests and benchmarks scrape as a harness, not
 * as a cluster identity, and the secure default would add TokenReviews to the API calls they
 * count. test/apiserver/metrics-auth.test.ts, test/packaging/chart.test.ts and test/apiserver/serve.test.ts prove the default.
 */
export async function watcherFlags(
  certs: WebhookCerts,
  extra: Record<string, string> = {},
): Promise<Record<string, string>> {
  return {
    '--enabled': 'true',
    '--webhook-port': String(await freePort()),
    '--metrics-port': String(await freePort()),
    '--metrics-secure': 'false',
    '--health-port': String(await freePort()),
    '--shutdown-delay': '0s',
    '--webhook-cert-file': certs.serving.certPath,
    '--webhook-key-file': certs.serving.keyPath,
    '--leader-election-lease-duration': '3s',
    '--leader-election-renew-deadline': '2s',
    '--leader-election-retry-period': '500ms',
    ...extra,
  };
}

export interface LaunchOptions {
  /** Reach the apiserver at another port (a proxy in front of it). */
  apiServerPort?: number;
  watchdogMs?: number;
  /** The watcher's logger (default: silent, or VENEER_TEST_LOG's level). */
  log?: Logger;
}

/** Starts a watcher in this process as `user`. */
export async function launchWatcher(
  cp: ControlPlane,
  certs: WebhookCerts,
  user: string,
  flags: Record<string, string> = {},
  opts: LaunchOptions = {},
): Promise<{ watcher: RunningWatcher; config: Config }> {
  const { config } = loadConfig({ flags: await watcherFlags(certs, flags) });
  const log = opts.log ?? createLogger(process.env.VENEER_TEST_LOG ?? 'silent');
  const kc = opts.apiServerPort ? viaPort(cp.userKubeConfig(user), opts.apiServerPort) : cp.userKubeConfig(user);
  const watcher = await startWatcher({
    config,
    client: clientFor(kc),
    log,
    host: '127.0.0.1',
    certPollMs: 200,
    identity: user,
    ...(opts.watchdogMs ? { watchdogMs: opts.watchdogMs } : {}),
  });
  await watcher.caches?.synced();
  return { watcher, config };
}

/** The control plane, the CRDs, the watcher identities with their rights, and webhook certificates. */
export async function startClusterEnv(opts: WatcherEnvOptions = {}): Promise<ClusterEnv> {
  const watcherUsers = [WATCHER_USER, ...(opts.extraWatchers ?? [])];
  const cp = await ControlPlane.start({
    users: [...watcherUsers.map((name) => ({ name })), ...(opts.users ?? [])],
    ...(opts.auditPolicy ? { auditPolicy: opts.auditPolicy } : {}),
    ...(opts.extraApiServerArgs ? { extraApiServerArgs: opts.extraApiServerArgs } : {}),
    ...(opts.extraEtcdArgs ? { extraEtcdArgs: opts.extraEtcdArgs } : {}),
    ...(opts.apiServerEnv ? { apiServerEnv: opts.apiServerEnv } : {}),
  });
  try {
    const admin = cp.adminKubeConfig();
    await (opts.installCRDs ?? installKarpenterCRDs)(cp);
    await grantWatcherRole(
      admin,
      watcherUsers.map((name) => ({ kind: 'User', name, apiGroup: 'rbac.authorization.k8s.io' })),
    );
    const certDir = join(cp.dir, 'webhook-certs');
    mkdirSync(certDir, { recursive: true });
    return { cp, admin, certs: await makeWebhookCerts(certDir) };
  } catch (err) {
    await cp.stop();
    throw err;
  }
}

/** A cluster env with a launcher (Karpenter) started beside it; the control plane is stopped if that fails. */
export async function startClusterEnvWith<T>(
  opts: WatcherEnvOptions,
  start: (cp: ControlPlane) => Promise<T>,
): Promise<ClusterEnv & { karpenter: T }> {
  const env = await startClusterEnv(opts);
  try {
    return { ...env, karpenter: await start(env.cp) };
  } catch (err) {
    await env.cp.stop();
    throw err;
  }
}

/** A cluster env with one watcher running and (by default) both webhooks registered. */
export async function startWatcherEnv(opts: WatcherEnvOptions = {}): Promise<WatcherEnv> {
  const { cp, admin, certs } = await startClusterEnv(opts);
  try {
    const { watcher, config } = await launchWatcher(cp, certs, WATCHER_USER, opts.flags);
    const env: WatcherEnv = {
      cp,
      admin,
      watcher,
      config,
      certs,
      stop: async () => {
        await watcher.stop();
        await cp.stop();
      },
    };
    if (opts.register !== false)
      await registerWebhooksAt(admin, {
        caPem: certs.caPem,
        port: watcher.webhookPort!,
        timeoutSeconds: opts.timeoutSeconds ?? 5,
        labelNamespace: config.labelNamespace,
        ...(opts.guard ? { guard: opts.guard } : {}),
      });
    return env;
  } catch (err) {
    await cp.stop();
    throw err;
  }
}

export interface RegisterOptions {
  caPem: string;
  /** The watcher's webhook port. */
  port: number;
  timeoutSeconds?: number;
  labelNamespace?: string;
  /** Where the apiserver calls the watcher; an IPv6 address is written in brackets in the URL. */
  address?: string;
  /** Who else the record's guard lets change a record, beside the kit's watchers. */
  guard?: { allowedUsers?: string[]; allowedGroups?: string[] };
  /**
   * Whether the apiserver calls the webhook now, for a watcher that answers without a record (its
   * records held): by default, a dry-run CREATE comes back with a record.
   */
  inForce?: (core: k8s.CoreV1Api, probe: string) => Promise<boolean>;
}

/**
 * The mutating webhook, as the chart registers it, for a watcher serving on `port`, and the
 * record's guard (its ValidatingAdmissionPolicy and binding); waits until both are in force and
 * returns what removes them.
 */
export async function registerWebhooksAt(admin: k8s.KubeConfig, o: RegisterOptions): Promise<() => Promise<void>> {
  const api = admin.makeApiClient(k8s.AdmissionregistrationV1Api);
  const labelNamespace = o.labelNamespace ?? 'veneer.io';
  const address = o.address ?? '127.0.0.1';
  const name = 'veneer-node-watcher';
  const reg = {
    name,
    caBundle: o.caPem,
    url: `https://${address.includes(':') ? `[${address}]` : address}:${o.port}`,
    labelNamespace,
    timeoutSeconds: o.timeoutSeconds ?? 5,
  };
  await api.createMutatingWebhookConfiguration({ body: mutatingWebhookConfiguration(reg) });
  const who = {
    users: [...WATCHER_USERS, ...(o.guard?.allowedUsers ?? [])],
    groups: o.guard?.allowedGroups ?? [],
  };
  await api.createValidatingAdmissionPolicy({ body: recordGuardPolicy(name, labelNamespace, who) });
  await api.createValidatingAdmissionPolicyBinding({ body: recordGuardBinding(name) });
  await untilMutatingWebhook(admin, labelNamespace, true, 30_000, o.inForce);
  await waitForGuard(admin, labelNamespace);
  return async () => {
    await api.deleteMutatingWebhookConfiguration({ name });
    await api.deleteValidatingAdmissionPolicyBinding({ name });
    await api.deleteValidatingAdmissionPolicy({ name });
  };
}

/**
 * A policy takes a moment to be enforced: on a probe node outside the watcher's scope that was
 * created with a record key, a dry-run patch that alters it is refused once the guard is in force.
 * The probe goes afterwards.
 */
export async function waitForGuard(kc: k8s.KubeConfig, labelNamespace: string, timeoutMs = 30_000): Promise<void> {
  const core = kc.makeApiClient(k8s.CoreV1Api);
  const probe = 'guard-probe';
  const key = `${labelNamespace}/overlay-influenced`;
  await core.createNode({ body: { metadata: { name: probe, labels: { [key]: 'true' } } } });
  try {
    const deadline = Date.now() + timeoutMs;
    while (Date.now() < deadline) {
      const refused = await core
        .patchNode(
          { name: probe, body: { metadata: { labels: { [key]: 'false' } } }, dryRun: 'All' },
          k8s.setHeaderOptions('Content-Type', k8s.PatchStrategy.MergePatch),
        )
        .then(
          () => false,
          (e: { code?: number }) => e.code === 403,
        );
      if (refused) return;
      await new Promise((r) => setTimeout(r, 200));
    }
    throw new Error(`the record's guard was not in force within ${timeoutMs} ms`);
  } finally {
    await core.deleteNode({ name: probe });
  }
}

/** Whether the mutating webhook is in force now: a dry-run CREATE of an on-demand Karpenter node comes back with a record. */
export async function recordsOnCreate(core: k8s.CoreV1Api, labelNamespace: string, probe: string): Promise<boolean> {
  const node = await core.createNode({
    body: {
      metadata: {
        name: probe,
        labels: {
          'karpenter.sh/nodepool': 'probe',
          'karpenter.sh/capacity-type': 'on-demand',
          'karpenter.sh/registered': 'true',
        },
      },
    },
    dryRun: 'All',
  });
  return node.metadata?.labels?.[`${labelNamespace}/overlay-influenced`] !== undefined;
}

/** A webhook configuration takes a moment to be used, or to stop being used: probe with dry-run creates until it `inForce`. */
async function untilMutatingWebhook(
  kc: k8s.KubeConfig,
  labelNamespace: string,
  inForce: boolean,
  timeoutMs: number,
  called: RegisterOptions['inForce'] = (core, probe) => recordsOnCreate(core, labelNamespace, probe),
): Promise<void> {
  const core = kc.makeApiClient(k8s.CoreV1Api);
  const deadline = Date.now() + timeoutMs;
  for (let i = 0; Date.now() < deadline; i++) {
    if ((await called(core, `webhook-probe-${i}`)) === inForce) return;
    await new Promise((r) => setTimeout(r, 200));
  }
  throw new Error(
    `the mutating webhook did not ${inForce ? 'become active' : 'go out of force'} within ${timeoutMs} ms`,
  );
}

export async function waitForMutatingWebhook(
  kc: k8s.KubeConfig,
  labelNamespace: string,
  timeoutMs = 30_000,
): Promise<void> {
  await untilMutatingWebhook(kc, labelNamespace, true, timeoutMs);
}

/** Removes the mutating webhook's configuration (as if the watcher were down) and waits until the apiserver stops calling it. */
export async function pauseMutatingWebhook(
  admin: k8s.KubeConfig,
  labelNamespace = 'veneer.io',
  name = 'veneer-node-watcher',
): Promise<void> {
  await admin.makeApiClient(k8s.AdmissionregistrationV1Api).deleteMutatingWebhookConfiguration({ name });
  await untilMutatingWebhook(admin, labelNamespace, false, 30_000);
}

export function writeFileAtomic(path: string, content: string): void {
  writeFileSync(`${path}.tmp`, content);
  // rename is atomic: a reader sees the old or the new file, never half of one.
  renameSync(`${path}.tmp`, path);
}

/** The watcher (under its own identity) beside an env's cluster, with both webhooks registered; `stop` ends both and the control plane. */
export async function withWatcher<E extends ClusterEnv>(
  env: E,
  flags: Record<string, string> = {},
): Promise<E & { watcher: RunningWatcher; stop: () => Promise<void> }> {
  try {
    const { watcher } = await launchWatcher(env.cp, env.certs, WATCHER_USER, flags);
    const stop = async () => {
      await watcher.stop();
      await env.cp.stop();
    };
    await registerWebhooksAt(env.admin, { caPem: env.certs.caPem, port: watcher.webhookPort! }).catch(async (err) => {
      await stop();
      throw err;
    });
    return { ...env, watcher, stop };
  } catch (err) {
    await env.cp.stop();
    throw err;
  }
}

// `npm run demo [-- --keep]`: the whole flow on a local control plane. Builds kube-apiserver and
// etcd if needed, starts them, installs the Karpenter CRDs, runs the watcher (webhooks and
// reconciler) under its own least-privilege identity with development certificates, creates
// Veneer's overlays, launches nodes the way Karpenter does, and shows what was recorded.
import { execFileSync } from 'node:child_process';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import * as k8s from '@kubernetes/client-node';
import { loadConfig } from '../src/config/load.ts';
import { createLogger } from '../src/log.ts';
import { startWatcher } from '../src/watcher.ts';
import { mutatingWebhookConfiguration, validatingWebhookConfiguration } from '../src/webhook/registration.ts';
import { clientFor, ControlPlane, freePort } from '../kit/control-plane.ts';
import { KarpenterSim } from '../kit/karpenter-sim.ts';
import { computeSavingsPlan, ec2InstanceSavingsPlan, reservedInstance } from '../kit/veneer.ts';
import { scrape } from '../kit/scrape.ts';
import { grantMetricsReader, grantWatcherRole, waitForMutatingWebhook } from '../kit/watcher-env.ts';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const keep = process.argv.includes('--keep');
const t0 = Date.now();
const step = (msg: string) => console.log(`[demo +${((Date.now() - t0) / 1000).toFixed(1).padStart(5)}s] ${msg}`);
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

step('local control plane: building kube-apiserver and etcd if not cached (the first build takes about 10 minutes)');
execFileSync('bash', [join(root, 'scripts', 'control-plane.sh'), 'etcd', 'kube-apiserver'], { stdio: 'inherit' });
step('starting etcd and kube-apiserver');
const cp = await ControlPlane.start({ users: [{ name: 'veneer-watcher' }] });
let watcherStop: (() => Promise<void>) | undefined;
const teardown = async () => {
  await watcherStop?.();
  await cp.stop();
};
process.once('SIGINT', () => void teardown().then(() => process.exit(130)));

try {
  const admin = cp.adminKubeConfig();
  step('installing the NodeOverlay and NodeClaim CRDs and the watcher\'s RBAC');
  const { installKarpenterCRDs } = await import('../kit/karpenter-crds.ts');
  await installKarpenterCRDs(cp);
  await grantWatcherRole(admin, [{ kind: 'User', name: 'veneer-watcher', apiGroup: 'rbac.authorization.k8s.io' }]);

  step('development certificates (certs/make-dev-certs.sh)');
  const certDir = join(cp.dir, 'certs');
  execFileSync('bash', [join(root, 'certs', 'make-dev-certs.sh'), certDir], { stdio: 'ignore' });
  const caPem = (await import('node:fs')).readFileSync(join(certDir, 'ca.crt'), 'utf8');

  step('starting the watcher: mutating + validating webhooks, caches, leader-elected reconciler');
  const { config } = loadConfig({
    flags: {
      '--enabled': 'true', '--webhook-port': String(await freePort()), '--metrics-port': String(await freePort()), '--health-port': String(await freePort()),
      '--webhook-cert-file': join(certDir, 'tls.crt'), '--webhook-key-file': join(certDir, 'tls.key'), '--shutdown-delay': '0s',
    },
  });
  const watcher = await startWatcher({ config, client: clientFor(cp.userKubeConfig('veneer-watcher')), log: createLogger('warn'), host: '127.0.0.1' });
  watcherStop = watcher.stop;
  await watcher.caches?.synced();

  const registrations = admin.makeApiClient(k8s.AdmissionregistrationV1Api);
  const reg = { name: 'veneer-node-watcher', caBundle: caPem, url: `https://127.0.0.1:${watcher.webhookPort}`, labelNamespace: config.labelNamespace, timeoutSeconds: 5 };
  await registrations.createMutatingWebhookConfiguration({ body: mutatingWebhookConfiguration(reg) });
  await registrations.createValidatingWebhookConfiguration({ body: validatingWebhookConfiguration(reg) });
  await waitForMutatingWebhook(admin, config.labelNamespace);

  step('Veneer\'s overlays: Compute SP (weight 10), EC2 Instance SP m5/us-west-2 (20), RI m5.xlarge/us-west-2 (30)');
  const custom = admin.makeApiClient(k8s.CustomObjectsApi);
  for (const o of [computeSavingsPlan(), ec2InstanceSavingsPlan('m5', 'us-west-2'), reservedInstance('m5.xlarge', 'us-west-2')]) {
    await custom.createClusterCustomObject({ group: 'karpenter.sh', version: 'v1alpha1', plural: 'nodeoverlays', body: o });
  }
  for (let i = 0; (watcher.caches?.overlays.index.size ?? 0) < 3 && i < 100; i++) await sleep(50);

  const sim = new KarpenterSim(admin);
  const core = admin.makeApiClient(k8s.CoreV1Api);
  const launchedAt = new Map<string, number>();
  const launch = async (name: string, instanceType: string, opts: { spot?: boolean; claim?: boolean } = {}) => {
    launchedAt.set(name, Date.now());
    const { registered } = await sim.launch({ name, instanceType, capacityType: opts.spot ? 'spot' : 'on-demand', ...(opts.claim === false ? {} : { claimName: `${name}-claim` }) });
    // A webhook record comes back in Karpenter's own response: it existed when the call returned.
    if (registered.metadata?.labels?.['veneer.io/overlay-influenced'] !== undefined) recordedAt.set(name, Date.now());
  };
  const recordedAt = new Map<string, number>();
  step('launching nodes as Karpenter does (NodeClaim, kubelet CREATE, registration update)');
  await Promise.all([
    launch('ip-10-0-1-10', 'm5.xlarge'), launch('ip-10-0-1-11', 'm5.xlarge'), launch('ip-10-0-1-12', 'm5.2xlarge'),
    launch('ip-10-0-1-13', 'c6i.large'), launch('ip-10-0-1-14', 'r6g.xlarge', { claim: false }),
    launch('ip-10-0-1-20', 'm5.xlarge', { spot: true }), launch('ip-10-0-1-21', 'c6i.large', { spot: true }),
  ]);
  step('pausing the webhook (its configuration removed, as if it were down) and launching more');
  await registrations.deleteMutatingWebhookConfiguration({ name: 'veneer-node-watcher' });
  await sleep(1500);
  await Promise.all([launch('ip-10-0-2-30', 'm5.xlarge'), launch('ip-10-0-2-31', 'm5.large'), launch('ip-10-0-2-32', 't3.medium')]);

  step('waiting for every on-demand node to carry its record');
  for (let i = 0; i < 300; i++) {
    const nodes = (await core.listNode()).items;
    for (const n of nodes) {
      const name = n.metadata?.name ?? '';
      if (n.metadata?.labels?.['veneer.io/overlay-influenced'] !== undefined && !recordedAt.has(name)) recordedAt.set(name, Date.now());
    }
    const onDemand = nodes.filter((n) => n.metadata?.labels?.['karpenter.sh/capacity-type'] === 'on-demand');
    if (onDemand.every((n) => recordedAt.has(n.metadata?.name ?? ''))) break;
    await sleep(100);
  }

  const nodes = (await core.listNode()).items.filter((n) => launchedAt.has(n.metadata?.name ?? ''));
  const rows = nodes.map((n) => {
    const l = n.metadata?.labels ?? {};
    const story = JSON.parse(n.metadata?.annotations?.['veneer.io/overlay-decision'] ?? '{}') as { decidedBy?: string };
    const name = n.metadata?.name ?? '';
    const rec = recordedAt.get(name);
    return [
      name, l['karpenter.sh/capacity-type'] ?? '', l['node.kubernetes.io/instance-type'] ?? '', l['veneer.io/overlay-influenced'] ?? '-',
      l['veneer.io/matching-overlay'] ?? '-', l['veneer.io/capacity-type'] ?? '-', story.decidedBy ?? '-',
      rec !== undefined ? `${rec - (launchedAt.get(name) ?? rec)}` : '-',
    ];
  });
  const header = ['NAME', 'CAPACITY', 'TYPE', 'INFLUENCED', 'MATCHING-OVERLAY', 'VENEER-CAPACITY-TYPE', 'RECORDED-BY', 'MS-TO-RECORD'];
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => (r[i] ?? '').length)));
  console.log('\n' + [header, ...rows].map((r) => r.map((c, i) => (c ?? '').padEnd(widths[i] ?? 0)).join('  ')).join('\n'));
  console.log('\nMS-TO-RECORD: from the start of the launch (NodeClaim, kubelet CREATE, registration) to the record; webhook records');
  console.log('came back inside those calls, reconciler records were polled every 100 ms. Labels are never changed afterwards.');

  // Metrics answer only a token the apiserver accepts, of an identity allowed to get /metrics:
  // here a ServiceAccount bound to metrics-reader, as Prometheus' would be.
  await grantMetricsReader(admin, [{ kind: 'ServiceAccount', name: 'prometheus', namespace: 'monitoring' }]);
  const token = await cp.serviceAccountToken('monitoring', 'prometheus');
  const metrics = (await scrape(watcher.metricsPort, { caPem, token })).body;
  console.log('\nKey metrics (HTTPS, as ServiceAccount monitoring/prometheus, bound to metrics-reader):');
  for (const line of metrics.split('\n')) {
    if (/^veneer_nodewatcher_(nodes_labeled_total|nodes_influenced_current|nodes_pending|labeling_errors_total|leader|cache_refresh_total)[ {]/.test(line)) console.log(`  ${line}`);
    if (/^veneer_nodewatcher_admission_requests_total\{.*webhook="mutate"/.test(line)) console.log(`  ${line}`);
  }

  if (keep) {
    // What a user tries next must meet the webhook, not only the reconciler.
    step('registering the mutating webhook again before handing over');
    await registrations.createMutatingWebhookConfiguration({ body: mutatingWebhookConfiguration(reg) });
    await waitForMutatingWebhook(admin, config.labelNamespace);
    const path = cp.writeKubeConfig();
    const metricsUrl = `https://127.0.0.1:${watcher.metricsPort}/metrics`;
    console.log([
      '\n--keep: the control plane and the watcher keep running. Try:',
      `  KUBECONFIG=${path} kubectl get nodes -L veneer.io/overlay-influenced,veneer.io/capacity-type`,
      `  curl -s --cacert ${join(certDir, 'ca.crt')} -H "Authorization: Bearer $(KUBECONFIG=${path} kubectl -n monitoring create token prometheus)" ${metricsUrl} | grep veneer_`,
      `  curl -s --cacert ${join(certDir, 'ca.crt')} ${metricsUrl}     # no token: 401`,
      'Ctrl-C to stop and clean up.',
    ].join('\n'));
    await new Promise(() => {});
  }
  step('tearing down');
  await teardown();
  step('done');
} catch (err) {
  console.error(`[demo] failed: ${(err as Error).stack ?? err}`);
  await teardown();
  process.exitCode = 1;
}

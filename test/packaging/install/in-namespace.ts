// The body of test/packaging/install.test.ts, run inside its own network namespace: the chart installed
// for real, cert-manager's own controllers issuing and injecting, the watcher run as the pod
// would run, and the apiserver calling it through the chart's Service.
import { X509Certificate } from 'node:crypto';
import { join } from 'node:path';
import { connect } from 'node:tls';
import t from 'tap';
import * as k8s from '@kubernetes/client-node';
import { stringify } from 'yaml';
import { CHART, NS, RELEASE, helm, ruleGroups, testRules } from '../../support/chart.ts';
import { condition, readCertificate, renewCertificate, startCertManager } from '../../../kit/cert-manager.ts';
import { ControlPlane } from '../../../kit/control-plane.ts';
import { counter, Fleet, sleep, until } from '../../../kit/fleet.ts';
import { installKarpenterCRDs } from '../../../kit/karpenter-crds.ts';
import { mergePatch } from '../../../kit/karpenter-sim.ts';
import { assertInOwnNetworkNamespace, POD_IP } from '../../../kit/netns.ts';
import { inputSeries, type Scrape } from '../../support/prometheus.ts';
import { startPod, type Pod } from './pod.ts';

assertInOwnNetworkNamespace();
const startedAt = Date.now();
const figures: string[] = [];
const secs = (from: number) => ((Date.now() - from) / 1000).toFixed(1);

const cp = await ControlPlane.start({ extraApiServerArgs: ['--enable-aggregator-routing=true'] });
const admin = cp.adminKubeConfig();
let pod: Pod | undefined;
const certManager = await startCertManager(cp).catch(async (err) => {
  await cp.stop();
  throw err;
});
t.teardown(async () => {
  // What the processes said is gone with the control plane's directory: show it on a failure.
  if (!t.passing())
    for (const p of [certManager, pod?.process]) if (p) console.error(`--- ${p.name}'s log ends:\n${p.logTail(60)}`);
  await pod?.process.stop();
  await certManager.stop();
  await cp.stop();
  console.error(`install figures (${secs(startedAt)} s in all):\n  ${figures.join('\n  ')}`);
});
await installKarpenterCRDs(cp);
const core = admin.makeApiClient(k8s.CoreV1Api);
const registrations = admin.makeApiClient(k8s.AdmissionregistrationV1Api);
const fleet = new Fleet(cp, admin);
const SERVICE_NAMES = [`${RELEASE}.${NS}.svc`, `${RELEASE}.${NS}.svc.cluster.local`];
const SECRET = `${RELEASE}-tls`;
const LAUNCHES = 12;
const PROMETHEUS = { namespace: 'monitoring', name: 'prometheus' };
const PROMETHEUS_READER = [
  '--set',
  'metrics.readers[0].kind=ServiceAccount',
  '--set',
  `metrics.readers[0].name=${PROMETHEUS.name}`,
  '--set',
  `metrics.readers[0].namespace=${PROMETHEUS.namespace}`,
];
const failOpens = async () =>
  counter((await cp.get('/metrics')).body, 'apiserver_admission_webhook_fail_open_count', {});
const webhookCAs = async () =>
  ((await registrations.readMutatingWebhookConfiguration({ name: RELEASE })).webhooks ?? []).map((w) =>
    Buffer.from(w.clientConfig.caBundle ?? '', 'base64').toString(),
  );
const secretData = async () =>
  Object.fromEntries(
    Object.entries((await core.readNamespacedSecret({ name: SECRET, namespace: NS })).data ?? {}).map(([k, v]) => [
      k,
      Buffer.from(v, 'base64'),
    ]),
  );
// The watcher's /metrics at the end of each phase, on the minute timeline a Prometheus would have
// stored: the bypassed phase 40 minutes after the others, so that the alert's 30-minute window
// holds it alone, as it would a webhook broken since the last upgrade.
const scrapes: Scrape[] = [];
// A dry-run CREATE of a node the mutating webhook records: is it being answered?
const PROBE = {
  metadata: {
    name: 'probe',
    labels: {
      'karpenter.sh/nodepool': 'probe',
      'karpenter.sh/capacity-type': 'on-demand',
      'karpenter.sh/registered': 'true',
    },
  },
};
const webhookAnswers = async () =>
  (await core.createNode({ body: PROBE, dryRun: 'All' })).metadata?.labels?.['veneer.io/overlay-influenced'] !==
  undefined;

/** The certificate a client gets from the Service's endpoint, verified as the apiserver verifies it. */
function servedCertificate(ca: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const s = connect({ host: POD_IP, port: pod!.webhookPort, servername: SERVICE_NAMES[0], ca }, () => {
      resolve(s.getPeerX509Certificate()?.fingerprint256 ?? '');
      s.end();
    });
    s.on('error', reject);
  });
}

t.test('helm install: cert-manager issues the serving certificate and injects the CA', async (t) => {
  const started = Date.now();
  const env = {
    ...process.env,
    KUBECONFIG: cp.writeKubeConfig(),
    HELM_CACHE_HOME: join(cp.dir, 'helm'),
    HELM_CONFIG_HOME: join(cp.dir, 'helm'),
    HELM_DATA_HOME: join(cp.dir, 'helm'),
  };
  // As the README installs it, with Prometheus' ServiceAccount allowed to scrape.
  const install = helm(
    [
      'install',
      RELEASE,
      CHART,
      '-n',
      NS,
      '--create-namespace',
      '--set',
      'nodeWatcher.enabled=true',
      ...PROMETHEUS_READER,
    ],
    env,
  );
  t.equal(install.status, 0, install.stderr);
  for (const name of [`${RELEASE}-ca`, `${RELEASE}-serving`]) {
    await until(
      `Certificate ${name} Ready`,
      async () => condition(await readCertificate(admin, NS, name), 'Ready')?.status === 'True',
      90_000,
    );
    t.pass(`Certificate ${name} is Ready`);
  }
  figures.push(`helm install to both Certificates Ready: ${secs(started)} s`);
  const data = await secretData();
  t.same(
    Object.keys(data).sort(),
    ['ca.crt', 'tls.crt', 'tls.key'],
    'the Secret holds the certificate, its key and the CA',
  );
  t.match(
    data['tls.key']!.toString(),
    /^-----BEGIN EC PRIVATE KEY-----/,
    "the key in cert-manager's default encoding (PKCS#1/SEC 1), which the watcher must read",
  );
  const cert = new X509Certificate(data['tls.crt']!);
  t.equal(cert.subjectAltName, SERVICE_NAMES.map((n) => `DNS:${n}`).join(', '), "exactly the Service's DNS names");
  t.ok(
    cert.checkIssued(new X509Certificate(data['ca.crt']!)) &&
      cert.verify(new X509Certificate(data['ca.crt']!).publicKey),
    "issued and signed by the chart's CA",
  );
  await until(
    'the CA injected into both webhook configurations',
    async () => (await webhookCAs()).every((ca) => ca === data['ca.crt']!.toString()),
    60_000,
  );
  t.pass("cainjector wrote the CA into the webhook's configuration");
  figures.push(`helm install to CA injected: ${secs(started)} s`);
});

t.test("the apiserver calls the webhook through the chart's Service", async (t) => {
  await fleet.createOverlays();
  pod = await startPod(cp, await secretData(), PROMETHEUS);
  const slice = await pod.publishEndpoints();
  t.match(
    slice.endpoints?.[0],
    { addresses: [POD_IP], conditions: { ready: true } },
    "the Service's endpoint is the pod address",
  );
  // The first reviews may precede the apiserver's view of the endpoints: wait for one to be answered.
  await until('a review through the Service', webhookAnswers, 30_000);
  const failOpensBefore = await failOpens();
  scrapes.push({ minute: 0, text: await pod.metrics() });
  await fleet.burst('healthy', LAUNCHES);
  t.same(
    [...(await fleet.decidedBy('healthy')).values()],
    Array(LAUNCHES).fill('webhook'),
    `all ${LAUNCHES} launches recorded inline (decidedBy: webhook)`,
  );
  t.same(await fleet.wrongRecords('healthy'), [], 'each record names the overlay Karpenter would have applied');
  const denied = await core
    .patchNode(
      { name: 'healthy-0', body: { metadata: { labels: { 'veneer.io/overlay-influenced': 'false' } } } },
      mergePatch,
    )
    .then(
      () => 'allowed',
      (e: { code?: number; body?: string }) => `${e.code} ${e.body}`,
    );
  t.match(
    denied,
    /^403 .*ValidatingAdmissionPolicy 'veneer-node-watcher'.*veneer\.io\/overlay-influenced.*cannot be changed or removed/,
    "a user's change to a record is denied by the chart's guard",
  );
  t.equal(await failOpens(), failOpensBefore, 'no call to the webhook failed open');
  figures.push(
    `through the Service: ${LAUNCHES} launches recorded inline, a change denied, fail-open count ${await failOpens()} (${failOpensBefore} before the first answered review)`,
  );
  scrapes.push({ minute: 1, text: await pod.metrics() });
});

t.test('renewal: cert-manager reissues, the new Secret is projected, reviews go on without a restart', async (t) => {
  const p = pod!;
  const ca = (await secretData())['ca.crt']!.toString();
  const oldCert = (await secretData())['tls.crt']!.toString();
  const failOpensBefore = await failOpens();
  const reloadsBefore = counter(await p.metrics(), 'veneer_nodewatcher_cert_reloads_total', { result: 'success' });
  const before = await servedCertificate(ca);
  const load = fleet.steady('renewal', 2);
  await sleep(500);
  const triggered = Date.now();
  await renewCertificate(admin, NS, `${RELEASE}-serving`);
  await until(
    'a new certificate in the Secret',
    async () => (await secretData())['tls.crt']!.toString() !== oldCert,
    60_000,
  );
  const issuedMs = Date.now() - triggered;
  const renewed = await secretData();
  p.volume.write(renewed);
  const projected = Date.now();
  const next = new X509Certificate(renewed['tls.crt']!).fingerprint256;
  await until('the new certificate served', async () => (await servedCertificate(ca)) === next, 10_000);
  const servedMs = Date.now() - projected;
  await sleep(1000);
  const launched = await load.stop();
  t.not(next, before, 'a new certificate (and, with rotationPolicy Always, a new key)');
  t.equal(
    new X509Certificate(renewed['tls.crt']!).subjectAltName,
    SERVICE_NAMES.map((n) => `DNS:${n}`).join(', '),
    'the same DNS names',
  );
  t.same(await webhookCAs(), [ca], 'the same CA: the injected caBundle stays valid');
  t.same(
    [...(await fleet.decidedBy('renewal')).values()].filter((by) => by !== 'webhook'),
    [],
    `all ${launched} nodes launched during the renewal recorded inline`,
  );
  // The apiserver keeps its connection to the webhook; the server closes it after 30 s idle
  // (keepAliveTimeout), so the next review comes on a new connection, with the new certificate.
  await sleep(31_000);
  await fleet.burst('renewed', 4);
  t.same(
    [...(await fleet.decidedBy('renewed')).values()],
    Array(4).fill('webhook'),
    'reviews on a new connection succeed with the new certificate',
  );
  t.equal(
    counter(await p.metrics(), 'veneer_nodewatcher_cert_reloads_total', { result: 'success' }) - reloadsBefore,
    1,
    'one reload, no restart',
  );
  t.ok(p.process.running, 'the same process throughout');
  t.equal(await failOpens(), failOpensBefore, 'no call failed open');
  figures.push(
    `renewal: Issuing to new Secret ${issuedMs} ms; projected to served ${servedMs} ms; ${launched} launches during it and 4 after 31 s idle, all inline; 0 fail-open, 1 reload, no restart`,
  );
  scrapes.push({ minute: 2, text: await p.metrics() });
});

t.test("a bypassed webhook is loud: with the CA injection removed, the alert's expression turns true", async (t) => {
  const p = pod!;
  const unInject = [
    { op: 'remove', path: '/metadata/annotations/cert-manager.io~1inject-ca-from' },
    { op: 'remove', path: '/webhooks/0/clientConfig/caBundle' },
  ];
  const jsonPatch = k8s.setHeaderOptions('Content-Type', k8s.PatchStrategy.JsonPatch);
  await registrations.patchMutatingWebhookConfiguration({ name: RELEASE, body: unInject }, jsonPatch);
  await until('the apiserver no longer reaching the webhook', async () => !(await webhookAnswers()), 30_000);
  scrapes.push({ minute: 40, text: await p.metrics() });
  const failOpensBefore = await failOpens();
  await fleet.burst('bypassed', LAUNCHES);
  await until(`${LAUNCHES} records`, () => fleet.allRecorded('bypassed', LAUNCHES), 60_000);
  t.same(
    [...(await fleet.decidedBy('bypassed')).values()],
    Array(LAUNCHES).fill('reconciler'),
    `the same ${LAUNCHES} launches, all recorded by the reconciler`,
  );
  t.same(await fleet.wrongRecords('bypassed'), [], 'each record still right');
  const failed = (await failOpens()) - failOpensBefore;
  t.ok(failed >= LAUNCHES, `the apiserver failed open ${failed} times: the webhook was bypassed, silently`);
  scrapes.push({ minute: 41, text: await p.metrics() });

  const alert = ruleGroups()
    .flatMap((g) => g.rules)
    .find((r) => r.alert === 'VeneerNodeWatcherWebhookBypassed')!;
  const at = (minute: number, fires: boolean) => ({
    expr: `count(${alert.expr})`,
    eval_time: `${minute}m`,
    exp_samples: fires ? [{ labels: '{}', value: 1 }] : [],
  });
  const tests = stringify({
    rule_files: ['rules.yaml'],
    evaluation_interval: '1m',
    tests: [
      {
        interval: '1m',
        input_series: inputSeries(scrapes, 'veneer_nodewatcher_nodes_labeled_total'),
        promql_expr_test: [at(2, false), at(40, false), at(41, true)],
      },
    ],
  });
  const run = testRules(tests);
  t.equal(
    run.status,
    0,
    "on the watcher's own metrics the expression is false while the webhook works, true once it is bypassed",
    { output: run.output, tests },
  );
  figures.push(
    `bypass: ${failed} fail-opens, ${LAUNCHES} reconciler records, VeneerNodeWatcherWebhookBypassed's expression true on the scrapes`,
  );
});

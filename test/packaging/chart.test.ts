// The Helm chart and the plain manifests, proven with a real helm, promtool and apiserver, and
// the watcher running under the chart's own ServiceAccount and RBAC. The real install, with
// cert-manager's own controllers and the webhooks called through the Service, is
// test/packaging/install.test.ts.
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t from 'tap';
import * as k8s from '@kubernetes/client-node';
import { parse, parseAllDocuments, stringify } from 'yaml';
import { loadConfig } from '../../src/config/load.ts';
import { createLogger } from '../../src/log.ts';
import { startWatcher } from '../../src/commands/serve.ts';
import { mutatingWebhookConfiguration, recordGuardBinding, recordGuardPolicy } from '../../kit/webhook-registration.ts';
import { recordKeys } from '../../src/engine/index.ts';
import { mutatingMatchConditions } from '../../src/engine/scope.ts';
import {
  CHART as chart,
  configMapOf,
  dashboardQueries,
  find,
  helm as run,
  KUBE_VERSION,
  NS,
  type Obj,
  renderRaw,
  ruleGroups,
  template,
  testRules,
} from '../support/chart.ts';
import { promtool } from '../support/prometheus.ts';
import { clientFor, ControlPlane, freePort } from '../../kit/control-plane.ts';
import { installExternalCRDs } from '../support/external-crds.ts';
import { installKarpenterCRDs } from '../../kit/karpenter-crds.ts';
import { KarpenterSim } from '../../kit/karpenter-sim.ts';
import { computeSavingsPlan } from '../../kit/veneer.ts';
import { scrape } from '../../kit/scrape.ts';
import {
  KARPENTER_EVENTS_RULES,
  makeWebhookCerts,
  METRICS_READER_RULES,
  WATCHER_CLUSTER_RULES,
} from '../../kit/watcher-env.ts';

const root = join(import.meta.dirname, '..', '..');
const { appVersion } = parse(readFileSync(join(chart, 'Chart.yaml'), 'utf8')) as { appVersion: string };
/** Where the alert tests' fixture names the chart's appVersion (the runbook URLs carry it). */
// biome-ignore lint/suspicious/noTemplateCurlyInString: the fixture's placeholder, not a template string
const APP_VERSION_PLACEHOLDER = '${appVersion}';
const FULL = [
  '--set',
  'nodeWatcher.enabled=true',
  '--set',
  'metrics.serviceMonitor.enabled=true',
  '--set',
  'metrics.prometheusRule.enabled=true',
  '--set',
  'metrics.dashboard.enabled=true',
];
const PROMETHEUS_READER = [
  '--set',
  'metrics.readers[0].kind=ServiceAccount',
  '--set',
  'metrics.readers[0].name=prometheus',
  '--set',
  'metrics.readers[0].namespace=monitoring',
];

t.test('helm lint, and template with default and with full values', async (t) => {
  const lint = run(['lint', chart, '--kube-version', KUBE_VERSION, ...FULL]);
  t.equal(lint.status, 0, lint.stdout + lint.stderr);
  const defaults = template();
  t.notOk(find(defaults, 'MutatingWebhookConfiguration'), 'disabled by default: no webhook registered');
  t.match(renderRaw().stdout, /kind: Deployment/);
  const full = template(FULL);
  for (const kind of [
    'Deployment',
    'Service',
    'ServiceAccount',
    'ConfigMap',
    'ClusterRole',
    'ClusterRoleBinding',
    'Role',
    'RoleBinding',
    'PodDisruptionBudget',
    'Certificate',
    'Issuer',
    'MutatingWebhookConfiguration',
    'ValidatingAdmissionPolicy',
    'ValidatingAdmissionPolicyBinding',
    'ServiceMonitor',
    'PrometheusRule',
  ]) {
    t.ok(find(full, kind), kind);
  }
  const dep = find(full, 'Deployment') as unknown as k8s.V1Deployment;
  t.equal(dep.spec?.replicas, 2);
  const pod = dep.spec?.template.spec;
  t.match(pod?.securityContext, { runAsNonRoot: true, seccompProfile: { type: 'RuntimeDefault' } });
  t.match(pod?.containers[0]?.securityContext, {
    readOnlyRootFilesystem: true,
    allowPrivilegeEscalation: false,
    capabilities: { drop: ['ALL'] },
  });
  t.same(
    pod?.topologySpreadConstraints?.map((c) => c.topologyKey),
    ['topology.kubernetes.io/zone', 'kubernetes.io/hostname'],
  );
});

t.test('metrics: HTTPS behind authentication, probes apart, and the RBAC for both', async (t) => {
  const full = template([...FULL, ...PROMETHEUS_READER]);
  const container = (find(full, 'Deployment') as unknown as k8s.V1Deployment).spec?.template.spec?.containers[0];
  t.same(
    container?.ports?.map((p) => [p.name, p.containerPort]),
    [
      ['webhook', 9443],
      ['metrics', 8443],
      ['health', 8081],
    ],
  );
  t.match(container?.env, [
    { name: 'POD_NAME' },
    {},
    {},
    {},
    { name: 'VENEER_NODE_WATCHER_METRICS_PORT', value: '8443' },
    { name: 'VENEER_NODE_WATCHER_HEALTH_PORT', value: '8081' },
  ]);
  t.same(
    [container?.readinessProbe?.httpGet, container?.livenessProbe?.httpGet],
    [
      { path: '/readyz', port: 'health' },
      { path: '/healthz', port: 'health' },
    ],
    'the kubelet probes the plain-HTTP port, without a token',
  );
  t.same(
    (find(full, 'Service') as unknown as k8s.V1Service).spec?.ports?.map((p) => [p.name, p.port, p.targetPort]),
    [
      ['webhook', 443, 'webhook'],
      ['metrics', 8443, 'metrics'],
    ],
  );
  t.same(
    (find(full, 'ServiceMonitor') as unknown as { spec: { endpoints: object[] } }).spec.endpoints,
    [
      {
        port: 'metrics',
        path: '/metrics',
        interval: '30s',
        scheme: 'https',
        authorization: { type: 'Bearer', credentials: { name: 'veneer-node-watcher-metrics-scraper', key: 'token' } },
        tlsConfig: {
          ca: { secret: { name: 'veneer-node-watcher-tls', key: 'ca.crt' } },
          serverName: 'veneer-node-watcher.veneer-system.svc',
        },
      },
    ],
    "Prometheus scrapes over HTTPS with the chart's scraper token, checking the certificate against the cert-manager CA",
  );
  // The `helm test` hook's role exists only while the test runs (test/packaging/release.test.ts checks it).
  const installed = (objs: Obj[]) => objs.filter((o) => !o.metadata.annotations?.['helm.sh/hook']);
  const roles = installed(full).filter((o) => o.kind === 'ClusterRole') as unknown as k8s.V1ClusterRole[];
  t.same(
    roles.map((r) => r.metadata?.name),
    ['veneer-node-watcher', 'veneer-node-watcher-metrics-reader'],
  );
  t.same(
    roles[0]?.rules,
    WATCHER_CLUSTER_RULES,
    'the watcher: its old rights plus events, tokenreviews and subjectaccessreviews create (the test harness grants the same)',
  );
  t.same(roles[1]?.rules, METRICS_READER_RULES, 'metrics-reader: get /metrics');
  const events = find(full, 'Role', 'karpenter-events') as unknown as k8s.V1Role;
  t.same(
    [events.metadata?.namespace, events.rules],
    ['default', KARPENTER_EVENTS_RULES],
    "Karpenter's Events are read in default only (the test harness grants the same)",
  );
  t.match(find(full, 'ClusterRoleBinding', 'metrics-reader'), {
    roleRef: { name: 'veneer-node-watcher-metrics-reader' },
    subjects: [{ kind: 'ServiceAccount', name: 'prometheus', namespace: 'monitoring' }],
  });
  t.notOk(
    find(template(FULL), 'ClusterRoleBinding', 'metrics-reader'),
    'no binding unless metrics.readers names someone',
  );

  const plain = template([...FULL, '--set', 'nodeWatcher.metrics.secure=false']);
  t.same(
    (installed(plain).filter((o) => o.kind === 'ClusterRole') as unknown as k8s.V1ClusterRole[]).map((r) => [
      r.metadata?.name,
      r.rules?.length,
    ]),
    [['veneer-node-watcher', 4]],
    'metrics.secure=false: no review rights, no metrics-reader',
  );
  const quiet = template([...FULL, '--set', 'nodeWatcher.events.enabled=false']);
  t.notMatch(
    JSON.stringify(find(quiet, 'ClusterRole', 'veneer-node-watcher')),
    /events\.k8s\.io/,
    'events.enabled=false: no right to create Events',
  );
  t.same((find(plain, 'ServiceMonitor') as unknown as { spec: { endpoints: object[] } }).spec.endpoints, [
    { port: 'metrics', path: '/metrics', interval: '30s' },
  ]);
  const own = template([
    ...FULL,
    '--set',
    'metrics.serviceMonitor.authorization.credentials.name=prom-token',
    '--set',
    'metrics.serviceMonitor.authorization.credentials.key=token',
    '--set',
    'metrics.serviceMonitor.tlsConfig.insecureSkipVerify=true',
  ]);
  t.match((find(own, 'ServiceMonitor') as unknown as { spec: { endpoints: object[] } }).spec.endpoints, [
    { authorization: { credentials: { name: 'prom-token', key: 'token' } }, tlsConfig: { insecureSkipVerify: true } },
  ]);
  t.notMatch(
    JSON.stringify(find(own, 'ServiceMonitor')),
    /bearerTokenFile|ca\.crt/,
    'a given authorization and tlsConfig replace the defaults',
  );
});

t.test('values.schema.json stops a wrong value at install time, naming it', async (t) => {
  const r = renderRaw([
    '--set',
    'nodeWatcher.maxConcurrentReconciles=0',
    '--set',
    'webhooks.timeoutSeconds=60',
    '--set',
    'nodeWatcher.typo=1',
    '--set',
    'nodeWatcher.metrics.secure=maybe',
    '--set',
    'nodeWatcher.metrics.authCacheTTL=forever',
    '--set',
    'metrics.readers[0].kind=Pod',
    '--set',
    'metrics.prometheusRule.webhookBypass.percent=100',
    '--set',
    'nodeWatcher.metrics.maxOverlaySeries=0',
    '--set',
    'nodeWatcher.events.ratePerSecond=0',
    '--set',
    'metrics.prometheusRule.overlayIdle.for=a-day',
  ]);
  t.not(r.status, 0);
  t.match(r.stderr, /nodeWatcher\/metrics\/secure.*got string, want boolean/);
  t.match(r.stderr, /nodeWatcher\/metrics\/authCacheTTL.*does not match pattern/);
  t.match(r.stderr, /metrics\/readers\/0\/kind.*value must be one of/);
  t.match(r.stderr, /nodeWatcher\/maxConcurrentReconciles.*minimum: got 0, want 1/);
  t.match(r.stderr, /webhooks\/timeoutSeconds.*maximum: got 60, want 30/);
  t.match(r.stderr, /additional properties 'typo' not allowed/);
  t.match(r.stderr, /webhookBypass\/percent.*maximum: got 100, want 99/);
  t.match(r.stderr, /nodeWatcher\/metrics\/maxOverlaySeries.*minimum: got 0, want 1/);
  t.match(r.stderr, /nodeWatcher\/events\/ratePerSecond.*minimum: got 0, want 1/);
  t.match(r.stderr, /overlayIdle\/for.*does not match pattern/);
});

t.test("the chart's webhooks are exactly the ones the code registers", async (t) => {
  const full = template(FULL);
  const service = { namespace: NS, name: 'veneer-node-watcher', port: 443 };
  const opts = { name: 'veneer-node-watcher', caBundle: '', service, labelNamespace: 'veneer.io', timeoutSeconds: 5 };
  const strip = (w: object) => JSON.parse(JSON.stringify(w, (k, v) => (k === 'caBundle' ? undefined : v)));
  t.same(
    strip((find(full, 'MutatingWebhookConfiguration') as unknown as k8s.V1MutatingWebhookConfiguration).webhooks ?? []),
    strip(mutatingWebhookConfiguration(opts).webhooks ?? []),
  );
  t.notOk(find(full, 'ValidatingWebhookConfiguration'), 'the record is guarded by a policy, not by a webhook');
  t.match(find(full, 'MutatingWebhookConfiguration')?.metadata, {
    annotations: { 'cert-manager.io/inject-ca-from': `${NS}/veneer-node-watcher-serving` },
  });
});

t.test('observe mode: no webhook, and no right to write a node or post an Event; the guard stays', async (t) => {
  const rulesOf = (objs: Obj[]) =>
    (find(objs, 'ClusterRole', 'veneer-node-watcher') as unknown as k8s.V1ClusterRole).rules ?? [];
  const writes = (objs: Obj[]) =>
    rulesOf(objs)
      .filter((r) => r.resources?.some((res) => ['nodes', 'events'].includes(res)))
      .flatMap((r) => r.verbs.filter((v) => !['get', 'list', 'watch'].includes(v)).map((v) => `${v} ${r.resources}`));
  t.same(writes(template(FULL)), ['patch nodes', 'create events'], 'record: patch nodes, post Events');
  const observe = template([...FULL, '--set', 'nodeWatcher.mode=observe']);
  t.notOk(find(observe, 'MutatingWebhookConfiguration'), 'observe: no mutating webhook');
  t.same(writes(observe), [], 'observe: no right to write a node or an Event');
  t.ok(find(observe, 'ValidatingAdmissionPolicy'), 'the guard still keeps the records made before');
  const config = parse((configMapOf(observe) as unknown as k8s.V1ConfigMap).data?.['config.yaml'] ?? '') as {
    nodeWatcher: { mode: string; holdWhileNoOverlaySelected: boolean };
  };
  t.match(config.nodeWatcher, { mode: 'observe', holdWhileNoOverlaySelected: true }, 'the process is told');
});

t.test("the matchConditions the chart renders are the engine's scope rule, for any label namespace", async (t) => {
  const conditions = (objs: Obj[]) => ({
    mutating: (
      find(objs, 'MutatingWebhookConfiguration') as unknown as k8s.V1MutatingWebhookConfiguration
    ).webhooks?.map((w) => w.matchConditions),
  });
  const engine = (labelNamespace: string) => {
    const keys = recordKeys(labelNamespace);
    return { mutating: [mutatingMatchConditions(keys)] };
  };
  t.same(conditions(template(FULL)), engine('veneer.io'), 'the default labelNamespace');
  t.same(
    conditions(template([...FULL, '--set', 'nodeWatcher.labelNamespace=nodes.example.com'])),
    engine('nodes.example.com'),
    'another labelNamespace',
  );
  const manifests = parseAllDocuments(readFileSync(join(root, 'webhook-manifests', 'veneer-node-watcher.yaml'), 'utf8'))
    .map((d) => d.toJSON() as Obj)
    .filter(Boolean);
  t.same(conditions(manifests), engine('veneer.io'), 'webhook-manifests/');
});

t.test("the record's guard the chart renders is the engine's, for any label namespace and identities", async (t) => {
  const watcher = `system:serviceaccount:${NS}:veneer-node-watcher`;
  const rendered = (objs: Obj[]) => ({
    policy: (find(objs, 'ValidatingAdmissionPolicy') as unknown as k8s.V1ValidatingAdmissionPolicy).spec,
    binding: (find(objs, 'ValidatingAdmissionPolicyBinding') as unknown as k8s.V1ValidatingAdmissionPolicyBinding).spec,
  });
  const engine = (labelNamespace: string, users: string[], groups: string[]) => ({
    policy: recordGuardPolicy('veneer-node-watcher', labelNamespace, { users: [watcher, ...users], groups }).spec,
    binding: recordGuardBinding('veneer-node-watcher').spec,
  });
  t.same(rendered(template(FULL)), engine('veneer.io', [], []), 'the defaults');
  t.same(
    rendered(
      template([
        ...FULL,
        '--set',
        'nodeWatcher.labelNamespace=nodes.example.com',
        '--set',
        "recordGuard.allowedUsers={alice,o'brien}",
        '--set',
        'recordGuard.allowedGroups={ops}',
      ]),
    ),
    engine('nodes.example.com', ['alice', "o'brien"], ['ops']),
    'another namespace, allowed users (one with a quote) and groups',
  );
  t.same(
    rendered(
      template([
        ...FULL,
        '--set',
        'nodeWatcher.webhook.allowedUsers={bob}',
        '--set',
        'nodeWatcher.webhook.allowedGroups={sre}',
      ]),
    ),
    engine('veneer.io', ['bob'], ['sre']),
    "chart 0.1.0's nodeWatcher.webhook.allowedUsers/allowedGroups still count",
  );
  const cm = configMapOf(
    template([...FULL, '--set', 'nodeWatcher.webhook.allowedUsers={bob}']),
  ) as unknown as k8s.V1ConfigMap;
  t.notMatch(cm.data?.['config.yaml'] ?? '', /allowed/, "and stay out of the watcher's own configuration");
});

t.test("webhook-manifests/ is the chart's rendering, not a hand-kept copy", async (t) => {
  const committed = readFileSync(join(root, 'webhook-manifests', 'veneer-node-watcher.yaml'), 'utf8')
    .split('\n')
    .slice(1)
    .join('\n');
  const rendered = execFileSync('bash', [join(root, 'scripts', 'render-manifests.sh'), '--stdout'], {
    encoding: 'utf8',
  });
  t.equal(committed, rendered, 'run scripts/render-manifests.sh after changing the chart');
});

t.test('the ConfigMap is named by its content: a change makes a new one, which the pods mount', async (t) => {
  const mounted = (objs: Obj[]) =>
    (find(objs, 'Deployment') as unknown as k8s.V1Deployment).spec?.template.spec?.volumes?.find(
      (v) => v.name === 'config',
    )?.configMap?.name;
  const before = template(FULL);
  const after = template([...FULL, '--set', 'nodeWatcher.logLevel=debug']);
  t.match(configMapOf(before)?.metadata.name, /^veneer-node-watcher-[0-9a-f]{10}$/);
  t.equal(mounted(before), configMapOf(before)?.metadata.name, 'the pods mount it');
  t.not(configMapOf(after)?.metadata.name, configMapOf(before)?.metadata.name, 'another content, another name');
  t.equal(mounted(after), configMapOf(after)?.metadata.name);
  t.equal(
    configMapOf(template(FULL))?.metadata.name,
    configMapOf(before)?.metadata.name,
    'the same values, the same name',
  );
  const long = template([...FULL, '--set', `fullnameOverride=${'v'.repeat(63)}`]);
  t.ok((configMapOf(long)?.metadata.name.length ?? 99) <= 63, 'within 63 characters whatever the name');
});

t.test('the rendered config file is valid for the watcher', async (t) => {
  const cm = configMapOf(template(FULL)) as unknown as k8s.V1ConfigMap;
  const dir = mkdtempSync(join(tmpdir(), 'vnw-chart-'));
  writeFileSync(join(dir, 'config.yaml'), cm.data?.['config.yaml'] ?? '');
  const { config } = loadConfig({ file: join(dir, 'config.yaml') });
  t.match(config, { enabled: true, labelNamespace: 'veneer.io', maxConcurrentReconciles: 5 });
});

/** A values file in a fresh directory, for values `--set` cannot give (lists of objects). */
function valuesFile(values: object): string[] {
  const dir = mkdtempSync(join(tmpdir(), 'vnw-values-'));
  writeFileSync(join(dir, 'values.yaml'), stringify(values));
  return ['-f', join(dir, 'values.yaml')];
}

const HOST_NETWORK = valuesFile({
  nodeWatcher: { enabled: true },
  hostNetwork: true,
  containerPorts: { webhook: 19443, metrics: 18443, health: 18081 },
});

/**
 * The ports as each rendered object says them: the container's, the watcher's own (its config
 * file and the Deployment's environment, loaded as the watcher loads them), the Service's
 * targets and the probes' (names resolved through the container's ports), the NetworkPolicy's.
 */
function ports(objs: Obj[]) {
  const pod = (find(objs, 'Deployment') as unknown as k8s.V1Deployment).spec?.template.spec;
  const container = pod?.containers[0];
  const byName = (p: string | number | undefined) =>
    typeof p === 'number' ? p : container?.ports?.find((c) => c.name === p)?.containerPort;
  const cm = configMapOf(objs) as unknown as k8s.V1ConfigMap;
  const dir = mkdtempSync(join(tmpdir(), 'vnw-ports-'));
  writeFileSync(join(dir, 'config.yaml'), cm.data?.['config.yaml'] ?? '');
  const env = Object.fromEntries(
    (container?.env ?? []).flatMap((e) => (e.value === undefined ? [] : [[e.name, e.value] as const])),
  );
  const { config } = loadConfig({ file: join(dir, 'config.yaml'), env });
  const service = (find(objs, 'Service') as unknown as k8s.V1Service).spec?.ports ?? [];
  const policy = find(objs, 'NetworkPolicy') as unknown as k8s.V1NetworkPolicy | undefined;
  return {
    container: Object.fromEntries((container?.ports ?? []).map((p) => [p.name, p.containerPort])),
    watcher: { webhook: config.webhook.port, metrics: config.metrics.port, health: config.health.port },
    service: Object.fromEntries(service.map((p) => [p.name, byName(p.targetPort)])),
    probes: [byName(container?.readinessProbe?.httpGet?.port), byName(container?.livenessProbe?.httpGet?.port)],
    networkPolicy: policy?.spec?.ingress?.map((r) => r.ports?.map((p) => p.port)),
  };
}

t.test("hostNetwork: the node's network, and every object names the same ports", async (t) => {
  const defaults = template(FULL);
  const pod = (objs: Obj[]) => (find(objs, 'Deployment') as unknown as k8s.V1Deployment).spec?.template.spec;
  t.equal(pod(defaults)?.hostNetwork, undefined, 'the pod network by default');
  t.equal(pod(defaults)?.dnsPolicy, undefined);
  t.same(
    ports(defaults),
    {
      container: { webhook: 9443, metrics: 8443, health: 8081 },
      watcher: { webhook: 9443, metrics: 8443, health: 8081 },
      service: { webhook: 9443, metrics: 8443 },
      probes: [8081, 8081],
      networkPolicy: undefined,
    },
    'the default ports, the same in the container, the watcher, the Service and the probes',
  );

  const host = template([...HOST_NETWORK, '--set', 'networkPolicy.enabled=true']);
  t.equal(pod(host)?.hostNetwork, true);
  t.equal(pod(host)?.dnsPolicy, 'ClusterFirstWithHostNet', 'cluster names still resolve on the host network');
  t.same(
    ports(host),
    {
      container: { webhook: 19443, metrics: 18443, health: 18081 },
      watcher: { webhook: 19443, metrics: 18443, health: 18081 },
      service: { webhook: 19443, metrics: 18443 },
      probes: [18081, 18081],
      networkPolicy: [[19443], [18081]],
    },
    'containerPorts move the container, the listeners, the Service targets, the probes and the policy together',
  );
  t.same(
    (find(host, 'Service') as unknown as k8s.V1Service).spec?.ports?.map((p) => [p.name, p.port]),
    [
      ['webhook', 443],
      ['metrics', 8443],
    ],
    'the Service ports, which the webhook configurations name, stay',
  );

  const clash = renderRaw(['--set', 'containerPorts.health=8443']);
  t.not(clash.status, 0);
  t.match(clash.stderr, /containerPorts: webhook, metrics and health need three different ports/);
  const override = renderRaw([
    '--set',
    'extraEnv[0].name=VENEER_NODE_WATCHER_WEBHOOK_PORT',
    '--set',
    'extraEnv[0].value=9444',
  ]);
  t.not(override.status, 0, 'extraEnv may not move a listener behind the chart');
  t.match(override.stderr, /extraEnv: VENEER_NODE_WATCHER_WEBHOOK_PORT is set by the chart from containerPorts/);
});

t.test("extraEnv, extraVolumes and extraVolumeMounts are rendered as given, after the chart's own", async (t) => {
  const extraEnv = [
    { name: 'AWS_REGION', value: 'eu-west-1' },
    { name: 'AWS_ENDPOINT_URL_EC2', value: 'https://vpce-0123456789abcdef0-abcd1234.ec2.eu-west-1.vpce.amazonaws.com' },
    { name: 'HOST_IP', valueFrom: { fieldRef: { fieldPath: 'status.hostIP' } } },
  ];
  const extraVolumes = [{ name: 'extra-ca', configMap: { name: 'corporate-ca', optional: true } }];
  const extraVolumeMounts = [{ name: 'extra-ca', mountPath: '/etc/veneer-node-watcher/extra-ca', readOnly: true }];
  const container = (objs: Obj[]) =>
    (find(objs, 'Deployment') as unknown as k8s.V1Deployment).spec?.template.spec?.containers[0];
  const volumes = (objs: Obj[]) =>
    (find(objs, 'Deployment') as unknown as k8s.V1Deployment).spec?.template.spec?.volumes;

  const defaults = template(FULL);
  const chartEnv = container(defaults)?.env ?? [];
  t.same(
    chartEnv.map((e) => e.name),
    [
      'POD_NAME',
      'VENEER_NODE_WATCHER_LEADER_ELECTION_LEASE_NAMESPACE',
      'VENEER_NODE_WATCHER_LEADER_ELECTION_LEASE_NAME',
      'VENEER_NODE_WATCHER_WEBHOOK_PORT',
      'VENEER_NODE_WATCHER_METRICS_PORT',
      'VENEER_NODE_WATCHER_HEALTH_PORT',
    ],
    "by default only the chart's own",
  );
  t.same(
    volumes(defaults)?.map((v) => v.name),
    ['tls', 'config'],
  );

  const extra = template([...FULL, ...valuesFile({ extraEnv, extraVolumes, extraVolumeMounts })]);
  t.same(container(extra)?.env, [...chartEnv, ...extraEnv]);
  t.same(volumes(extra), [...(volumes(defaults) ?? []), ...extraVolumes]);
  t.same(container(extra)?.volumeMounts, [...(container(defaults)?.volumeMounts ?? []), ...extraVolumeMounts]);
  t.same(configMapOf(extra), configMapOf(defaults), 'the config file is untouched');
});

t.test('the NetworkPolicy: only when enabled; webhook and probes open, metrics to metricsFrom', async (t) => {
  t.notOk(find(template(FULL), 'NetworkPolicy'), 'none by default');
  const selector = (find(template(FULL), 'Deployment') as unknown as k8s.V1Deployment).spec?.selector.matchLabels;

  const open = find(template([...FULL, '--set', 'networkPolicy.enabled=true']), 'NetworkPolicy') as unknown as
    | k8s.V1NetworkPolicy
    | undefined;
  t.same(
    open?.spec,
    {
      podSelector: { matchLabels: selector },
      policyTypes: ['Ingress'],
      ingress: [{ ports: [{ port: 9443, protocol: 'TCP' }] }, { ports: [{ port: 8081, protocol: 'TCP' }] }],
    },
    'the webhook and the probes from anywhere, no one to metrics, egress not restricted',
  );

  const metricsFrom = [
    {
      namespaceSelector: { matchLabels: { 'kubernetes.io/metadata.name': 'monitoring' } },
      podSelector: { matchLabels: { 'app.kubernetes.io/name': 'prometheus' } },
    },
  ];
  const egress = [{ to: [{ ipBlock: { cidr: '10.0.0.0/8' } }], ports: [{ port: 443, protocol: 'TCP' }] }];
  const closed = find(
    template([...FULL, ...valuesFile({ networkPolicy: { enabled: true, metricsFrom, egress } })]),
    'NetworkPolicy',
  ) as unknown as k8s.V1NetworkPolicy | undefined;
  t.same(
    closed?.spec,
    {
      podSelector: { matchLabels: selector },
      policyTypes: ['Ingress', 'Egress'],
      ingress: [
        { ports: [{ port: 9443, protocol: 'TCP' }] },
        { ports: [{ port: 8081, protocol: 'TCP' }] },
        { from: metricsFrom, ports: [{ port: 8443, protocol: 'TCP' }] },
      ],
      egress,
    },
    'metrics to the given peers, egress as given',
  );
});

t.test('the PodDisruptionBudget never blocks a drain', async (t) => {
  const pdb = (extra: string[]) =>
    find(template(extra), 'PodDisruptionBudget') as unknown as k8s.V1PodDisruptionBudget | undefined;
  t.notOk(
    pdb(['--set', 'replicaCount=1']),
    'one replica: no budget (minAvailable 1 would forbid every eviction of it)',
  );
  const selector = (find(template(), 'Deployment') as unknown as k8s.V1Deployment).spec?.selector;
  t.same(
    pdb([])?.spec,
    { minAvailable: 1, unhealthyPodEvictionPolicy: 'AlwaysAllow', selector },
    'two replicas: one stays up while the other is evicted; an unready one is evicted regardless',
  );
  t.equal(pdb(['--set', 'replicaCount=3', '--set', 'podDisruptionBudget.minAvailable=2'])?.spec?.minAvailable, 2);
  t.equal(pdb(['--set', 'podDisruptionBudget.minAvailable=50%'])?.spec?.minAvailable, '50%');
  t.notOk(pdb(['--set', 'podDisruptionBudget.enabled=false']), 'off when disabled');
  for (const [replicas, minAvailable] of [
    ['2', '2'],
    ['2', '51%'],
    ['3', '67%'],
    ['1', '1'],
  ] as const) {
    const r = renderRaw([
      '--set',
      `replicaCount=${replicas}`,
      '--set',
      `podDisruptionBudget.minAvailable=${minAvailable}`,
    ]);
    if (replicas === '1') {
      t.equal(r.status, 0, 'with one replica there is no budget to refuse');
      continue;
    }
    t.not(r.status, 0, `minAvailable ${minAvailable} of ${replicas} refused`);
    t.match(r.stderr, /would block every drain/);
  }
});

t.test('values.schema.json types the new values', async (t) => {
  const wrong = [
    '--set',
    'hostNetwork=yes',
    '--set',
    'containerPorts.webhook=443',
    '--set',
    'containerPorts.typo=1',
    '--set',
    'networkPolicy.enabled=sometimes',
    '--set',
    'networkPolicy.metricsFrom=prometheus',
    '--set',
    'extraVolumeMounts[0].name=a',
    '--set',
    'podDisruptionBudget.minAvailable=one',
  ];
  for (const command of ['lint', 'template']) {
    const r = run([command, ...(command === 'template' ? ['x'] : []), chart, '--kube-version', KUBE_VERSION, ...wrong]);
    t.not(r.status, 0, `helm ${command} fails`);
    const out = r.stdout + r.stderr;
    t.match(out, /\/hostNetwork.*got string, want boolean/, command);
    t.match(out, /\/containerPorts\/webhook.*minimum: got 443, want 1,024/, command);
    t.match(out, /\/containerPorts.*additional properties 'typo' not allowed/, command);
    t.match(out, /\/networkPolicy\/enabled.*got string, want boolean/, command);
    t.match(out, /\/networkPolicy\/metricsFrom.*got string, want array/, command);
    t.match(out, /\/extraVolumeMounts\/0.*missing property 'mountPath'/, command);
    t.match(out, /\/podDisruptionBudget\/minAvailable.*does not match pattern/, command);
  }
  const r = renderRaw(['--set', 'extraEnv.name=AWS_REGION']);
  t.match(r.stderr, /\/extraEnv.*got object, want array/);
});

t.test(
  'promtool accepts the PrometheusRule, and every alert fires on the series it is for and only on them',
  async (t) => {
    const groups = ruleGroups();
    t.same(
      groups[0]?.rules.map((r) => r.alert ?? r.record),
      [
        'source:veneer_nodewatcher_nodes_labeled:increase30m',
        'VeneerNodeWatcherLabelingErrors',
        'VeneerNodeWatcherNodesPending',
        'VeneerNodeWatcherWebhookErrors',
        'VeneerNodeWatcherCertificateExpiring',
        'VeneerNodeWatcherWebhookBypassed',
        'VeneerNodeWatcherWebhookFailingOpen',
        'VeneerNodeWatcherOverlayIdle',
        'VeneerNodeWatcherKarpenterCRDMissing',
        'VeneerNodeWatcherOverlaysNotCounting',
        'VeneerNodeWatcherNoOverlaySelected',
        'VeneerNodeWatcherProviderInDoubt',
        'VeneerNodeWatcherSpotPricesUnknown',
        'VeneerNodeWatcherNoLeader',
        'VeneerNodeWatcherAbsent',
      ],
    );
    const absent = (extra: string[]) =>
      ruleGroups(extra)[0]?.rules.find((r) => r.alert === 'VeneerNodeWatcherAbsent')?.expr;
    t.equal(
      absent([]),
      'absent(veneer_nodewatcher_leader{job="veneer-node-watcher",namespace="veneer-system"})',
      'absent: the job and namespace the ServiceMonitor gives (the Service, the release namespace)',
    );
    t.equal(
      absent(['--set-string', 'metrics.prometheusRule.absent.selector=job="vnw"\\,cluster="prod"']),
      'absent(veneer_nodewatcher_leader{job="vnw",cluster="prod"})',
      'absent: the selector given',
    );
    // A selector is PromQL, not YAML: ` #` or `: ` in a label value must not end the expression
    // (a comment) or break the document, either of which would fail the whole rule group.
    t.equal(
      absent(['--set-string', 'metrics.prometheusRule.absent.selector=job="vnw"\\,cluster=~"eu: prod #1"']),
      'absent(veneer_nodewatcher_leader{job="vnw",cluster=~"eu: prod #1"})',
      'absent: a selector with YAML-significant characters, whole',
    );
    for (const source of ['static', 'off'])
      t.notOk(
        ruleGroups(['--set', `nodeWatcher.prices.source=${source}`])[0]?.rules.some(
          (r) => r.alert === 'VeneerNodeWatcherSpotPricesUnknown',
        ),
        `no spot-prices alert with prices.source ${source}: no spot prices by choice`,
      );
    t.notOk(
      ruleGroups([])[0]?.rules.some((r) => r.alert === 'VeneerNodeWatcherOverlayIdle'),
      'the idle-overlay alert is off by default',
    );
    const dir = mkdtempSync(join(tmpdir(), 'vnw-rules-'));
    writeFileSync(join(dir, 'rules.yaml'), stringify({ groups }));
    const check = promtool(['check', 'rules', join(dir, 'rules.yaml')]);
    t.match(check.stdout, /SUCCESS: 15 rules found/, check.stderr);
    const tests = readFileSync(
      join(root, 'test', 'fixtures', 'prometheus', 'alert-rules.test.yaml'),
      'utf8',
    ).replaceAll(APP_VERSION_PLACEHOLDER, appVersion);
    const tested = new Set([...tests.matchAll(/alertname: (\w+)/g)].map((m) => m[1]));
    t.same(
      [...tested].sort(),
      groups.flatMap((g) => g.rules.flatMap((r) => r.alert ?? [])).sort(),
      'the test file covers every alert',
    );
    const unit = testRules(tests);
    t.equal(unit.status, 0, 'promtool test rules: every case passes', { output: unit.output });
  },
);

t.test('the dashboard: a data source and a cluster variable, and every query PromQL promtool accepts', async (t) => {
  const dashboard = JSON.parse(readFileSync(join(chart, 'dashboards', 'veneer-node-watcher.json'), 'utf8')) as {
    templating: { list: { name: string; type: string; query: unknown; includeAll?: boolean; allValue?: string }[] };
    panels: { title: string; datasource?: unknown; targets: { expr: string; datasource?: unknown }[] }[];
  };
  const variables = Object.fromEntries(dashboard.templating.list.map((v) => [v.name, v]));
  t.match(variables.datasource, { type: 'datasource', query: 'prometheus' }, 'the Prometheus to read, chosen');
  t.match(
    variables.cluster,
    { type: 'query', includeAll: true, allValue: '.*' },
    'a cluster to pick; All is .*, which also matches series without a cluster label (a Prometheus of one cluster)',
  );
  t.match(JSON.stringify(variables.cluster?.query), /label_values\(veneer_nodewatcher_\w+, cluster\)/);
  // biome-ignore lint/suspicious/noTemplateCurlyInString: Grafana's variable syntax, not a template string
  const datasource = { type: 'prometheus', uid: '${datasource}' };
  for (const panel of dashboard.panels) {
    t.same(panel.datasource, datasource, `${panel.title}: reads the chosen data source`);
    for (const target of panel.targets) {
      t.same(target.datasource, datasource, `${panel.title}: its query too`);
      t.notMatch(target.expr, /\[5m\]/, `${panel.title}: no fixed rate window`);
      // Every selector of the watcher's series picks the cluster, as a matcher a substitution keeps valid.
      const selectors = [...target.expr.matchAll(/veneer_nodewatcher_\w+(\{[^}]*\})?/g)];
      t.ok(selectors.length > 0);
      for (const m of selectors) t.match(m[1] ?? '', /cluster=~"\$cluster"/, `${panel.title}: ${m[0]} by cluster`);
    }
  }
  t.ok(
    dashboard.panels.some((p) => p.targets.some((x) => x.expr.includes('[$__rate_interval]'))),
    "rates over Grafana's $__rate_interval",
  );

  const exprs = dashboardQueries().map((q) => q.expr);
  t.ok(
    exprs.some((e) => e.includes('veneer_nodewatcher_overlay_nodes_current')),
    'a panel shows the nodes each overlay steers',
  );
  for (const [metric, what] of [
    ['veneer_nodewatcher_overlay_dollars_per_hour', 'what each overlay steers is worth an hour'],
    ['veneer_nodewatcher_launches_total', 'the launches recorded per overlay'],
  ])
    t.ok(
      exprs.some((e) => e.includes(metric!)),
      `a panel shows ${what} (test/apiserver/overlays-report.test.ts evaluates it on a real watcher's metrics)`,
    );
  const dir = mkdtempSync(join(tmpdir(), 'vnw-dashboard-'));
  const check = (queries: string[]) => {
    writeFileSync(
      join(dir, 'queries.yaml'),
      stringify({
        groups: [{ name: 'dashboard', rules: queries.map((expr, i) => ({ record: `dashboard:query:${i}`, expr })) }],
      }),
    );
    return promtool(['check', 'rules', join(dir, 'queries.yaml')]);
  };
  const all = check(exprs);
  t.match(all.stdout, new RegExp(`SUCCESS: ${exprs.length} rules found`), all.stderr);
  const one = check(dashboardQueries({ cluster: 'prod', rateInterval: '1m0s' }).map((q) => q.expr));
  t.match(one.stdout, new RegExp(`SUCCESS: ${exprs.length} rules found`), `one cluster picked: ${one.stderr}`);

  // One Prometheus holding two clusters: with All, a gauge every replica exports is counted once
  // per cluster and the clusters summed, not the larger one taken.
  const influenced = dashboardQueries().find((q) => q.expr.includes('veneer_nodewatcher_nodes_influenced_current'))!;
  const tests = stringify({
    rule_files: ['rules.yaml'],
    evaluation_interval: '1m',
    tests: [
      {
        interval: '1m',
        input_series: [
          ['prod', 'a', 3],
          ['prod', 'b', 3],
          ['staging', 'c', 2],
        ].map(([cluster, pod, n]) => ({
          series: `veneer_nodewatcher_nodes_influenced_current{capacity_type="reserved-instance",cluster="${cluster}",job="veneer-node-watcher",namespace="veneer-system",pod="${pod}"}`,
          values: `${n}x5`,
        })),
        promql_expr_test: [
          {
            expr: influenced.expr,
            eval_time: '5m',
            exp_samples: [{ labels: '{capacity_type="reserved-instance"}', value: 5 }],
          },
          {
            expr: dashboardQueries({ cluster: 'staging' }).find((q) => q.title === influenced.title)!.expr,
            eval_time: '5m',
            exp_samples: [{ labels: '{capacity_type="reserved-instance"}', value: 2 }],
          },
        ],
      },
    ],
  });
  const run = testRules(tests);
  t.equal(run.status, 0, 'All: the clusters summed; one cluster: its own figure', { output: run.output });
});

t.test(
  'kube-prometheus-stack: one value, metrics.labels.release, and the ServiceMonitor and alerts are picked up',
  async (t) => {
    const MONITORING = [
      '--api-versions',
      'monitoring.coreos.com/v1/ServiceMonitor',
      '--api-versions',
      'monitoring.coreos.com/v1/PrometheusRule',
    ];
    const KPS = ['--set', 'metrics.labels.release=kube-prometheus-stack', '--set', 'nodeWatcher.enabled=true'];
    const none = template(['--set', 'nodeWatcher.enabled=true']);
    t.notOk(find(none, 'ServiceMonitor'), 'auto: no ServiceMonitor where the cluster does not serve the kind');
    t.notOk(find(none, 'PrometheusRule'), 'auto: no PrometheusRule either (the install would fail on them)');
    t.notOk(find(none, 'Secret', 'metrics-scraper'), 'nor the scraper made for the ServiceMonitor');

    const kps = template([...MONITORING, ...KPS]);
    for (const kind of ['ServiceMonitor', 'PrometheusRule'])
      t.match(
        find(kps, kind)?.metadata,
        { labels: { release: 'kube-prometheus-stack', 'app.kubernetes.io/name': 'veneer-node-watcher' } },
        `auto: the ${kind} where the cluster serves it, with the release label kube-prometheus-stack selects by`,
      );
    t.match(
      find(template([...MONITORING, ...KPS, '--set', 'metrics.dashboard.enabled=true']), 'ConfigMap', 'dashboard')
        ?.metadata,
      { labels: { release: 'kube-prometheus-stack', grafana_dashboard: '1' } },
      'the dashboard ConfigMap carries metrics.labels beside its own',
    );
    const only = (kind: string) =>
      template([...MONITORING, ...KPS, '--api-versions', `monitoring.coreos.com/v1/${kind}`]);
    t.ok(find(template(['--api-versions', 'monitoring.coreos.com/v1/PrometheusRule']), 'PrometheusRule'));
    t.notOk(
      find(template(['--api-versions', 'monitoring.coreos.com/v1/PrometheusRule']), 'ServiceMonitor'),
      'each kind by its own availability',
    );
    t.ok(only('ServiceMonitor'));
    t.notOk(
      find(template([...MONITORING, '--set', 'metrics.serviceMonitor.enabled=false']), 'ServiceMonitor'),
      'false forces it off',
    );
    t.notOk(find(template([...MONITORING, '--set', 'metrics.prometheusRule.enabled=false']), 'PrometheusRule'));
    t.ok(find(template(['--set', 'metrics.serviceMonitor.enabled=true']), 'ServiceMonitor'), 'true forces it on');
    t.ok(find(template(['--set', 'metrics.prometheusRule.enabled=true']), 'PrometheusRule'));

    const merged = template([
      ...MONITORING,
      ...KPS,
      '--set',
      'metrics.labels.team=platform',
      '--set',
      'metrics.serviceMonitor.labels.release=other-stack',
      '--set',
      'metrics.prometheusRule.labels.severity-routing=pager',
    ]);
    t.match(find(merged, 'ServiceMonitor')?.metadata, { labels: { release: 'other-stack', team: 'platform' } });
    t.match(find(merged, 'PrometheusRule')?.metadata, {
      labels: { release: 'kube-prometheus-stack', team: 'platform', 'severity-routing': 'pager' },
    });
    t.match(
      find(merged, 'PrometheusRule')?.metadata,
      {
        labels: {
          'app.kubernetes.io/name': 'veneer-node-watcher',
          'app.kubernetes.io/instance': 'veneer-node-watcher',
        },
      },
      "the chart's own labels stay",
    );
    const r = renderRaw(['--set', 'metrics.serviceMonitor.enabled=maybe']);
    t.match(r.stderr, /serviceMonitor\/enabled.*value must be one of/, 'auto, true or false');
  },
);

t.test(
  "the ServiceMonitor's identity: the chart's own scraper by default, no binding of Prometheus needed",
  async (t) => {
    const full = template(FULL);
    const scraper = 'veneer-node-watcher-metrics-scraper';
    t.match(find(full, 'ServiceAccount', 'metrics-scraper'), {
      metadata: { name: scraper, namespace: NS },
      automountServiceAccountToken: false,
    });
    t.match(find(full, 'Secret', 'metrics-scraper'), {
      metadata: { name: scraper, namespace: NS, annotations: { 'kubernetes.io/service-account.name': scraper } },
      type: 'kubernetes.io/service-account-token',
    });
    t.match(find(full, 'ClusterRoleBinding', 'metrics-scraper'), {
      roleRef: { kind: 'ClusterRole', name: 'veneer-node-watcher-metrics-reader' },
      subjects: [{ kind: 'ServiceAccount', name: scraper, namespace: NS }],
    });

    const endpoint = (objs: Obj[]) =>
      (find(objs, 'ServiceMonitor') as unknown as { spec: { endpoints: object[] } }).spec.endpoints[0];
    const file = template([
      ...FULL,
      '--set',
      'metrics.serviceMonitor.bearerTokenFile=/var/run/secrets/kubernetes.io/serviceaccount/token',
    ]);
    t.match(endpoint(file), { bearerTokenFile: '/var/run/secrets/kubernetes.io/serviceaccount/token' });
    t.notOk((endpoint(file) as { authorization?: object }).authorization, "bearerTokenFile: Prometheus' own token");
    t.notOk(find(file, 'Secret', 'metrics-scraper'), 'and no scraper of the chart');
    const own = template([...FULL, '--set', 'metrics.serviceMonitor.authorization.credentials.name=prom-token']);
    t.notOk(find(own, 'ServiceAccount', 'metrics-scraper'), 'a given authorization: no scraper of the chart');
    const plain = template([...FULL, '--set', 'nodeWatcher.metrics.secure=false']);
    t.notOk(find(plain, 'Secret', 'metrics-scraper'), 'plain metrics: nothing to authenticate');
    t.notOk(find(plain, 'ClusterRoleBinding', 'metrics-scraper'));
    t.notOk(
      find(template(['--set', 'nodeWatcher.enabled=true']), 'ServiceAccount', 'metrics-scraper'),
      'no ServiceMonitor: no scraper',
    );
  },
);

t.test('the alerts keep cluster, namespace and job, and link to the release docs', async (t) => {
  const rules = ruleGroups().flatMap((g) => g.rules);
  for (const rule of rules) {
    const name = rule.alert ?? rule.record;
    // The apiserver's own series: its scrape's labels, not the watcher's; per cluster.
    if (rule.expr.includes('apiserver_admission_webhook_fail_open_count')) {
      t.match(rule.expr, /^sum by \(cluster\) \(/, `${name}: per cluster`);
      continue;
    }
    // An aggregation with no `by`, or a `by` without the three, would merge clusters or releases.
    t.notMatch(rule.expr, /\b(sum|max|min|count|avg)\s*\(/, `${name}: no aggregation over everything`);
    for (const m of rule.expr.matchAll(/\b(sum|max|min|count|avg) by \(([^)]*)\)/g))
      t.match(m[2], /^cluster, namespace, job\b/, `${name}: ${m[0]} keeps cluster, namespace and job`);
  }
  const annotations = (extra: string[]) =>
    ruleGroups(['--set', 'metrics.prometheusRule.overlayIdle.enabled=true', ...extra])[0]!.rules.flatMap(
      (r) => r.annotations?.runbook_url ?? [],
    );
  const alerts = rules.flatMap((r) => r.alert ?? []);
  const runbooks = readFileSync(join(root, 'docs', 'alerts.md'), 'utf8');
  t.same(
    annotations([]),
    alerts.map(
      (a) => `https://github.com/veneer/veneer-node-watcher/blob/v${appVersion}/docs/alerts.md#${a.toLowerCase()}`,
    ),
    "every alert links to its own runbook, absolute, at the docs of the chart's own release",
  );
  for (const a of alerts) t.match(runbooks, new RegExp(`^## ${a}$`, 'm'), `docs/alerts.md has a section ${a}`);
  t.same(
    annotations(['--set', 'metrics.prometheusRule.runbookURL=https://wiki.example.com/vnw']).slice(0, 1),
    [`https://wiki.example.com/vnw#${alerts[0]!.toLowerCase()}`],
    'overridable',
  );
});

t.test('kubeVersion: a lower bound only, and the tested versions recorded', async (t) => {
  const chartYaml = parse(readFileSync(join(chart, 'Chart.yaml'), 'utf8')) as {
    kubeVersion: string;
    annotations: Record<string, string>;
  };
  t.equal(chartYaml.kubeVersion, '>=1.30.0-0');
  t.match(chartYaml.annotations['veneer.io/tested-kubernetes-versions'], /1\.30\.\d+.*1\.37\.\d+/);
  for (const version of ['1.30.0', '1.38.0', '1.41.2-eks-abcdef'])
    t.equal(run(['template', 'x', chart, '--kube-version', version]).status, 0, `renders for ${version}`);
  const old = run(['template', 'x', chart, '--kube-version', '1.29.9']);
  t.match(old.stderr, /chart requires kubeVersion: >=1\.30\.0-0/, 'and refuses below 1.30');
});

t.test('ServiceAccount, names, rollout, nodeSelector and image digest follow the usual conventions', async (t) => {
  const pod = (objs: Obj[]) => (find(objs, 'Deployment') as unknown as k8s.V1Deployment).spec?.template.spec;
  const subjects = (objs: Obj[]) =>
    (objs.filter((o) => o.kind === 'ClusterRoleBinding' || o.kind === 'RoleBinding') as unknown as k8s.V1RoleBinding[])
      // Not the scraper's, nor helm test's hooks, which run as accounts of their own.
      .filter((b) => !b.metadata?.name?.endsWith('metrics-scraper') && !b.metadata?.annotations?.['helm.sh/hook'])
      .map((b) => b.subjects?.map((s) => s.name));

  const defaults = template(FULL);
  t.equal(pod(defaults)?.serviceAccountName, 'veneer-node-watcher');
  t.same(pod(defaults)?.nodeSelector, { 'kubernetes.io/os': 'linux' }, 'Linux nodes only: the image is Linux');
  const irsa = template([...FULL, '--set', 'serviceAccount.create=false', '--set', 'serviceAccount.name=prices-irsa']);
  t.equal(pod(irsa)?.serviceAccountName, 'prices-irsa', 'a pre-created (IRSA) ServiceAccount');
  t.equal(
    pod(irsa)?.automountServiceAccountToken,
    true,
    'its token mounted even if the account turns automounting off',
  );
  t.notOk(find(irsa, 'ServiceAccount', 'veneer-node-watcher'), 'not created');
  t.same(subjects(irsa), [['prices-irsa'], ['prices-irsa'], ['prices-irsa']], "it gets the chart's rights");
  const named = template([...FULL, '--set', 'serviceAccount.name=vnw']);
  t.equal(find(named, 'ServiceAccount', 'vnw')?.metadata.name, 'vnw');
  t.equal(pod(named)?.serviceAccountName, 'vnw');
  const unnamed = renderRaw(['--set', 'serviceAccount.create=false']);
  t.match(unnamed.stderr, /serviceAccount\.name: with serviceAccount\.create=false, name the ServiceAccount/);

  const renamed = template(['--set', 'nameOverride=nw'], 'edge');
  t.equal(find(renamed, 'Deployment')?.metadata.name, 'edge-nw');
  t.match(find(renamed, 'Deployment'), {
    spec: { selector: { matchLabels: { 'app.kubernetes.io/name': 'nw', 'app.kubernetes.io/instance': 'edge' } } },
  });
  const full = template(['--set', 'fullnameOverride=vnw'], 'edge');
  t.same([...new Set(full.map((o) => o.metadata.name.split('-')[0]))], ['vnw'], 'fullnameOverride names every object');

  const strategy = (objs: Obj[]) => (find(objs, 'Deployment') as unknown as k8s.V1Deployment).spec?.strategy;
  t.same(
    strategy(defaults),
    { type: 'RollingUpdate', rollingUpdate: { maxSurge: 1, maxUnavailable: 0 } },
    'pod network: a replica added before one goes',
  );
  t.same(
    strategy(template(HOST_NETWORK)),
    { type: 'RollingUpdate', rollingUpdate: { maxSurge: 0, maxUnavailable: 1 } },
    'hostNetwork: one replaced at a time, since a surge pod needs a node whose ports are free',
  );
  t.same(strategy(template(['--set', 'strategy.type=Recreate'])), { type: 'Recreate' }, 'as given');

  const image = (objs: Obj[]) => pod(objs)?.containers[0]?.image;
  t.equal(image(defaults), `ghcr.io/veneer/veneer-node-watcher:${appVersion}`);
  const digest = `sha256:${'a1'.repeat(32)}`;
  t.equal(
    image(template(['--set', `image.digest=${digest}`, '--set', 'image.tag=ignored'])),
    `ghcr.io/veneer/veneer-node-watcher@${digest}`,
    'pinned by digest',
  );
  t.match(renderRaw(['--set', 'image.digest=latest']).stderr, /image\/digest.*does not match pattern/);
});

t.test('values.schema.json is closed: a misspelt key anywhere but a free-form map is refused', async (t) => {
  for (const key of [
    'typo',
    'image.typo',
    'serviceAccount.typo',
    'service.typo',
    'webhooks.typo',
    'certManager.typo',
    'certManager.issuer.typo',
    'podDisruptionBudget.typo',
    'topologySpread.typo',
    'strategy.typo',
    'strategy.rollingUpdate.typo',
    'metrics.typo',
    'metrics.serviceMonitor.typo',
    'metrics.prometheusRule.typo',
    'metrics.dashboard.typo',
  ]) {
    const r = renderRaw(['--set', `${key}=1`]);
    t.match(r.stderr, /additional properties 'typo' not allowed/, key);
  }
  const free = renderRaw([
    '--set',
    'podLabels.a=b',
    '--set',
    'podAnnotations.a=b',
    '--set',
    'nodeSelector.a=b',
    '--set',
    'resources.requests.cpu=1',
    '--set',
    'affinity.nodeAffinity.x=1',
    '--set',
    'metrics.labels.a=b',
    '--set',
    'metrics.serviceMonitor.tlsConfig.insecureSkipVerify=true',
    '--set',
    'serviceAccount.annotations.a=b',
    '--set',
    'global.imageRegistry=example.com',
  ]);
  t.equal(free.status, 0, `free-form maps stay open: ${free.stderr}`);
});

t.test("on a real apiserver: every object accepted, and the watcher works with the chart's own rights", async (t) => {
  const cp = await ControlPlane.start();
  t.teardown(() => cp.stop());
  const admin = cp.adminKubeConfig();
  await installKarpenterCRDs(cp);
  await installExternalCRDs(admin);
  const client = k8s.KubernetesObjectApi.makeApiClient(admin);
  await client.create({ apiVersion: 'v1', kind: 'Namespace', metadata: { name: NS } });
  const kubeconfig = cp.writeKubeConfig();
  // helm install reads the apiserver's API versions: this one serves the Prometheus operator's CRDs.
  const notes = (extra: string[] = []) =>
    run(['install', 'x', chart, '--dry-run=client', '--namespace', NS, ...extra], {
      ...process.env,
      KUBECONFIG: kubeconfig,
    }).stdout;
  const auto = notes();
  t.match(auto, /installed but disabled.*--set nodeWatcher.enabled=true/s, 'NOTES.txt says how to enable it');
  t.match(
    auto,
    /kind: ServiceMonitor.*The ServiceMonitor scrapes as x-veneer-node-watcher-metrics-scraper, bound to it by the chart: no binding of Prometheus is needed\.\nWith kube-prometheus-stack, add --set metrics\.labels\.release=<its release name>/s,
    "auto found the ServiceMonitor kind on the apiserver; NOTES: the chart's scraper, and kube-prometheus-stack's one value",
  );
  t.notMatch(notes(['--set', 'metrics.labels.release=kps']), /With kube-prometheus-stack/, 'not once it is set');
  t.match(
    notes(['--set', 'metrics.serviceMonitor.enabled=false']),
    /--clusterrole=x-veneer-node-watcher-metrics-reader --serviceaccount=NAMESPACE:SERVICEACCOUNT/,
    'without the ServiceMonitor: how to let Prometheus scrape',
  );
  const full = template([...FULL, ...PROMETHEUS_READER]);
  for (const obj of full) {
    const err = await client.create(obj as k8s.KubernetesObject, undefined, 'All').then(
      () => undefined,
      (e: { body?: string }) => e.body ?? String(e),
    );
    t.equal(err, undefined, `${obj.kind} ${obj.metadata.name} accepted (server-side dry run)`);
  }
  const optional = template([
    ...FULL,
    ...HOST_NETWORK,
    ...valuesFile({
      networkPolicy: { enabled: true, metricsFrom: [{ namespaceSelector: {} }], egress: [{}] },
      extraEnv: [{ name: 'AWS_REGION', value: 'eu-west-1' }],
      extraVolumes: [{ name: 'extra', emptyDir: {} }],
      extraVolumeMounts: [{ name: 'extra', mountPath: '/extra' }],
    }),
  ]);
  for (const obj of optional.filter((o) => ['Deployment', 'NetworkPolicy'].includes(o.kind))) {
    const err = await client.create(obj as k8s.KubernetesObject, undefined, 'All').then(
      () => undefined,
      (e: { body?: string }) => e.body ?? String(e),
    );
    t.equal(err, undefined, `${obj.kind} with hostNetwork, a NetworkPolicy and extras accepted (server-side dry run)`);
  }
  // Apply the chart's identity and rights for real, and run the watcher with a token of its ServiceAccount.
  for (const obj of full.filter((o) =>
    ['ServiceAccount', 'ClusterRole', 'ClusterRoleBinding', 'Role', 'RoleBinding'].includes(o.kind),
  ))
    await client.create(obj as k8s.KubernetesObject);
  const kc = await cp.serviceAccountKubeConfig(NS, 'veneer-node-watcher');
  const secrets = await kc
    .makeApiClient(k8s.CoreV1Api)
    .listNamespacedSecret({ namespace: NS })
    .then(
      () => 200,
      (e: { code?: number }) => e.code,
    );
  t.equal(secrets, 403, 'reading Secrets is denied');
  const pods = await kc
    .makeApiClient(k8s.CoreV1Api)
    .deleteNode({ name: 'anything' })
    .then(
      () => 200,
      (e: { code?: number }) => e.code,
    );
  t.equal(pods, 403, 'deleting nodes is denied');
  const events = (namespace: string) =>
    kc
      .makeApiClient(k8s.CoreV1Api)
      .listNamespacedEvent({ namespace, fieldSelector: 'involvedObject.kind=NodeClaim,reason=DisruptionLaunching' })
      .then(
        () => 200,
        (e: { code?: number }) => e.code,
      );
  t.equal(await events('default'), 200, "Karpenter's Events on cluster-scoped NodeClaims (namespace default) are read");
  t.equal(await events('kube-system'), 403, 'Events of any other namespace are not');
  const cm = configMapOf(full) as unknown as k8s.V1ConfigMap;
  const dir = mkdtempSync(join(tmpdir(), 'vnw-sa-'));
  writeFileSync(join(dir, 'config.yaml'), cm.data?.['config.yaml'] ?? '');
  const certs = await makeWebhookCerts(join(dir, 'certs'));
  const { config } = loadConfig({
    file: join(dir, 'config.yaml'),
    env: {
      VENEER_NODE_WATCHER_LEADER_ELECTION_LEASE_NAMESPACE: NS,
      VENEER_NODE_WATCHER_LEADER_ELECTION_LEASE_NAME: 'veneer-node-watcher',
    },
    flags: {
      '--webhook-port': String(await freePort()),
      '--metrics-port': String(await freePort()),
      '--health-port': String(await freePort()),
      '--webhook-cert-file': certs.serving.certPath,
      '--webhook-key-file': certs.serving.keyPath,
      '--shutdown-delay': '0s',
    },
  });
  t.equal(config.metrics.secure, true, "the chart's config: secure metrics");
  const watcher = await startWatcher({ config, client: clientFor(kc), log: createLogger('silent'), host: '127.0.0.1' });
  t.teardown(() => watcher.stop());
  await watcher.caches?.synced();
  await admin.makeApiClient(k8s.CustomObjectsApi).createClusterCustomObject({
    group: 'karpenter.sh',
    version: 'v1alpha1',
    plural: 'nodeoverlays',
    body: computeSavingsPlan(),
  });
  await new Promise((r) => setTimeout(r, 1100));
  await new KarpenterSim(admin).launch({
    name: 'chart-node',
    claimName: 'chart-node-claim',
    instanceType: 'c6i.large',
  });
  let labels: Record<string, string> = {};
  for (let i = 0; i < 200 && !labels['veneer.io/overlay-influenced']; i++) {
    labels = (await admin.makeApiClient(k8s.CoreV1Api).readNode({ name: 'chart-node' })).metadata?.labels ?? {};
    await new Promise((r) => setTimeout(r, 100));
  }
  t.match(
    labels,
    { 'veneer.io/overlay-influenced': 'true', 'veneer.io/matching-overlay': 'cost-aware-compute-sp-global' },
    "recorded by the leader holding the chart's Lease",
  );
  // The watcher asks who a scraper is and whether it may get /metrics with the chart's own
  // identity: the review rights come from the chart's ClusterRole, the scraper's from its
  // metrics-reader role and binding (metrics.readers), nothing from this test.
  const asPrometheus = await scrape(watcher.metricsPort, {
    caPem: certs.caPem,
    token: await cp.serviceAccountToken('monitoring', 'prometheus'),
  });
  t.equal(asPrometheus.status, 200, "Prometheus' ServiceAccount, bound by the chart, scrapes");
  t.match(
    asPrometheus.body,
    /^veneer_nodewatcher_nodes_influenced_current\{capacity_type="compute-savings-plan"\} 1$/m,
  );
  t.equal(
    (
      await scrape(watcher.metricsPort, {
        caPem: certs.caPem,
        token: await cp.serviceAccountToken('monitoring', 'grafana'),
      })
    ).status,
    403,
    'another ServiceAccount does not',
  );
  // The ServiceMonitor's default identity: the chart's scraper, bound by the chart alone (a token
  // of its ServiceAccount; the Secret's own is written by kube-controller-manager, which this
  // control plane does not run).
  t.equal(
    (
      await scrape(watcher.metricsPort, {
        caPem: certs.caPem,
        token: await cp.serviceAccountToken(NS, 'veneer-node-watcher-metrics-scraper'),
      })
    ).status,
    200,
    "the chart's metrics-scraper scrapes",
  );
  t.equal((await fetch(`http://127.0.0.1:${watcher.healthPort}/readyz`)).status, 200, 'the probes need no token');
});

// A real Prometheus on the real node, set up as kube-prometheus-stack sets it up with its default
// values: prometheus-operator (kit-built from its module, run as admin beside the control plane
// instead of in its Deployment: the same controllers) turns a Prometheus object into a
// StatefulSet whose pod runs Prometheus and the config reloader from images assembled here, and
// selects ServiceMonitors and PrometheusRules by the stack's `release` label. Prometheus's own
// ServiceAccount carries the stack's ClusterRole, so it discovers endpoints and scrapes as there.
import { readdirSync } from 'node:fs';
import { join } from 'node:path';
import * as k8s from '@kubernetes/client-node';
import { binary } from './binaries.ts';
import type { ControlPlane } from './control-plane.ts';
import { until } from './fleet.ts';
import { installCRDFiles } from './karpenter-crds.ts';
import type { Image } from './node/image.ts';
import { NODE_NAME } from './node/node.ts';
import { freePort, ManagedProcess } from './process.ts';

/** The release name kube-prometheus-stack is installed under in its own docs; its selectors use it. */
export const STACK_RELEASE = 'kube-prometheus-stack';
export const STACK_NAMESPACE = 'monitoring';
const PROMETHEUS = `${STACK_RELEASE}-prometheus`;
const MONITORING = { group: 'monitoring.coreos.com', version: 'v1' };

export interface PrometheusImages {
  prometheus: Image;
  configReloader: Image;
}

/** One sample of an instant query: the series' labels and its value. */
export interface Sample {
  metric: Record<string, string>;
  value: number;
}

export interface Target {
  labels: Record<string, string>;
  scrapePool: string;
  scrapeUrl: string;
  health: 'up' | 'down' | 'unknown';
  lastError: string;
}

export interface RuleGroup {
  name: string;
  file: string;
  rules: { name: string; type: 'alerting' | 'recording'; health: string; lastError?: string; state?: string }[];
}

export interface Alert {
  labels: Record<string, string>;
  state: 'pending' | 'firing';
  value: string;
}

export class PrometheusStack {
  /** Where the test reaches Prometheus's HTTP API: its pod's address. */
  readonly url: string;
  private readonly operator: ManagedProcess;

  private constructor(url: string, operator: ManagedProcess) {
    this.url = url;
    this.operator = operator;
  }

  /**
   * Installs the operator's CRDs, starts the operator and a Prometheus as kube-prometheus-stack's
   * defaults make it (evaluating rules every `evaluationInterval`), and waits for its pod to be
   * Ready. The node must have `images` imported.
   */
  static async start(cp: ControlPlane, images: PrometheusImages, evaluationInterval = '10s'): Promise<PrometheusStack> {
    const crds = binary('prometheusOperatorCrds');
    await installCRDFiles(
      cp,
      readdirSync(crds)
        .filter((f) => f.endsWith('.yaml'))
        .sort()
        .map((f) => join(crds, f)),
    );
    const operator = new ManagedProcess(
      'prometheus-operator',
      binary('prometheusOperator'),
      [
        `--prometheus-config-reloader=${images.configReloader.ref}`,
        `--web.listen-address=127.0.0.1:${await freePort()}`,
        '--log-level=info',
      ],
      join(cp.dir, 'prometheus-operator.log'),
      { ...process.env, KUBECONFIG: cp.writeKubeConfig(cp.adminKubeConfig(), 'kubeconfig-prometheus-operator') },
    );
    operator.start();
    cp.onStop(() => operator.stop());
    const admin = cp.adminKubeConfig();
    await createStackObjects(admin, images.prometheus, evaluationInterval);
    const core = admin.makeApiClient(k8s.CoreV1Api);
    let ip = '';
    await until(
      'the Prometheus pod Ready',
      async () => {
        if (!operator.running) throw new Error(`prometheus-operator exited:\n${operator.logTail()}`);
        const pod = await core
          .readNamespacedPod({ name: `prometheus-${PROMETHEUS}-0`, namespace: STACK_NAMESPACE })
          .catch(() => undefined);
        ip = pod?.status?.podIP ?? '';
        return pod?.status?.conditions?.some((c) => c.type === 'Ready' && c.status === 'True') === true;
      },
      180_000,
    );
    return new PrometheusStack(`http://${ip}:9090`, operator);
  }

  logTail(lines = 30): string {
    return this.operator.logTail(lines);
  }

  private async api<T>(path: string): Promise<T> {
    const res = await fetch(`${this.url}/api/v1/${path}`, { signal: AbortSignal.timeout(10_000) });
    const body = (await res.json()) as { status: string; data: T; error?: string };
    if (body.status !== 'success') throw new Error(`Prometheus ${path}: ${body.error ?? res.status}`);
    return body.data;
  }

  /** An instant query; Prometheus's own error for a query it cannot parse or run. */
  async query(expr: string): Promise<Sample[]> {
    const data = await this.api<{
      resultType: string;
      result: { metric: Record<string, string>; value: [number, string] }[];
    }>(`query?query=${encodeURIComponent(expr)}`);
    if (data.resultType !== 'vector') throw new Error(`${expr}: a ${data.resultType}, not a vector`);
    return data.result.map((r) => ({ metric: r.metric, value: Number(r.value[1]) }));
  }

  async targets(): Promise<Target[]> {
    return (await this.api<{ activeTargets: Target[] }>('targets?state=active')).activeTargets;
  }

  async ruleGroups(): Promise<RuleGroup[]> {
    return (await this.api<{ groups: RuleGroup[] }>('rules')).groups;
  }

  async alerts(): Promise<Alert[]> {
    return (await this.api<{ alerts: Alert[] }>('alerts')).alerts;
  }
}

/** Prometheus's version, from the Go module version it was built from: v0.316.0 is v3.16.0. */
function prometheusVersion(): string {
  const module = /prometheus-v0\.(\d+)\.(\d+)/.exec(binary('prometheus'))?.slice(1).map(Number);
  if (!module || module[0]! < 300) throw new Error(`no Prometheus 3 version in ${binary('prometheus')}`);
  return `v3.${module[0]! - 300}.${module[1]}`;
}

/** What kube-prometheus-stack's chart creates for its Prometheus, with its default values. */
async function createStackObjects(admin: k8s.KubeConfig, image: Image, evaluationInterval: string): Promise<void> {
  const core = admin.makeApiClient(k8s.CoreV1Api);
  const rbac = admin.makeApiClient(k8s.RbacAuthorizationV1Api);
  await core.createNamespace({ body: { metadata: { name: STACK_NAMESPACE } } });
  await core.createNamespacedServiceAccount({ namespace: STACK_NAMESPACE, body: { metadata: { name: PROMETHEUS } } });
  const list = ['get', 'list', 'watch'];
  await rbac.createClusterRole({
    body: {
      metadata: { name: PROMETHEUS },
      rules: [
        { apiGroups: [''], resources: ['nodes', 'nodes/metrics', 'services', 'endpoints', 'pods'], verbs: list },
        { apiGroups: ['discovery.k8s.io'], resources: ['endpointslices'], verbs: list },
        { apiGroups: ['networking.k8s.io'], resources: ['ingresses'], verbs: list },
        { nonResourceURLs: ['/metrics', '/metrics/cadvisor'], verbs: ['get'] },
      ],
    },
  });
  await rbac.createClusterRoleBinding({
    body: {
      metadata: { name: PROMETHEUS },
      roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: PROMETHEUS },
      subjects: [{ kind: 'ServiceAccount', name: PROMETHEUS, namespace: STACK_NAMESPACE }],
    },
  });
  const [repository, tag] = image.ref.split(/:(?=[^:]+$)/);
  const byRelease = { matchLabels: { release: STACK_RELEASE } };
  await admin.makeApiClient(k8s.CustomObjectsApi).createNamespacedCustomObject({
    ...MONITORING,
    plural: 'prometheuses',
    namespace: STACK_NAMESPACE,
    body: {
      apiVersion: 'monitoring.coreos.com/v1',
      kind: 'Prometheus',
      metadata: { name: PROMETHEUS, namespace: STACK_NAMESPACE, labels: { release: STACK_RELEASE } },
      spec: {
        image: `${repository}:${tag}`,
        // The operator derives Prometheus's flags from its version.
        version: prometheusVersion(),
        replicas: 1,
        serviceAccountName: PROMETHEUS,
        serviceMonitorSelector: byRelease,
        serviceMonitorNamespaceSelector: {},
        podMonitorSelector: byRelease,
        podMonitorNamespaceSelector: {},
        probeSelector: byRelease,
        ruleSelector: byRelease,
        ruleNamespaceSelector: {},
        evaluationInterval,
        externalLabels: {},
        securityContext: {
          runAsGroup: 2000,
          runAsNonRoot: true,
          runAsUser: 1000,
          fsGroup: 2000,
          seccompProfile: { type: 'RuntimeDefault' },
        },
        // The simulated nodes the tests create are Nodes the scheduler could pick.
        nodeSelector: { 'kubernetes.io/hostname': NODE_NAME },
      },
    },
  });
}

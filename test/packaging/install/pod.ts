// The watcher run the way the kubelet would run the chart's pod: the installed Deployment's
// container (its args and environment, field references resolved), the installed ConfigMap and
// the issued Secret as files (a Secret volume), a token of the chart's ServiceAccount, readiness
// probed on the pod address, and then the Service's EndpointSlice, as the EndpointSlice
// controller writes it for a ready pod.
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import * as k8s from '@kubernetes/client-node';
import { RUNTIME_NODE_FLAGS } from '../../../kit/node-flags.ts';
import { NS, RELEASE } from '../../support/chart.ts';
import type { ControlPlane } from '../../../kit/control-plane.ts';
import { until } from '../../../kit/fleet.ts';
import { POD_IP } from '../../../kit/netns.ts';
import { scrape } from '../../../kit/scrape.ts';
import { ManagedProcess } from '../../../kit/process.ts';
import { SecretVolume } from '../../support/secret-volume.ts';

const POD_NAME = `${RELEASE}-0`;
const cli = join(import.meta.dirname, '..', '..', '..', 'src', 'cli.ts');

export interface Pod {
  process: ManagedProcess;
  volume: SecretVolume;
  webhookPort: number;
  /** A scrape as Prometheus makes it: HTTPS to the pod address, verified against the Secret's CA, with a token of `scraper`. */
  metrics(): Promise<string>;
  publishEndpoints(): Promise<k8s.V1EndpointSlice>;
}

export async function startPod(
  cp: ControlPlane,
  secret: Record<string, Buffer>,
  scraper: { namespace: string; name: string },
): Promise<Pod> {
  const admin = cp.adminKubeConfig();
  const core = admin.makeApiClient(k8s.CoreV1Api);
  const deployment = await admin
    .makeApiClient(k8s.AppsV1Api)
    .readNamespacedDeployment({ name: RELEASE, namespace: NS });
  const spec = deployment.spec!.template.spec!;
  const container = spec.containers[0]!;
  const port = (name: string | number | undefined) =>
    container.ports?.find((p) => p.name === name || p.containerPort === name)?.containerPort;

  // Each volume is a directory; a path under a mount point is rewritten to it.
  const root = join(cp.dir, 'pod');
  const volume = new SecretVolume(join(root, 'tls'));
  volume.write(secret);
  const configMap = await core.readNamespacedConfigMap({
    name: spec.volumes!.find((v) => v.name === 'config')!.configMap!.name!,
    namespace: NS,
  });
  mkdirSync(join(root, 'config'), { recursive: true });
  for (const [key, content] of Object.entries(configMap.data ?? {})) writeFileSync(join(root, 'config', key), content);
  const mounts = (container.volumeMounts ?? []).map((m) => [m.mountPath, join(root, m.name)] as const);
  const local = (path: string) =>
    mounts.reduce((p, [from, to]) => (p.startsWith(`${from}/`) ? to + p.slice(from.length) : p), path);

  const fields: Record<string, string> = {
    'metadata.name': POD_NAME,
    'metadata.namespace': NS,
    'status.podIP': POD_IP,
  };
  const env: NodeJS.ProcessEnv = {
    ...process.env,
    ...Object.fromEntries(
      (container.env ?? []).map((e) => [e.name, e.value ?? fields[e.valueFrom?.fieldRef?.fieldPath ?? ''] ?? '']),
    ),
    // The config's default certificate paths are under the tls volume's mount point.
    VENEER_NODE_WATCHER_WEBHOOK_CERT_FILE: volume.path('tls.crt'),
    VENEER_NODE_WATCHER_WEBHOOK_KEY_FILE: volume.path('tls.key'),
    KUBECONFIG: cp.writeKubeConfig(await cp.serviceAccountKubeConfig(NS, spec.serviceAccountName!), 'kubeconfig-pod'),
  };
  const proc = new ManagedProcess(
    POD_NAME,
    process.execPath,
    [...RUNTIME_NODE_FLAGS, cli, ...(container.args ?? []).map(local)],
    join(cp.dir, 'pod.log'),
    env,
  );
  proc.start();
  const probe = container.readinessProbe!.httpGet!;
  const probeUrl = `http://${POD_IP}:${port(probe.port)}${probe.path}`;
  await until(
    `the pod ready (${probeUrl})`,
    async () => {
      if (!proc.running) throw new Error(`the pod exited:\n${proc.logTail()}`);
      return fetch(probeUrl).then(
        (r) => r.status === 200,
        () => false,
      );
    },
    60_000,
  );

  const token = (await cp.serviceAccountKubeConfig(scraper.namespace, scraper.name)).users[0]!.token!;
  const tls = { caPem: secret['ca.crt']!.toString(), host: POD_IP, servername: `${RELEASE}.${NS}.svc` };

  return {
    process: proc,
    volume,
    webhookPort: port('webhook')!,
    metrics: async () => {
      const r = await scrape(port('metrics')!, { ...tls, token });
      if (r.status !== 200) throw new Error(`scrape: ${r.status} ${r.body}`);
      return r.body;
    },
    publishEndpoints: async () => {
      const service = await core.readNamespacedService({ name: RELEASE, namespace: NS });
      return admin.makeApiClient(k8s.DiscoveryV1Api).createNamespacedEndpointSlice({
        namespace: NS,
        body: {
          metadata: {
            name: `${RELEASE}-pod`,
            labels: { 'kubernetes.io/service-name': RELEASE, 'endpointslice.kubernetes.io/managed-by': 'veneer-test' },
          },
          addressType: 'IPv4',
          endpoints: [
            {
              addresses: [POD_IP],
              conditions: { ready: true },
              targetRef: { kind: 'Pod', namespace: NS, name: POD_NAME },
            },
          ],
          ports: (service.spec?.ports ?? []).map((p) => ({
            name: p.name,
            port: port(p.targetPort)!,
            protocol: p.protocol ?? 'TCP',
          })),
        },
      });
    },
  };
}

// The body of test/_real-node/node-ipv6.test.ts, run inside its own network namespace: the chart installed
// on a dual-stack node whose pods' primary address is IPv6.
import { request } from 'node:https';
import { isIPv4, isIPv6 } from 'node:net';
import t from 'tap';
import * as k8s from '@kubernetes/client-node';
import { startCertManager } from '../../../kit/cert-manager.ts';
import { ControlPlane } from '../../../kit/control-plane.ts';
import { until } from '../../../kit/fleet.ts';
import { installKarpenterCRDs } from '../../../kit/karpenter-crds.ts';
import { assertInOwnNetworkNamespace } from '../../../kit/netns.ts';
import { builtWatcherImage } from '../../../kit/node/image.ts';
import { nodeControlPlaneOptions, NODE_ADDRESS_V6, RealNode } from '../../../kit/node/node.ts';
import { ChartRelease } from '../../../kit/node/release.ts';
import { scrape } from '../../../kit/scrape.ts';

assertInOwnNetworkNamespace();
const image = builtWatcherImage();
const cp = await ControlPlane.start(nodeControlPlaneOptions());
const node = await RealNode.start(cp, [image], { ipv6: true }).catch(async (err) => {
  await cp.stop();
  throw err;
});
const certManager = await startCertManager(cp);
t.teardown(async () => {
  if (!t.passing())
    for (const part of ['kubelet', 'containerd']) console.error(`--- ${part}'s log ends:\n${node.logTail(part, 30)}`);
  await certManager.stop();
  await cp.stop();
});
await installKarpenterCRDs(cp);
const admin = cp.adminKubeConfig();
const release = new ChartRelease(cp, image);
// The serving certificate names the Service, not the pod's addresses.
const servername = `${release.name}.${release.namespace}.svc`;

/** An AdmissionReview POSTed to the pod as the apiserver posts it. */
function review(host: string, caPem: string): Promise<{ status: number; body: string }> {
  const body = JSON.stringify({
    apiVersion: 'admission.k8s.io/v1',
    kind: 'AdmissionReview',
    request: { uid: `uid-${host}`, kind: { group: '', version: 'v1', kind: 'Node' }, operation: 'CREATE', object: {} },
  });
  return new Promise((resolve, reject) => {
    const req = request(
      { host, port: 9443, servername, path: '/mutate-node', method: 'POST', ca: caPem, agent: false },
      (res) => {
        let data = '';
        res.on('data', (c) => (data += c));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, body: data }));
      },
    );
    req.setHeader('content-type', 'application/json');
    req.on('error', reject);
    req.end(body);
  });
}

t.test('the node is dual-stack, IPv6 first', async (t) => {
  const got = await admin.makeApiClient(k8s.CoreV1Api).readNode({ name: 'kit-node' });
  const internal = got.status?.addresses?.filter((a) => a.type === 'InternalIP').map((a) => a.address);
  t.equal(internal?.[0], NODE_ADDRESS_V6, "the node's first InternalIP is its IPv6 address");
  t.ok(
    internal?.some((a) => isIPv4(a)),
    'and it has an IPv4 one',
  );
});

t.test("helm install: the kubelet's probes reach the pod at its IPv6 address, and it is Ready", async (t) => {
  await release.install(['replicaCount=1']);
  // With one replica and maxUnavailable 1, helm's --wait may count 0 Ready replicas as enough.
  const ready = (p: k8s.V1Pod) => p.status?.conditions?.some((c) => c.type === 'Ready' && c.status === 'True');
  await until('the pod Ready', async () => (await release.pods()).some(ready), 120_000);
  const [pod] = (await release.pods()).filter((p) => !p.metadata?.deletionTimestamp);
  const ips = pod?.status?.podIPs?.map((p) => p.ip) ?? [];
  t.ok(isIPv6(pod?.status?.podIP ?? ''), `the primary pod IP is IPv6 (${pod?.status?.podIP})`);
  t.match(pod?.status?.podIP, /^fd00:77:/, 'from the IPv6 pod range');
  t.ok(
    ips.some((ip) => isIPv4(ip)),
    `and the pod has an IPv4 address too (${ips.join(', ')})`,
  );
  const container = pod?.spec?.containers.find((c) => c.name === 'watcher');
  for (const probe of [container?.readinessProbe, container?.livenessProbe])
    t.equal(probe?.httpGet?.host, undefined, 'the probe names no host: the kubelet calls status.podIP');
  t.ok(pod && ready(pod), 'Ready: the readiness probe answered over IPv6');
  t.equal(pod?.status?.containerStatuses?.[0]?.restartCount, 0, 'the liveness probe never failed');
});

t.test('/healthz, /readyz, /metrics and the webhooks answer at both of the pod IPs', async (t) => {
  const [pod] = (await release.pods()).filter((p) => !p.metadata?.deletionTimestamp);
  const ips = pod?.status?.podIPs?.map((p) => p.ip!) ?? [];
  t.equal(ips.length, 2, 'one address of each family');
  const secret = await admin
    .makeApiClient(k8s.CoreV1Api)
    .readNamespacedSecret({ name: `${release.name}-tls`, namespace: release.namespace });
  const caPem = Buffer.from(secret.data?.['ca.crt'] ?? '', 'base64').toString();
  // The admin passes the watcher's TokenReview and SubjectAccessReview.
  const token = cp.tokenFor('admin');
  for (const ip of ips) {
    const at = isIPv6(ip) ? `[${ip}]` : ip;
    for (const path of ['/healthz', '/readyz'])
      t.equal((await fetch(`http://${at}:8081${path}`)).status, 200, `${path} at ${at}`);
    const scraped = await scrape(8443, { caPem, token, host: ip, servername });
    t.equal(scraped.status, 200, `/metrics at ${at}, over HTTPS with a token`);
    t.match(scraped.body, /^# TYPE veneer_nodewatcher_admission_requests_total counter$/m);
    const answered = await review(ip, caPem);
    t.equal(answered.status, 200, `an AdmissionReview at ${at}`);
    t.match(JSON.parse(answered.body), { response: { uid: `uid-${ip}`, allowed: true } });
  }
});

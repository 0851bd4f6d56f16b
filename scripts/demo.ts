// `npm run demo [-- --keep] [-- --karpenter | --aws | --node]`: the whole flow on a local control plane. Builds
// kube-apiserver and etcd if needed, starts them, installs the Karpenter CRDs, runs the watcher
// (webhook, guard and reconciler) under its own least-privilege identity with development certificates,
// creates Veneer's overlays, launches nodes the way Karpenter does, and shows what was recorded.
// --karpenter: REAL Karpenter (v1.15.0, its KWOK cloud provider, kit/karpenter.ts) and
// kube-scheduler launch the nodes, for pending pods, instead of the simulation (kit/karpenter-sim.ts);
// the overlays name KWOK's keys, which the watcher (karpenterProvider auto) finds from the NodeClaims'
// nodeClassRef.group karpenter.kwok.sh. Slower.
// --aws: REAL Karpenter with its AWS provider (v1.14.3, kit/aws/karpenter.ts) launches the nodes in a
// local EC2 (moto), with Veneer's overlays on AWS keys; it shows the same pod launched spot without an
// overlay and on-demand with Veneer's Reserved Instance overlay, and the CreateFleet request of each.
// Everything that speaks an AWS API must run in a network namespace with only loopback, so this
// process re-runs the body (scripts/demo-aws.ts) in one (kit/netns.ts). No --keep with --aws:
// nothing outside that namespace could reach the cluster.
// --node: the chart installed with the real helm on a real node (kit/node/: kubelet, containerd, the
// image the Dockerfile describes), in a namespace of its own too (scripts/demo-node.ts).
import { execFileSync } from 'node:child_process';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import * as k8s from '@kubernetes/client-node';
import { loadConfig } from '../src/config/load.ts';
import { createLogger } from '../src/log.ts';
import { startWatcher } from '../src/commands/serve.ts';
import { mutatingWebhookConfiguration, recordGuardBinding, recordGuardPolicy } from '../kit/webhook-registration.ts';
import { clientFor, ControlPlane, freePort } from '../kit/control-plane.ts';
import { runInOwnNetworkNamespace } from '../kit/netns.ts';
import { History } from '../kit/node-history.ts';
import { KarpenterSim } from '../kit/karpenter-sim.ts';
import {
  awsLikeCatalog,
  createPendingPods,
  installKwokCRDs,
  Karpenter,
  KARPENTER_VERSION,
  NODECLAIM_API,
  type NodeClaim,
  type PendingPod,
  REGION,
} from '../kit/karpenter.ts';
import { computeSavingsPlan, ec2InstanceSavingsPlan, reservedInstance } from '../kit/veneer.ts';
import { scrape } from '../kit/scrape.ts';
import {
  grantMetricsReader,
  grantWatcherRole,
  pauseMutatingWebhook,
  waitForMutatingWebhook,
} from '../kit/watcher-env.ts';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const keep = process.argv.includes('--keep');
const withKarpenter = process.argv.includes('--karpenter');
const withAws = process.argv.includes('--aws');
const withNode = process.argv.includes('--node');
const t0 = Date.now();
const step = (msg: string) => console.log(`[demo +${((Date.now() - t0) / 1000).toFixed(1).padStart(5)}s] ${msg}`);
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const waitFor = async (what: string, cond: () => Promise<boolean> | boolean, ms = 30_000) => {
  for (const deadline = Date.now() + ms; !(await cond()); await sleep(100))
    if (Date.now() > deadline) throw new Error(`timed out after ${ms} ms waiting for: ${what}`);
};

if (process.argv.includes('--help')) {
  console.log(
    [
      'npm run demo [-- --keep] [-- --karpenter | --aws | --node]',
      '  (none)       the flow on a local control plane, nodes launched as Karpenter does (a simulation)',
      '  --karpenter  real Karpenter (KWOK provider) and kube-scheduler launch the nodes for pending pods',
      '  --aws        real Karpenter with its AWS provider launches them in a local EC2 (moto), inside a',
      '               network namespace with only loopback; shows the spot/on-demand flip the RI overlay makes',
      '  --node       the chart installed with helm on a real node (kubelet, containerd) from the image the',
      '               Dockerfile describes; the pods record the nodes launched, then `report` runs in one (exec)',
      '  --keep       keep the cluster and the watcher running afterwards (not with --aws: nothing outside',
      '               its namespace could reach it)',
    ].join('\n'),
  );
  process.exit(0);
}
/**
 * Builds `programs` if needed, then re-runs `script` (the demo's body) in a network namespace of its
 * own, and exits with its code: AWS APIs must not be reachable (--aws), the node needs addresses
 * of its own (--node).
 */
async function inOwnNamespace(
  script: string,
  programs: string[],
  what: string,
  why: string,
  prepare?: () => Promise<void>,
): Promise<never> {
  if (keep) {
    console.error(
      `[demo] --keep is not supported with ${what}: the cluster lives in a network namespace of its own, which nothing outside it can reach`,
    );
    process.exit(2);
  }
  step(`local control plane: building ${programs.join(', ')} if not cached (the first build takes a while)`);
  execFileSync('bash', [join(root, 'scripts', 'control-plane.sh'), ...programs], { stdio: 'inherit' });
  await prepare?.();
  step(`entering a network namespace of its own (${why})`);
  let code: number;
  try {
    code = await runInOwnNetworkNamespace(join(root, 'scripts', script), {
      ifRefused: 'throw',
      env: { VENEER_DEMO_T0: String(t0) },
    });
  } catch (err) {
    console.error(`[demo] ${(err as Error).message}`);
    code = 1;
  }
  process.exit(code);
}
if (withAws)
  await inOwnNamespace(
    'demo-aws.ts',
    ['etcd', 'kube-apiserver', 'kube-scheduler', 'karpenter-aws', 'moto'],
    '--aws',
    'with only loopback: AWS and the instance metadata service unreachable by construction',
  );
if (withNode)
  await inOwnNamespace(
    'demo-node.ts',
    ['etcd', 'kube-apiserver', 'kube-scheduler', 'kubelet', 'kube-controller-manager', 'pause', 'helm', 'cert-manager'],
    '--node',
    'the node and its pods get addresses there',
    async () => {
      const refused = (await import('../kit/node/node.ts')).realNodeRefusal();
      if (refused !== undefined) {
        console.error(`[demo] ${refused}`);
        process.exit(2);
      }
      // Outside the namespace: the Dockerfile's npm ci needs the registry.
      step("assembling the watcher's image as the Dockerfile describes it (cached by its inputs)");
      (await import('../kit/node/image.ts')).watcherImage();
    },
  );

if (withKarpenter) {
  step(
    `local control plane: building kube-apiserver, etcd, kube-scheduler and Karpenter ${KARPENTER_VERSION} (KWOK provider) if not cached (the first build takes a while)`,
  );
  execFileSync(
    'bash',
    [join(root, 'scripts', 'control-plane.sh'), 'etcd', 'kube-apiserver', 'kube-scheduler', 'karpenter-kwok'],
    { stdio: 'inherit' },
  );
} else {
  step('local control plane: building kube-apiserver and etcd if not cached (the first build takes about 10 minutes)');
  execFileSync('bash', [join(root, 'scripts', 'control-plane.sh'), 'etcd', 'kube-apiserver'], { stdio: 'inherit' });
}
step('starting etcd and kube-apiserver');
const cp = await ControlPlane.start({ users: [{ name: 'veneer-watcher' }] });
let watcherStop: (() => Promise<void>) | undefined;
const stopWatches: (() => void)[] = [];
const teardown = async () => {
  for (const stop of stopWatches.splice(0)) stop();
  await watcherStop?.();
  await cp.stop();
};
process.once('SIGINT', () => void teardown().then(() => process.exit(130)));

try {
  const admin = cp.adminKubeConfig();
  if (withKarpenter) {
    step("installing Karpenter's own CRDs (NodePool, NodeClaim, NodeOverlay, KWOKNodeClass) and the watcher's RBAC");
    await installKwokCRDs(cp);
  } else {
    step("installing the NodeOverlay and NodeClaim CRDs and the watcher's RBAC");
    const { installKarpenterCRDs } = await import('../kit/karpenter-crds.ts');
    await installKarpenterCRDs(cp);
  }
  await grantWatcherRole(admin, [{ kind: 'User', name: 'veneer-watcher', apiGroup: 'rbac.authorization.k8s.io' }]);

  step('development certificates (certs/make-dev-certs.sh)');
  const certDir = join(cp.dir, 'certs');
  execFileSync('bash', [join(root, 'certs', 'make-dev-certs.sh'), certDir], { stdio: 'ignore' });
  const caPem = (await import('node:fs')).readFileSync(join(certDir, 'ca.crt'), 'utf8');

  step("starting the watcher: the mutating webhook, the record's guard, caches, leader-elected reconciler");
  const { config } = loadConfig({
    flags: {
      '--enabled': 'true',
      '--webhook-port': String(await freePort()),
      '--metrics-port': String(await freePort()),
      '--health-port': String(await freePort()),
      '--webhook-cert-file': join(certDir, 'tls.crt'),
      '--webhook-key-file': join(certDir, 'tls.key'),
      '--shutdown-delay': '0s',
    },
  });
  const watcher = await startWatcher({
    config,
    client: clientFor(cp.userKubeConfig('veneer-watcher')),
    log: createLogger('warn'),
    host: '127.0.0.1',
  });
  watcherStop = watcher.stop;
  await watcher.caches?.synced();

  const registrations = admin.makeApiClient(k8s.AdmissionregistrationV1Api);
  const reg = {
    name: 'veneer-node-watcher',
    caBundle: caPem,
    url: `https://127.0.0.1:${watcher.webhookPort}`,
    labelNamespace: config.labelNamespace,
    timeoutSeconds: 5,
  };
  await registrations.createMutatingWebhookConfiguration({ body: mutatingWebhookConfiguration(reg) });
  // The record's guard: no one but the watcher may change a record, through the node or its status.
  await registrations.createValidatingAdmissionPolicy({
    body: recordGuardPolicy(reg.name, config.labelNamespace, { users: ['veneer-watcher'], groups: [] }),
  });
  await registrations.createValidatingAdmissionPolicyBinding({ body: recordGuardBinding(reg.name) });
  await waitForMutatingWebhook(admin, config.labelNamespace);

  const custom = admin.makeApiClient(k8s.CustomObjectsApi);
  const core = admin.makeApiClient(k8s.CoreV1Api);
  const rowOf = (n: k8s.V1Node, ms: number | undefined) => {
    const l = n.metadata?.labels ?? {};
    const story = JSON.parse(n.metadata?.annotations?.['veneer.io/overlay-decision'] ?? '{}') as { decidedBy?: string };
    return [
      n.metadata?.name ?? '',
      l['karpenter.sh/capacity-type'] ?? '',
      l['node.kubernetes.io/instance-type'] ?? '',
      l['veneer.io/overlay-influenced'] ?? '-',
      l['veneer.io/matching-overlay'] ?? '-',
      l['veneer.io/capacity-type'] ?? '-',
      story.decidedBy ?? '-',
      ms !== undefined ? `${ms}` : '-',
    ];
  };
  let rows: string[][];
  let footer: string[];

  if (!withKarpenter) {
    step("Veneer's overlays: Compute SP (weight 10), EC2 Instance SP m5/us-west-2 (20), RI m5.xlarge/us-west-2 (30)");
    for (const o of [
      computeSavingsPlan(),
      ec2InstanceSavingsPlan('m5', 'us-west-2'),
      reservedInstance('m5.xlarge', 'us-west-2'),
    ]) {
      await custom.createClusterCustomObject({
        group: 'karpenter.sh',
        version: 'v1alpha1',
        plural: 'nodeoverlays',
        body: o,
      });
    }
    for (let i = 0; (watcher.caches?.overlays.index.size ?? 0) < 3 && i < 100; i++) await sleep(50);

    const sim = new KarpenterSim(admin);
    const launchedAt = new Map<string, number>();
    const launch = async (name: string, instanceType: string, opts: { spot?: boolean; claim?: boolean } = {}) => {
      launchedAt.set(name, Date.now());
      const { registered } = await sim.launch({
        name,
        instanceType,
        capacityType: opts.spot ? 'spot' : 'on-demand',
        ...(opts.claim === false ? {} : { claimName: `${name}-claim` }),
      });
      // A webhook record comes back in Karpenter's own response: it existed when the call returned.
      if (registered.metadata?.labels?.['veneer.io/overlay-influenced'] !== undefined) recordedAt.set(name, Date.now());
    };
    const recordedAt = new Map<string, number>();
    step('launching nodes as Karpenter does (NodeClaim, kubelet CREATE, registration update)');
    await Promise.all([
      launch('ip-10-0-1-10', 'm5.xlarge'),
      launch('ip-10-0-1-11', 'm5.xlarge'),
      launch('ip-10-0-1-12', 'm5.2xlarge'),
      launch('ip-10-0-1-13', 'c6i.large'),
      launch('ip-10-0-1-14', 'r6g.xlarge', { claim: false }),
      launch('ip-10-0-1-20', 'm5.xlarge', { spot: true }),
      launch('ip-10-0-1-21', 'c6i.large', { spot: true }),
    ]);
    step('pausing the webhook (its configuration removed, as if it were down) and launching more');
    await registrations.deleteMutatingWebhookConfiguration({ name: 'veneer-node-watcher' });
    await sleep(1500);
    await Promise.all([
      launch('ip-10-0-2-30', 'm5.xlarge'),
      launch('ip-10-0-2-31', 'm5.large'),
      launch('ip-10-0-2-32', 't3.medium'),
    ]);

    step('waiting for every on-demand node to carry its record');
    for (let i = 0; i < 300; i++) {
      const nodes = (await core.listNode()).items;
      for (const n of nodes) {
        const name = n.metadata?.name ?? '';
        if (n.metadata?.labels?.['veneer.io/overlay-influenced'] !== undefined && !recordedAt.has(name))
          recordedAt.set(name, Date.now());
      }
      const onDemand = nodes.filter((n) => n.metadata?.labels?.['karpenter.sh/capacity-type'] === 'on-demand');
      if (onDemand.every((n) => recordedAt.has(n.metadata?.name ?? ''))) break;
      await sleep(100);
    }

    rows = (await core.listNode()).items
      .filter((n) => launchedAt.has(n.metadata?.name ?? ''))
      .map((n) => {
        const name = n.metadata?.name ?? '';
        const rec = recordedAt.get(name);
        return rowOf(n, rec !== undefined ? rec - (launchedAt.get(name) ?? rec) : undefined);
      });
    footer = [
      'MS-TO-RECORD: from the start of the launch (NodeClaim, kubelet CREATE, registration) to the record; webhook records',
      'came back inside those calls, reconciler records were polled every 100 ms. Labels are never changed afterwards.',
    ];
  } else {
    step(
      `starting kube-scheduler and Karpenter ${KARPENTER_VERSION} (KWOK cloud provider, AWS-like catalog; NodePool default, KWOKNodeClass with nodeRegistrationDelay 2s, as a booting kubelet)`,
    );
    await Karpenter.start(cp, { nodeClasses: { default: { nodeRegistrationDelay: '2s' } } });

    step(
      "Veneer's overlays on KWOK's keys: Compute SP (weight 10), EC2 Instance SP m5/us-west-2 (20), RI m5.xlarge/us-west-2 (30)",
    );
    for (const o of [
      computeSavingsPlan('kwok'),
      ec2InstanceSavingsPlan('m5', REGION, 'kwok'),
      reservedInstance('m5.xlarge', REGION),
    ]) {
      await custom.createClusterCustomObject({
        group: 'karpenter.sh',
        version: 'v1alpha1',
        plural: 'nodeoverlays',
        body: o,
      });
    }
    step('waiting until Karpenter validated them (Ready) and the watcher counts them');
    await waitFor('Karpenter validated the 3 overlays', async () => {
      const items = (
        (await custom.listClusterCustomObject({
          group: 'karpenter.sh',
          version: 'v1alpha1',
          plural: 'nodeoverlays',
        })) as { items: { status?: { conditions?: { type: string; status: string }[] } }[] }
      ).items;
      return (
        items.length === 3 &&
        items.every((o) => o.status?.conditions?.some((c) => c.type === 'Ready' && c.status === 'True'))
      );
    });
    await waitFor('the watcher counts the 3 overlays', async () =>
      /^veneer_nodewatcher_overlays\{state="counted"\} 3$/m.test(await watcher.metrics.registry.metrics()),
    );
    // Creation timestamps have whole seconds: the launches come in a later second than the validations.
    await sleep(1100);

    // What this process sees on watches: each NodeClaim's first appearance, every version of every
    // Node, so each record's first appearance and whether a later version changed it.
    const history = new History(admin);
    await history.start();
    stopWatches.push(() => history.stop());
    const recordedAt = (node: string) => history.recordOf(node)?.at;

    const karpenterNodes = async () =>
      (await core.listNode()).items.filter((n) => {
        const pool = n.metadata?.labels?.['karpenter.sh/nodepool'];
        return pool !== undefined && pool !== 'probe';
      });
    const allRecorded = async (count: number) => {
      const nodes = await karpenterNodes();
      return (
        nodes.length === count &&
        nodes.every(
          (n) =>
            n.metadata?.labels?.['karpenter.sh/capacity-type'] !== 'on-demand' ||
            recordedAt(n.metadata?.name ?? '') !== undefined,
        )
      );
    };
    const first: PendingPod[] = [
      { name: 'web-1', instanceType: 'm5.xlarge', capacityType: 'on-demand' },
      { name: 'web-2', instanceType: 'm5.xlarge', capacityType: 'on-demand' },
      { name: 'db-1', instanceType: 'm5.2xlarge', capacityType: 'on-demand' },
      { name: 'api-1', instanceType: 'c6i.large', capacityType: 'on-demand' },
      { name: 'batch-1', instanceType: 'm5.xlarge', capacityType: 'spot' },
      { name: 'cache-1', instanceType: 'r6g.xlarge', capacityType: 'on-demand' },
    ];
    step(
      'creating pods that need a node each (pinned by nodeSelector): 2 x m5.xlarge, m5.2xlarge, c6i.large, r6g.xlarge on-demand; m5.xlarge spot',
    );
    const podsAt = Date.now();
    await createPendingPods(admin, first, awsLikeCatalog());
    step('kube-scheduler marks them Unschedulable, Karpenter launches NodeClaims, KWOK creates the Nodes 2 s later');
    await waitFor(`${first.length} nodes, every on-demand one recorded`, () => allRecorded(first.length), 90_000);
    const firstClaimAt = Math.min(...[...history.claims.values()].map((c) => c.seenAt));
    const firstNodeAt = Math.min(
      ...(await karpenterNodes()).map((n) => history.firstSeenAt(n.metadata?.name ?? '') ?? Infinity),
    );

    step('pausing the webhook (its configuration removed, as if it were down) and creating more pods');
    await pauseMutatingWebhook(admin);
    const more: PendingPod[] = [
      { name: 'web-3', instanceType: 'm5.xlarge', capacityType: 'on-demand' },
      { name: 'api-2', instanceType: 'm5.large', capacityType: 'on-demand' },
      { name: 'tools-1', instanceType: 't3.large', capacityType: 'on-demand' },
    ];
    await createPendingPods(admin, more, awsLikeCatalog());
    step('waiting for every node to be registered by Karpenter and every on-demand node to carry its record');
    await waitFor(
      `${first.length + more.length} nodes, every on-demand one recorded`,
      () => allRecorded(first.length + more.length),
      90_000,
    );
    await waitFor(
      'Karpenter registered every node',
      async () => (await karpenterNodes()).every((n) => n.metadata?.labels?.['karpenter.sh/registered'] === 'true'),
      60_000,
    );
    await sleep(500); // room for a later write to show up on the watch

    const claims = ((await custom.listClusterCustomObject(NODECLAIM_API)) as { items: NodeClaim[] }).items;
    const claimOf = new Map(claims.map((c) => [c.status?.nodeName ?? c.metadata.name, c.metadata.name]));
    const seenAt = (n: k8s.V1Node) => history.firstSeenAt(n.metadata?.name ?? '') ?? 0;
    const nodes = (await karpenterNodes()).sort((a, b) => seenAt(a) - seenAt(b));
    rows = nodes.map((n) => {
      const name = n.metadata?.name ?? '';
      const rec = recordedAt(name);
      const claimAt = history.claims.get(claimOf.get(name) ?? name)?.seenAt;
      return rowOf(n, rec !== undefined && claimAt !== undefined ? rec - claimAt : undefined);
    });
    const nodeToRecord = (by: string) =>
      rows.filter((r) => r[6] === by).map((r) => (recordedAt(r[0]!) ?? 0) - (history.firstSeenAt(r[0]!) ?? 0));
    const changed = nodes.map((n) => n.metadata?.name ?? '').filter((name) => history.recordOf(name)?.changed);
    const span = (ms: number[]) => (ms.length === 0 ? 'none' : `${Math.min(...ms)}-${Math.max(...ms)} ms`);
    footer = [
      `Real Karpenter ${KARPENTER_VERSION} (KWOK provider): ${claims.length} NodeClaims for ${first.length + more.length} pods; the first NodeClaim ${firstClaimAt - podsAt} ms after the first pods, the first Node ${firstNodeAt - firstClaimAt} ms after it.`,
      `From the Node's first appearance to its record: webhook ${span(nodeToRecord('webhook'))} (in the CREATE), reconciler ${span(nodeToRecord('reconciler'))}.`,
      "MS-TO-RECORD: from the NodeClaim's appearance (Karpenter's launch, seen on a watch) to the first version of the Node with the record",
      '(seen on a watch); it includes the 2 s registration delay before KWOK creates the Node. Webhook records came in that CREATE, reconciler',
      changed.length === 0
        ? "records in one PATCH after it. No record changed in any later version of its Node, Karpenter's registration included."
        : `records in one PATCH after it. Records changed afterwards on: ${changed.join(', ')}.`,
    ];
  }

  const header = [
    'NAME',
    'CAPACITY',
    'TYPE',
    'INFLUENCED',
    'MATCHING-OVERLAY',
    'VENEER-CAPACITY-TYPE',
    'RECORDED-BY',
    'MS-TO-RECORD',
  ];
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => (r[i] ?? '').length)));
  console.log(
    `\n${[header, ...rows].map((r) => r.map((c, i) => (c ?? '').padEnd(widths[i] ?? 0)).join('  ')).join('\n')}`,
  );
  console.log(`\n${footer.join('\n')}`);

  // Metrics answer only a token the apiserver accepts, of an identity allowed to get /metrics:
  // here a ServiceAccount bound to metrics-reader, as Prometheus' would be.
  await grantMetricsReader(admin, [{ kind: 'ServiceAccount', name: 'prometheus', namespace: 'monitoring' }]);
  const token = await cp.serviceAccountToken('monitoring', 'prometheus');
  const metrics = (await scrape(watcher.metricsPort, { caPem, token })).body;
  console.log('\nKey metrics (HTTPS, as ServiceAccount monitoring/prometheus, bound to metrics-reader):');
  for (const line of metrics.split('\n')) {
    if (
      /^veneer_nodewatcher_(nodes_labeled_total|nodes_influenced_current|nodes_pending|labeling_errors_total|leader|cache_refresh_total)[ {]/.test(
        line,
      )
    )
      console.log(`  ${line}`);
    if (/^veneer_nodewatcher_admission_requests_total\{.*webhook="mutate"/.test(line)) console.log(`  ${line}`);
  }

  if (keep) {
    // What a user tries next must meet the webhook, not only the reconciler.
    step('registering the mutating webhook again before handing over');
    await registrations.createMutatingWebhookConfiguration({ body: mutatingWebhookConfiguration(reg) });
    await waitForMutatingWebhook(admin, config.labelNamespace);
    const path = cp.writeKubeConfig();
    const metricsUrl = `https://127.0.0.1:${watcher.metricsPort}/metrics`;
    console.log(
      [
        '\n--keep: the control plane and the watcher keep running. Try:',
        `  KUBECONFIG=${path} kubectl get nodes -L veneer.io/overlay-influenced,veneer.io/capacity-type`,
        ...(withKarpenter
          ? [
              `  KUBECONFIG=${path} kubectl get nodeclaims,nodeoverlays`,
              `  KUBECONFIG=${path} kubectl run try-me --image=registry.k8s.io/pause:3.10 --overrides='${JSON.stringify({ spec: { nodeSelector: { 'node.kubernetes.io/instance-type': 'm5.xlarge', 'karpenter.sh/capacity-type': 'on-demand' }, containers: [{ name: 'try-me', image: 'registry.k8s.io/pause:3.10', resources: { requests: { cpu: '2100m' } } }] } })}'   # Karpenter launches a node for it`,
            ]
          : []),
        `  curl -s --cacert ${join(certDir, 'ca.crt')} -H "Authorization: Bearer $(KUBECONFIG=${path} kubectl -n monitoring create token prometheus)" ${metricsUrl} | grep veneer_`,
        `  curl -s --cacert ${join(certDir, 'ca.crt')} ${metricsUrl}     # no token: 401`,
        'Ctrl-C to stop and clean up.',
      ].join('\n'),
    );
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

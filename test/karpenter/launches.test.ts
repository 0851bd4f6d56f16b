// Node launches through REAL Karpenter (KWOK provider, kit/karpenter.ts), not a simulation: pending
// pods, kube-scheduler marks them Unschedulable, Karpenter provisions NodeClaims and its KWOK
// provider creates the Nodes, then Karpenter registers them (label sync, unregistered taint
// removed, owner reference, finalizer). Two launch paths:
//   - instant (KWOKNodeClass without delay): the Node's CREATE carries every label, right after
//     Karpenter's launch, before the NodeClaim has its providerID: the webhook finds the NodeClaim
//     by the name KWOK gives the node and records each node inline, at CREATE;
//   - booting (nodeRegistrationDelay 2s): the Node comes 2 s after the launch, as a booting
//     kubelet's would, when the NodeClaim already has its providerID: the webhook records each
//     node inline from the node and its NodeClaim.
// And a third run with the mutating webhook unregistered (the watcher's webhook down): the
// reconciler records each node, with one PATCH, racing Karpenter's registration.
// For every launched node: exactly one record on on-demand nodes and none on spot (the watch
// history and the audit log show it was written once and never changed, whoever wrote it), the
// overlay it names is the one Karpenter's own NodeOverlay controller and store apply (the judge,
// fed the same catalog, NodePools, overlays and each node's offering), and the record's guard
// never refused Karpenter. VENEER_KARPENTER_LAUNCHES sets the launches per path (default 100).
import t, { type Test } from 'tap';
import * as k8s from '@kubernetes/client-node';
import { sleep, until } from '../../kit/fleet.ts';
import {
  burstPods,
  createPendingPods,
  KARPENTER_USER,
  type CapacityType,
  type KwokNodePool,
  PRICE_OVERLAY_APPLIED,
  REGION,
  startKarpenterEnv,
  KARPENTER_VERSION,
} from '../../kit/karpenter.ts';
import {
  computeSavingsPlan,
  ec2InstanceSavingsPlan,
  FAMILY_KEY,
  reservedInstance,
  type VeneerOverlay,
} from '../../kit/veneer.ts';
import { launchWatcher, pauseMutatingWebhook, registerWebhooksAt, WATCHER_USER } from '../../kit/watcher-env.ts';
import { KarpenterJudge, type JudgeLaunch } from '../judges/karpenter-oracle.ts';
import { kwokJudgeCase } from '../judges/kwok-judge.ts';
import {
  againstJudge,
  type AuditEntry,
  checkRecords,
  launchAuditPolicy,
  nodeWrites,
  RECORD_LABELS,
  refusedRequests,
  registered,
  admissionVerdicts,
} from '../support/launch-records.ts';
import { History, quantiles, storyOf } from '../../kit/node-history.ts';
import { expectOverlaysCounted } from '../support/expectations.ts';

const LAUNCHES = Number(process.env.VENEER_KARPENTER_LAUNCHES ?? 100);
t.setTimeout(Math.max(300_000, LAUNCHES * 4_000));
const started = Date.now();

const AUDIT_POLICY = launchAuditPolicy(WATCHER_USER, [KARPENTER_USER]);

const POOLS: KwokNodePool[] = [
  { name: 'instant', nodeClass: 'instant' },
  // A template label, which Karpenter compares with overlays (the preference below names it).
  { name: 'booting', nodeClass: 'booting', labels: { team: 'batch' } },
  { name: 'late', nodeClass: 'instant' },
];
const env = await startKarpenterEnv({
  auditPolicy: AUDIT_POLICY,
  karpenter: { nodeClasses: { instant: {}, booting: { nodeRegistrationDelay: '2s' } }, nodePools: POOLS },
});
const { cp, admin, karpenter } = env;
const { watcher } = await launchWatcher(cp, env.certs, WATCHER_USER);
const history = new History(admin);
t.teardown(async () => {
  history.stop();
  await watcher.stop();
  await cp.stop();
});
await registerWebhooksAt(admin, { caPem: env.certs.caPem, port: watcher.webhookPort! });
const atRegistration = admissionVerdicts((await cp.get('/metrics')).body);
const custom = admin.makeApiClient(k8s.CustomObjectsApi);
const core = admin.makeApiClient(k8s.CoreV1Api);

// Veneer's three kinds on KWOK keys, and a preference for the booting pool's team on 4 vCPUs or more.
const RI = reservedInstance('m5.xlarge', REGION);
const EC2_M5 = ec2InstanceSavingsPlan('m5', REGION, 'kwok');
const COMPUTE = computeSavingsPlan('kwok');
const PREF: VeneerOverlay = {
  apiVersion: 'karpenter.sh/v1alpha1',
  kind: 'NodeOverlay',
  metadata: {
    name: 'pref-booting-1',
    labels: { 'app.kubernetes.io/managed-by': 'veneer', 'veneer.io/type': 'preference' },
  },
  spec: {
    weight: 25,
    priceAdjustment: '-10%',
    requirements: [
      { key: 'karpenter.sh/capacity-type', operator: 'In', values: ['on-demand'] },
      { key: 'team', operator: 'In', values: ['batch'] },
      { key: 'karpenter.kwok.sh/instance-cpu', operator: 'Gte', values: ['4'] },
      { key: FAMILY_KEY.kwok, operator: 'Exists' },
    ],
  },
};
const OVERLAYS = [RI, EC2_M5, COMPUTE, PREF];

await expectOverlaysCounted({
  custom,
  overlays: OVERLAYS,
  metrics: () => watcher.metrics.registry.metrics(),
  condition: 'ValidationSucceeded',
});
await history.start();

const judge = new KarpenterJudge(KARPENTER_VERSION);
t.teardown(() => judge.close());

const audit = () => cp.auditEvents() as unknown as AuditEntry[];
// The nodes that exist (a launch Karpenter gave up on and made again leaves a removed node in the history).
const nodesOf = (pool: string) =>
  [...history.nodes.entries()].filter(
    ([, v]) => v[0]?.labels['karpenter.sh/nodepool'] === pool && v.at(-1)?.type !== 'DELETED',
  );

const summary: string[] = [];

async function launchPath(t: Test, pool: string, path: string, count: number, expected?: 'reconciler'): Promise<void> {
  const LAUNCHES = count;
  const wanted = burstPods(pool, count);
  const onDemand = wanted.filter((p) => p.capacityType === 'on-demand').length;
  const t0 = Date.now();
  await createPendingPods(admin, wanted, karpenter.catalog);
  await until(
    `${LAUNCHES} ${pool} nodes registered by Karpenter`,
    () => {
      const nodes = nodesOf(pool);
      return nodes.length === LAUNCHES && nodes.every(([, v]) => registered(v.at(-1)));
    },
    60_000 + LAUNCHES * 2_000,
  );
  const allRegistered = Date.now() - t0;
  await until(
    `${onDemand} records`,
    () => nodesOf(pool).filter(([, v]) => storyOf(v.at(-1)) !== undefined).length === onDemand,
    60_000,
  );
  await sleep(1500); // room for a second write, or a change by anyone, to show up
  const nodes = nodesOf(pool);
  t.equal(nodes.length, LAUNCHES, `${LAUNCHES} nodes, one per pod`);
  const claims = await karpenter.nodeClaims();
  t.equal(
    claims.filter((c) => c.metadata.labels?.['karpenter.sh/nodepool'] === pool).length,
    LAUNCHES,
    `${LAUNCHES} NodeClaims`,
  );

  // Exactly one record per on-demand node, none on spot; written once, never changed after.
  const claimCreated = new Map(claims.map((c) => [c.metadata.name, Date.parse(c.metadata.creationTimestamp ?? '')]));
  const {
    problems,
    by,
    from,
    approximate,
    recordedBeforeRegistration,
    recordedInRegistration,
    latency,
    evaluatedLate,
  } = checkRecords(nodes, nodeWrites(audit(), WATCHER_USER), history, claimCreated);
  t.same(
    problems,
    [],
    'every on-demand node has exactly one record, written once and never changed; spot nodes have none',
  );
  t.comment(
    `who recorded: the webhook inline ${by.webhook}, the reconciler ${by.reconciler}; decided from the node alone ${from.node}, from node and NodeClaim ${from['node+nodeclaim']}; basis approximate ${approximate}`,
  );
  if (expected) t.equal(by[expected], onDemand, `the ${expected} recorded every node`);
  // Karpenter's registration came after every inline record (and changed none: above); the
  // reconciler's PATCH lands before or after it, whichever is first.
  if (by.reconciler === 0) {
    t.equal(
      recordedBeforeRegistration + recordedInRegistration,
      onDemand,
      "every record came in the CREATE or in Karpenter's registration update itself, and the registration (label sync, taint removal, owner reference, finalizer) changed none",
    );
    t.comment(
      `recorded at CREATE: ${recordedBeforeRegistration}; in the registration update: ${recordedInRegistration}`,
    );
  } else
    t.comment(
      `the reconciler's record came before Karpenter's registration on ${recordedBeforeRegistration} of ${onDemand} nodes, after it on the rest`,
    );

  // The overlay Karpenter's own controller and store apply to each node's offering.
  const launches: JudgeLaunch[] = [];
  const names: string[] = [];
  for (const [name, v] of nodes) {
    const labels = v.at(-1)!.labels;
    launches.push({
      nodePool: pool,
      instanceType: labels['node.kubernetes.io/instance-type']!,
      offering: karpenter.offeringOf(labels).offering,
    });
    names.push(name);
  }
  const answer = await judge.judge(kwokJudgeCase(karpenter.catalog, karpenter.nodePools, OVERLAYS, launches));
  t.equal(answer.error, undefined, "the judge's Reconcile succeeded");
  const { disagree, perOverlay } = againstJudge(history, names, launches, answer.applied);
  t.same(disagree, [], `the record names the overlay Karpenter's own code applies, on all ${LAUNCHES} nodes`);
  t.comment(perOverlay);

  const summaryLine = `${path} (${pool}): ${LAUNCHES} launches (${onDemand} on-demand) registered ${allRegistered} ms after the pods; records by webhook ${by.webhook}, by reconciler ${by.reconciler}; characteristics from node ${from.node}, node+nodeclaim ${from['node+nodeclaim']}; basis approximate ${approximate}; evaluatedAt - NodeClaim creation (whole seconds) ${quantiles(evaluatedLate)}; NodeClaim->Node ${quantiles(latency.claimToNode)}; NodeClaim->record ${quantiles(latency.claimToRecord)}; Node->record ${quantiles(latency.nodeToRecord)}`;
  t.comment(summaryLine);
  summary.push(summaryLine);
}

t.test(`instant path: ${LAUNCHES} concurrent launches, the Node created with every label`, (t) =>
  launchPath(t, 'instant', 'instant', LAUNCHES),
);
t.test(`booting path: ${LAUNCHES} concurrent launches, the Node 2 s after the launch`, (t) =>
  launchPath(t, 'booting', 'booting', LAUNCHES),
);
t.test("webhook down: the reconciler records each node once, racing Karpenter's registration", async (t) => {
  await pauseMutatingWebhook(admin);
  await launchPath(t, 'late', 'webhook down', Math.max(12, Math.round(LAUNCHES / 5)), 'reconciler');
});

t.test("Karpenter was never refused: no denial of the record's guard, no 4xx on its node writes", async (t) => {
  t.same(refusedRequests(audit(), KARPENTER_USER), [], 'no node write of Karpenter refused');
  const conflicted = audit().filter(
    (e) => e.stage === 'ResponseComplete' && e.user.username === KARPENTER_USER && e.responseStatus?.code === 409,
  );
  const conflicts = POOLS.map(
    (p) => `${conflicted.filter((e) => e.objectRef?.name?.startsWith(`kwok-${p.name}-`)).length} on ${p.name} nodes`,
  ).join(', ');
  // The reconciler's PATCH is guarded by the resourceVersion it read: racing Karpenter's
  // registration, either may get a 409 and retry (each node still has one write: above).
  const watcherFailures = audit().filter(
    (e) =>
      e.stage === 'ResponseComplete' &&
      e.user.username === WATCHER_USER &&
      e.objectRef?.resource === 'nodes' &&
      (e.responseStatus?.code ?? 0) >= 400,
  );
  t.same(
    watcherFailures
      .filter((e) => e.responseStatus?.code !== 409)
      .map((e) => `${e.verb} ${e.objectRef?.name}: ${e.responseStatus?.code}`),
    [],
    'no write of the watcher failed but for conflicts',
  );
  t.comment(
    `the watcher's node writes that conflicted (409, retried): ${watcherFailures.length}, all on nodes the reconciler recorded: ${watcherFailures.every((e) => e.objectRef?.name?.startsWith('kwok-late-'))}`,
  );
  const karpenterWrites = audit().filter(
    (e) =>
      e.stage === 'ResponseComplete' &&
      e.user.username === KARPENTER_USER &&
      ['create', 'update', 'patch'].includes(e.verb),
  );
  const mutated = karpenterWrites.filter(
    (e) =>
      e.verb === 'create' &&
      Object.entries(e.annotations ?? {}).some(
        ([k, v]) =>
          k.startsWith('mutation.webhook.admission.k8s.io/') &&
          v.includes('record.nodes.veneer.io') &&
          v.includes('"mutated":true'),
      ),
  ).length;
  const { rejections, guardDenials } = admissionVerdicts((await cp.get('/metrics')).body);
  t.equal(rejections - atRegistration.rejections, 0, 'the apiserver counts no webhook rejection');
  t.equal(
    guardDenials - atRegistration.guardDenials,
    0,
    "the record's guard denied nothing: Karpenter's writes never touch a record",
  );
  t.comment(
    `Karpenter's node writes: ${karpenterWrites.filter((e) => e.verb === 'create').length} creates (${mutated} mutated inline by record.nodes.veneer.io), ${karpenterWrites.filter((e) => e.verb !== 'create').length} updates/patches, conflicts (409, retried by Karpenter): ${conflicts}`,
  );
});

t.test(
  `both carry Karpenter's ${PRICE_OVERLAY_APPLIED}; the record tells spot from on-demand and names the overlay`,
  async (t) => {
    const m5xl = [...history.nodes.entries()].filter(
      ([, v]) =>
        v.at(-1)?.labels['node.kubernetes.io/instance-type'] === 'm5.xlarge' &&
        v.at(-1)?.labels['karpenter.sh/nodepool'] === 'instant',
    );
    const pick = (ct: CapacityType) => m5xl.find(([, v]) => v.at(-1)?.labels['karpenter.sh/capacity-type'] === ct);
    const [spotName] = pick('spot') ?? [];
    const [odName] = pick('on-demand') ?? [];
    t.ok(spotName && odName, 'an m5.xlarge spot node and an on-demand one');
    const spot = await core.readNode({ name: spotName! });
    const od = await core.readNode({ name: odName! });
    const claims = new Map((await karpenter.nodeClaims()).map((c) => [c.metadata.name, c]));
    for (const n of [spot, od]) {
      t.equal(
        n.metadata?.annotations?.[PRICE_OVERLAY_APPLIED],
        'true',
        `${n.metadata?.labels?.['karpenter.sh/capacity-type']} node: ${PRICE_OVERLAY_APPLIED}=true`,
      );
      t.equal(
        claims.get(n.metadata?.labels?.['kubernetes.io/hostname'] ?? '')?.metadata.annotations?.[PRICE_OVERLAY_APPLIED],
        'true',
        '...and its NodeClaim',
      );
    }
    t.same(
      RECORD_LABELS.filter((k) => spot.metadata?.labels?.[k] !== undefined),
      [],
      'the spot node: no record (no overlay priced a spot offering)',
    );
    t.match(
      od.metadata?.labels,
      {
        'veneer.io/overlay-influenced': 'true',
        'veneer.io/matching-overlay': RI.metadata.name,
        'veneer.io/capacity-type': 'reserved-instance',
        'veneer.io/instance-type': 'm5.xlarge',
      },
      'the on-demand node: the Reserved Instance overlay',
    );
    t.match(JSON.parse(od.metadata?.annotations?.['veneer.io/overlay-decision'] ?? '{}'), {
      influenced: true,
      overlay: RI.metadata.name,
      weight: 30,
      price: '0.00',
      basis: 'exact',
    });
  },
);

t.test('footprint', async (t) => {
  const u = karpenter.usage();
  t.ok(u.karpenter && u.scheduler, 'Karpenter and kube-scheduler still running');
  const line = `karpenter RSS ${u.karpenter?.rssMiB.toFixed(0)} MiB (peak ${u.karpenter?.peakRssMiB.toFixed(0)}), ${u.karpenter?.cpuSeconds.toFixed(1)} CPU-s; kube-scheduler RSS ${u.scheduler?.rssMiB.toFixed(0)} MiB (peak ${u.scheduler?.peakRssMiB.toFixed(0)}), ${u.scheduler?.cpuSeconds.toFixed(1)} CPU-s; file wall time ${((Date.now() - started) / 1000).toFixed(1)} s`;
  t.comment(line);
  console.error(['karpenter launches:', ...summary, line].join('\n  '));
});

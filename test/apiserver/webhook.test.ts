// The admission webhook, proven the only way that counts: the real apiserver calls it over TLS
// and stores what it returns. The record's guard, a policy the apiserver evaluates itself:
// test/apiserver/record-guard.test.ts.
import { connect } from 'node:tls';
import t from 'tap';
import * as k8s from '@kubernetes/client-node';
import { computeSavingsPlan, ec2InstanceSavingsPlan, reservedInstance } from '../../kit/veneer.ts';
import { KarpenterSim } from '../../kit/karpenter-sim.ts';
import { startWatcherEnv, writeFileAtomic } from '../../kit/watcher-env.ts';
import { issueCert } from '../../kit/pki.ts';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { counter, until } from '../../kit/fleet.ts';
import { tlsHandshake } from '../../kit/scrape.ts';
import { promtool } from '../support/prometheus.ts';
import { nodeReview, post as postTo } from '../support/reviews.ts';

const env = await startWatcherEnv({ users: [{ name: 'alice', groups: ['ops'] }] });
t.teardown(() => env.stop());
const { admin, watcher } = env;
const sim = new KarpenterSim(admin);
const custom = admin.makeApiClient(k8s.CustomObjectsApi);
const core = admin.makeApiClient(k8s.CoreV1Api);
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
// The overlays reach the webhook through its watch; wait until all three are in the index.
for (let i = 0; watcher.caches!.overlays.index.size < 3 && i < 100; i++) await new Promise((r) => setTimeout(r, 50));
// Launch timestamps have whole seconds: one in the second the watcher synced may precede it, and is judged approximately.
await new Promise((r) => setTimeout(r, 1000));

const labelsOf = (n: k8s.V1Node) => n.metadata?.labels ?? {};

async function scrape(): Promise<string> {
  return (await fetch(`http://127.0.0.1:${watcher.metricsPort}/metrics`)).text();
}

t.test('kubelet CREATE with a known NodeClaim: the record is in the CREATE response itself', async (t) => {
  await sim.createNodeClaim({ name: 'ip-10-0-0-1', claimName: 'default-aaaa1', instanceType: 'm5.xlarge' });
  for (let i = 0; !watcher.caches!.nodeClaims.byName('default-aaaa1') && i < 100; i++)
    await new Promise((r) => setTimeout(r, 50));
  const created = await sim.kubeletCreate({ name: 'ip-10-0-0-1' });
  t.match(labelsOf(created), {
    'veneer.io/overlay-influenced': 'true',
    'veneer.io/matching-overlay': 'cost-aware-ri-m5.xlarge-us-west-2',
    'veneer.io/capacity-type': 'reserved-instance',
    'veneer.io/instance-type': 'm5.xlarge',
    'veneer.io/labeled-at': /^\d{8}T\d{6}Z$/,
  });
  const story = JSON.parse(created.metadata?.annotations?.['veneer.io/overlay-decision'] ?? '{}');
  t.match(story, {
    decidedBy: 'webhook',
    basis: 'exact',
    characteristicsFrom: 'node+nodeclaim',
    nodeClaim: 'default-aaaa1',
  });
  const stored = await core.readNode({ name: 'ip-10-0-0-1' });
  t.same(labelsOf(stored), labelsOf(created), 'stored as returned');
});

t.test('without a NodeClaim: undetermined at CREATE, recorded by the registration update', async (t) => {
  const created = await sim.kubeletCreate({ name: 'ip-10-0-0-2' });
  t.notOk('veneer.io/overlay-influenced' in labelsOf(created), 'no record while the labels are not final');
  const registered = await sim.register({ name: 'ip-10-0-0-2', instanceType: 'm5.2xlarge' });
  t.match(labelsOf(registered), {
    'veneer.io/overlay-influenced': 'true',
    'veneer.io/matching-overlay': 'cost-aware-ec2-sp-m5-us-west-2',
    'veneer.io/instance-family': 'm5',
  });
  t.match(
    JSON.parse(registered.metadata?.annotations?.['veneer.io/overlay-decision'] ?? '{}'),
    { decidedBy: 'webhook' },
    "recorded inline, inside Karpenter's own request",
  );
  t.ok(
    counter(await scrape(), 'veneer_nodewatcher_admission_requests_total', {
      webhook: 'mutate',
      outcome: 'undetermined',
    }) >= 1,
  );
});

t.test('spot and non-Karpenter nodes are untouched; no matching overlay records false', async (t) => {
  const spot = (await sim.launch({ name: 'ip-10-0-0-3', capacityType: 'spot', instanceType: 'm5.xlarge' })).registered;
  t.notOk(
    Object.keys(labelsOf(spot)).some((k) => k.startsWith('veneer.io/')),
    'spot: no veneer.io label',
  );
  const plain = await core.createNode({
    body: { metadata: { name: 'plain-node', labels: { 'kubernetes.io/os': 'linux' } } },
  });
  t.same(labelsOf(plain), { 'kubernetes.io/os': 'linux' }, 'non-Karpenter: unchanged');
  const graviton = (await sim.launch({ name: 'ip-10-0-0-4', instanceType: 'a1.large' })).registered;
  t.equal(labelsOf(graviton)['veneer.io/overlay-influenced'], 'true', 'the Compute SP matches any family');
  await custom.deleteClusterCustomObject({
    group: 'karpenter.sh',
    version: 'v1alpha1',
    plural: 'nodeoverlays',
    name: 'cost-aware-compute-sp-global',
  });
  for (let i = 0; watcher.caches!.overlays.index.size > 2 && i < 100; i++) await new Promise((r) => setTimeout(r, 50));
  // Kubernetes timestamps have one-second precision: launch in the next second, so the node's
  // creationTimestamp cannot fall in the second the overlay went away.
  await new Promise((r) => setTimeout(r, 1100));
  const none = (await sim.launch({ name: 'ip-10-0-0-5', instanceType: 'a1.large' })).registered;
  t.equal(labelsOf(none)['veneer.io/overlay-influenced'], 'false');
  t.notOk('veneer.io/matching-overlay' in labelsOf(none));
  t.match(labelsOf(none)['veneer.io/labeled-at'], /^\d{8}T\d{6}Z$/);
});

/** POSTs to the watcher's webhook port as anyone who can reach it (not the apiserver). */
const post = (path: string, body: string | Buffer, contentType = 'application/json') =>
  postTo({ port: watcher.webhookPort!, caPem: env.certs.caPem }, path, body, contentType);

t.test('dry-run reviews get the same answer but never count as labelled nodes', async (t) => {
  const before = counter(await scrape(), 'veneer_nodewatcher_nodes_labeled_total', {});
  const dry = await core.createNode({
    body: {
      metadata: {
        name: 'dry-1',
        labels: {
          'karpenter.sh/nodepool': 'default',
          'karpenter.sh/capacity-type': 'on-demand',
          'karpenter.sh/registered': 'true',
          'node.kubernetes.io/instance-type': 'm5.xlarge',
        },
      },
    },
    dryRun: 'All',
  });
  t.equal(labelsOf(dry)['veneer.io/overlay-influenced'], 'true');
  const text = await scrape();
  t.equal(counter(text, 'veneer_nodewatcher_nodes_labeled_total', {}), before);
  t.ok(counter(text, 'veneer_nodewatcher_admission_requests_total', { outcome: 'patched', dry_run: 'true' }) >= 1);
});

t.test(
  'a review forged to the webhook port gets its answer and counts no record: only what was written counts',
  async (t) => {
    const labeled = async () => counter(await scrape(), 'veneer_nodewatcher_nodes_labeled_total', {});
    const before = await labeled();
    const forged = (uid: string) =>
      nodeReview(uid, {
        name: `forged-${uid}`,
        labels: {
          'karpenter.sh/nodepool': 'default',
          'karpenter.sh/capacity-type': 'on-demand',
          'karpenter.sh/registered': 'true',
          'node.kubernetes.io/instance-type': 'm5.xlarge',
        },
      });
    for (let i = 0; i < 20; i++) {
      const answer = await post('/mutate-node', forged(`f${i}`));
      t.ok(JSON.parse(answer.body).response.patch, `forged ${i}: answered with a patch, as the apiserver would be`);
    }
    t.equal(await labeled(), before, 'nodes_labeled_total: nothing was written, nothing counted');
    await sim.createNodeClaim({ name: 'ip-10-0-0-77', claimName: 'default-counted', instanceType: 'm5.xlarge' });
    for (let i = 0; !watcher.caches!.nodeClaims.byName('default-counted') && i < 100; i++)
      await new Promise((r) => setTimeout(r, 50));
    await sim.kubeletCreate({ name: 'ip-10-0-0-77' });
    await until('the record written counted', async () => (await labeled()) === before + 1);
    t.ok(
      counter(await scrape(), 'veneer_nodewatcher_nodes_labeled_total', { source: 'webhook' }) >= 1,
      'counted by the path its story names',
    );
  },
);

t.test("a record a node carries at CREATE is replaced by the watcher's; an opted-out node gets none", async (t) => {
  // As a NodePool's template labels, or a kubelet's --node-labels, would bring them.
  await sim.createNodeClaim({ name: 'ip-10-0-0-8', claimName: 'default-aaaa8', instanceType: 'm5.xlarge' });
  for (let i = 0; !watcher.caches!.nodeClaims.byName('default-aaaa8') && i < 100; i++)
    await new Promise((r) => setTimeout(r, 50));
  const forged = await sim.kubeletCreate({
    name: 'ip-10-0-0-8',
    extraLabels: {
      'veneer.io/overlay-influenced': 'false',
      'veneer.io/overlay-effect': 'none',
      'veneer.io/made-up': 'x',
    },
  });
  t.match(labelsOf(forged), {
    'veneer.io/overlay-influenced': 'true',
    'veneer.io/matching-overlay': 'cost-aware-ri-m5.xlarge-us-west-2',
  });
  t.notOk('veneer.io/made-up' in labelsOf(forged), "a key of the watcher's namespace it did not write is gone");
  t.match(JSON.parse(forged.metadata?.annotations?.['veneer.io/overlay-decision'] ?? '{}'), { decidedBy: 'webhook' });

  const out = await sim.launch({
    name: 'ip-10-0-0-9',
    instanceType: 'm5.xlarge',
    extraLabels: { 'veneer.io/opt-out': 'true' },
  });
  t.notOk('veneer.io/overlay-influenced' in labelsOf(out.registered), 'opted out: no record at CREATE or registration');
  await new Promise((r) => setTimeout(r, 3000));
  t.notOk(
    'veneer.io/overlay-influenced' in labelsOf(await core.readNode({ name: 'ip-10-0-0-9' })),
    'nor from the reconciler',
  );
});

t.test('a kubelet re-registration gets AlreadyExists as usual, and no second patch', async (t) => {
  const err = await sim.kubeletCreate({ name: 'ip-10-0-0-1' }).then(
    () => undefined,
    (e: { code?: number }) => e,
  );
  t.equal(err?.code, 409);
  t.ok(
    counter(await scrape(), 'veneer_nodewatcher_admission_requests_total', { webhook: 'mutate', outcome: 'exists' }) >=
      1,
  );
  const stored = await core.readNode({ name: 'ip-10-0-0-1' });
  t.equal(
    labelsOf(stored)['veneer.io/matching-overlay'],
    'cost-aware-ri-m5.xlarge-us-west-2',
    'the record is unchanged',
  );
});

t.test('hostile input: 400 for anything that is not an AdmissionReview, 413 when too large', async (t) => {
  {
    const path = '/mutate-node';
    const notJson = await post(path, '{"apiVersion":');
    t.equal(notJson.status, 400);
    t.match(JSON.parse(notJson.body), { message: /JSON/ });
    const wrong = await post(
      path,
      JSON.stringify({
        apiVersion: 'admission.k8s.io/v1',
        kind: 'AdmissionReview',
        request: { kind: { group: '', version: 'v1', kind: 'Node' }, operation: 'CREATE', object: {} },
      }),
    );
    t.equal(wrong.status, 400);
    t.match(JSON.parse(wrong.body).message, /request must have uid/);
    const text = await post(path, 'hello', 'text/plain');
    t.equal(text.status, 400);
    const huge = await post(path, Buffer.alloc(8 * 1024 * 1024, 0x20));
    t.equal(huge.status, 413);
  }
  t.equal((await post('/validate-node', '{}')).status, 404, 'the record is guarded by a policy, not by a webhook');
  const ok = await post(
    '/mutate-node',
    JSON.stringify({
      apiVersion: 'admission.k8s.io/v1',
      kind: 'AdmissionReview',
      request: { uid: 'u-1', kind: { group: '', version: 'v1', kind: 'Pod' }, operation: 'CREATE', object: {} },
    }),
  );
  t.same(
    JSON.parse(ok.body),
    { apiVersion: 'admission.k8s.io/v1', kind: 'AdmissionReview', response: { uid: 'u-1', allowed: true } },
    'other kinds: allowed, uid echoed',
  );
  const odd = await post(
    '/mutate-node',
    JSON.stringify({
      apiVersion: 'admission.k8s.io/v1',
      kind: 'AdmissionReview',
      request: { uid: 'u-2', kind: { group: '', version: 'v1', kind: 'Node' }, operation: 'X'.repeat(200), object: {} },
    }),
  );
  t.equal(JSON.parse(odd.body).response.allowed, true);
  const text = await scrape();
  t.notMatch(text, /XXXX/, 'a made-up operation never becomes a label value');
  t.ok(counter(text, 'veneer_nodewatcher_admission_requests_total', { operation: 'other' }) >= 1);
  t.ok(
    counter(await scrape(), 'veneer_nodewatcher_admission_requests_total', { outcome: 'invalid' }) >= 3,
    'rejections are counted',
  );
});

function peerFingerprint(): Promise<string> {
  return new Promise((resolve, reject) => {
    const s = connect({ host: '127.0.0.1', port: watcher.webhookPort!, ca: env.certs.caPem }, () => {
      resolve(s.getPeerCertificate().fingerprint256);
      s.end();
    });
    s.on('error', reject);
  });
}

t.test('a rotated certificate is served to new connections without a restart', async (t) => {
  const before = await peerFingerprint();
  const expiryBefore = counter(await scrape(), 'veneer_nodewatcher_cert_expiry_timestamp_seconds', {});
  const next = await issueCert(env.certs.ca, join(env.cp.dir, 'rotated'), 'webhook', {
    commonName: 'veneer-node-watcher',
    usage: 'server',
    ipAddresses: ['127.0.0.1'],
    days: 30,
  });
  // Key first, then certificate: in between the pair does not match and must not be used.
  writeFileAtomic(env.certs.serving.keyPath, readFileSync(next.keyPath, 'utf8'));
  writeFileAtomic(env.certs.serving.certPath, readFileSync(next.certPath, 'utf8'));
  let after = before;
  for (let i = 0; i < 50 && after === before; i++) {
    await new Promise((r) => setTimeout(r, 100));
    after = await peerFingerprint();
  }
  t.not(after, before, 'new connections get the new certificate');
  const expiryAfter = counter(await scrape(), 'veneer_nodewatcher_cert_expiry_timestamp_seconds', {});
  t.ok(expiryAfter < expiryBefore, 'the expiry gauge follows (30 days instead of 365)');
  const created = await sim.launch({ name: 'after-rotation', instanceType: 'm5.xlarge' });
  t.equal(
    labelsOf(created.registered)['veneer.io/overlay-influenced'],
    'true',
    'the apiserver still reaches the webhook',
  );
});

t.test('TLS 1.2 is the minimum', async (t) => {
  t.equal(await tlsHandshake(watcher.webhookPort!, env.certs.caPem, 'TLSv1.2'), 'TLSv1.2');
  t.match(await tlsHandshake(watcher.webhookPort!, env.certs.caPem, 'TLSv1.1'), /^refused/);
});

t.test('the exposition passes promtool and carries the contracted names', async (t) => {
  const text = await scrape();
  for (const name of [
    'nodes_labeled_total',
    'labeling_errors_total',
    'nodes_influenced_current',
    'cache_refresh_total',
    'reconcile_duration_seconds',
    'admission_requests_total',
    'admission_duration_seconds',
    'admission_in_flight',
    'cert_expiry_timestamp_seconds',
    'karpenter_provider_nodeclaims',
  ]) {
    t.match(text, new RegExp(`^# TYPE veneer_nodewatcher_${name} `, 'm'), name);
  }
  const expected = new Map<string, number>();
  for (const n of (await core.listNode()).items) {
    const l = labelsOf(n);
    if (l['veneer.io/overlay-influenced'] === 'true')
      expected.set(
        l['veneer.io/capacity-type'] ?? 'unknown',
        (expected.get(l['veneer.io/capacity-type'] ?? 'unknown') ?? 0) + 1,
      );
  }
  t.ok(expected.size >= 2, 'several capacity types are influenced');
  for (const [capacityType, count] of expected) {
    t.equal(
      counter(text, 'veneer_nodewatcher_nodes_influenced_current', { capacity_type: capacityType }),
      count,
      `nodes_influenced_current{capacity_type="${capacityType}"} matches the cluster`,
    );
  }
  t.equal(
    counter(text, 'veneer_nodewatcher_overlays', { state: 'counted' }),
    2,
    'the two overlays left, validated as Karpenter does, count',
  );
  t.equal(counter(text, 'veneer_nodewatcher_overlays', { state: 'unvalidated' }), 0, 'every state has a series');
  t.equal(
    counter(text, 'veneer_nodewatcher_nodeoverlays_seen', { selected: 'true' }),
    2,
    "every NodeOverlay seen: the two left are Veneer's, selected",
  );
  t.match(
    text,
    /^veneer_nodewatcher_nodeoverlays_seen\{selected="false"\} 0$/m,
    'no other NodeOverlay: the series is there at 0',
  );
  const claims = (await custom.listClusterCustomObject({
    group: 'karpenter.sh',
    version: 'v1',
    plural: 'nodeclaims',
  })) as { items: unknown[] };
  t.ok(claims.items.length > 0);
  t.equal(
    counter(text, 'veneer_nodewatcher_karpenter_provider_nodeclaims', { provider: 'aws', matches_setting: 'true' }),
    claims.items.length,
    'the NodeClaims name karpenter.k8s.aws: aws, as auto finds it',
  );
  t.equal(
    counter(text, 'veneer_nodewatcher_karpenter_provider_nodeclaims', {
      provider: 'unknown',
      matches_setting: 'false',
    }),
    0,
    'every provider has a series',
  );
  t.notMatch(text, /ip-10-0-0/, 'no node names in metrics');
  const check = promtool(['check', 'metrics'], text);
  t.equal(check.status, 0, check.stderr);
  t.equal(check.stdout.trim(), '', 'promtool has nothing to say');
});

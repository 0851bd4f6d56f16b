// The node cache against a real apiserver: every node by its metadata, undecided on-demand
// Karpenter nodes whole, and the moves between the two as records come and go; status
// heartbeats are skipped without decoding the node.
import t from 'tap';
import * as k8s from '@kubernetes/client-node';
import { recordKeys } from '../../src/engine/record.ts';
import { createLogger } from '../../src/log.ts';
import { createMetrics } from '../../src/metrics.ts';
import { crc32 } from 'node:zlib';
import { FINGERPRINT_TRUST_MS, LabelSkipper, NodeCache } from '../../src/state/node-cache.ts';
import { clientFor, ControlPlane } from '../../kit/control-plane.ts';
import { until } from '../../kit/fleet.ts';
import { heartbeatPatch, realNode } from '../../kit/real-node.ts';

const INFLUENCED = 'veneer.io/overlay-influenced';

t.test('a metadata event is skipped only when its labels are the bytes last decoded for that node', async (t) => {
  const line = (type: string, labels: string, rest = '', name = 'n1') =>
    Buffer.from(
      `{"type":"${type}","object":{"kind":"PartialObjectMetadata","apiVersion":"meta.k8s.io/v1","metadata":{"name":"${name}","uid":"u","resourceVersion":"42","creationTimestamp":"2026-11-30T00:00:00Z",${labels}${rest}"managedFields":[{"manager":"kubelet","fieldsV1":{"f:metadata":{"f:labels":{"f:a":{}}}}}]}}}`,
    );
  const skipper = new LabelSkipper();
  const decoded = (type: string, labels: string, rest = '', name = 'n1') =>
    skipper.parse(line(type, labels, rest, name)).object !== undefined;
  const ab = '"labels":{"a":"1","b":"2"},';
  t.ok(decoded('ADDED', ab), 'a new node is decoded');
  t.same(
    skipper.parse(line('MODIFIED', ab, '"annotations":{"x":"{\\"labels\\":{}}"},')),
    { type: 'MODIFIED', resourceVersion: '42' },
    'same labels: skipped, and the watch still advances',
  );
  t.ok(decoded('MODIFIED', '"labels":{"a":"1","b":"3"},'), 'a changed value is decoded');
  t.notOk(decoded('MODIFIED', '"labels":{"a":"1","b":"3"},'), 'and is what is skipped from then on');
  t.ok(decoded('MODIFIED', '"labels":{"a":"1","b":"3","c":"4"},'), 'an added label');
  t.ok(decoded('MODIFIED', ''), 'no labels at all');
  t.ok(
    decoded('MODIFIED', '"labels":{"a":"1","b":"3","c":"4"},'),
    'labels that come back after an event without any are decoded',
  );
  t.ok(
    decoded('MODIFIED', '"annotations":{"k":"v"},"labels":{"a":"1","b":"3","c":"4"},'),
    'labels not where Go puts them',
  );
  t.ok(decoded('MODIFIED', ab, '', 'n2'), 'another node');
  t.ok(decoded('DELETED', ab, '', 'n2'), 'a deletion is decoded');
  t.ok(decoded('MODIFIED', ab, '', 'n2'), 'and forgets the node');
  t.notOk(decoded('MODIFIED', ab, '', 'n2'));
  skipper.forget();
  t.ok(decoded('MODIFIED', ab, '', 'n2'), 'after a relist every node is decoded once again');
});

t.test('labels that collide on purpose are seen once the fingerprints are due', async (t) => {
  const line = (labels: string) =>
    Buffer.from(
      `{"type":"MODIFIED","object":{"kind":"PartialObjectMetadata","apiVersion":"meta.k8s.io/v1","metadata":{"name":"n1","uid":"u","resourceVersion":"42","creationTimestamp":"2026-11-30T00:00:00Z","labels":${labels},"managedFields":[]}}}`,
    );
  // Two label sets of one length and one CRC-32, found by a birthday search over values drawn
  // from a fixed xorshift sequence (so always the same pair, found in about 100,000 draws).
  const byCrc = new Map<number, string>();
  let pair: [string, string] | undefined;
  let x = 0x9e3779b9;
  const draw = () => {
    x ^= x << 13;
    x ^= x >>> 17;
    x ^= x << 5;
    return (x >>> 0) % 36;
  };
  while (!pair) {
    const value = Array.from({ length: 12 }, () => draw().toString(36)).join('');
    const labels = `{"team":"${value}"}`;
    const crc = crc32(labels);
    const before = byCrc.get(crc);
    if (before) pair = [before, labels];
    else byCrc.set(crc, labels);
  }
  let clock = 0;
  const skipper = new LabelSkipper(() => clock);
  const decoded = (labels: string) => skipper.parse(line(labels)).object !== undefined;
  t.ok(decoded(pair[0]));
  t.notOk(decoded(pair[1]), `${pair[1]} passes for ${pair[0]} while the fingerprint is trusted`);
  clock += FINGERPRINT_TRUST_MS - 1;
  t.notOk(decoded(pair[1]), 'up to the end of the period');
  clock += 1;
  t.ok(decoded(pair[1]), 'then the next event of the node is decoded');
  t.notOk(decoded(pair[1]), 'and known from then on');
  t.ok(decoded('{"team":"other"}'), 'a change of length is never mistaken');
});

t.test('against the apiserver: heartbeats skipped, records move nodes out of the full view and back', async (t) => {
  const cp = await ControlPlane.start();
  t.teardown(() => cp.stop());
  const kc = cp.adminKubeConfig();
  const core = kc.makeApiClient(k8s.CoreV1Api);
  const metrics = createMetrics();
  const client = clientFor(kc);
  t.teardown(() => client.close());
  const cache = new NodeCache({ client, metrics, log: createLogger('silent'), now: Date.now }, recordKeys('veneer.io'));
  const moves: string[] = [];
  cache.subscribe((node, kind) => moves.push(`${kind} ${node.name}`));
  await core.createNode({ body: realNode({ name: 'before-start', index: 1 }) });
  cache.all.start();
  cache.undecided.start();
  t.teardown(() => Promise.all([cache.all.stop(), cache.undecided.stop()]));
  await Promise.all([cache.all.synced, cache.undecided.synced]);
  t.ok(cache.undecided.store.has('before-start'), 'listed: an undecided node is in the full view');
  t.match(
    cache.undecidedNode('before-start'),
    { resourceVersion: /^\d+$/ },
    'with the resourceVersion a write is guarded by',
  );

  await core.createNode({ body: realNode({ name: 'od', index: 2 }) });
  await core.createNode({ body: realNode({ name: 'spot', index: 3, capacityType: 'spot' }) });
  const plain = realNode({ name: 'not-karpenter', index: 4 });
  delete plain.metadata?.labels?.['karpenter.sh/nodepool'];
  await core.createNode({ body: plain });
  await until('all four nodes known', () => cache.all.store.size === 4);
  t.match(
    cache.get('od'),
    { name: 'od', providerID: /^aws:\/\/\// },
    'whole while undecided: its providerID links it to its NodeClaim',
  );
  t.notOk(cache.all.store.get('od')?.providerID, 'the metadata view has no spec');
  t.same(
    [...cache.undecidedNodes()].map((n) => n.name).sort(),
    ['before-start', 'od'],
    'spot and non-Karpenter nodes are never in the full view',
  );

  const events = async (resource: string, handling: string) =>
    (await metrics.watchEvents.get()).values.find(
      (v) => v.labels.resource === resource && v.labels.handling === handling,
    )?.value ?? 0;
  const strategic = k8s.setHeaderOptions('Content-Type', k8s.PatchStrategy.StrategicMergePatch);
  const merge = k8s.setHeaderOptions('Content-Type', k8s.PatchStrategy.MergePatch);
  const skippedBefore = await events('nodes', 'skipped');
  const appliedBefore = await events('nodes', 'applied');
  await core.patchNodeStatus(
    { name: 'before-start', body: heartbeatPatch(new Date(Date.now() + 1000).toISOString()) },
    strategic,
  );
  if (cache.all.listsByStreaming) {
    await until(
      'the heartbeat of a listed node seen',
      async () => (await events('nodes', 'skipped')) - skippedBefore === 1,
    );
    t.pass('a node the streaming list brought is skipped at its first heartbeat: the list taught its labels');
  } else {
    // An apiserver without streaming lists (1.30, 1.31, 1.33 by default): the pages taught no
    // fingerprint, so that first heartbeat is decoded once, and the next is skipped.
    await until(
      'the heartbeat of a listed node decoded',
      async () => (await events('nodes', 'applied')) > appliedBefore,
    );
    await core.patchNodeStatus(
      { name: 'before-start', body: heartbeatPatch(new Date(Date.now() + 2000).toISOString()) },
      strategic,
    );
    await until(
      'the second heartbeat of a listed node skipped',
      async () => (await events('nodes', 'skipped')) - skippedBefore === 1,
    );
    t.pass('listed in pages: its first heartbeat decoded, the next skipped');
  }
  // Kubernetes keeps whole seconds: each heartbeat is a second later, or it changes nothing.
  for (let i = 0; i < 5; i++)
    await core.patchNodeStatus(
      { name: 'spot', body: heartbeatPatch(new Date(Date.now() + (i + 1) * 1000).toISOString()) },
      strategic,
    );
  await until('five heartbeats seen', async () => (await events('nodes', 'skipped')) - skippedBefore === 6);
  t.pass('five status heartbeats of a node: five events skipped without decoding');

  const told: Record<string, string>[] = [];
  cache.onMetadata((node) => node.name === 'od' && told.push(node.labels));
  await core.patchNode({ name: 'od', body: { metadata: { labels: { team: 'payments' } } } }, merge);
  await until('a label change told', () => told.some((l) => l.team === 'payments'));
  t.match(told.at(-1), { team: 'payments', 'kubernetes.io/os': 'linux' }, 'its listeners see every label of the node');
  const kept = cache.all.store.get('od')?.labels ?? {};
  t.notOk('team' in kept || 'kubernetes.io/os' in kept, 'the store keeps only what a decided node is read for');
  t.equal(kept['node.kubernetes.io/instance-type'], 'm5.xlarge', 'its instance type among them');
  await core.patchNode({ name: 'od', body: { metadata: { labels: { [INFLUENCED]: 'true' } } } }, merge);
  await until('the recorded node leaves the full view', () => !cache.undecided.store.has('od'));
  // The two views are two watch streams: either may hear of the record first.
  await until('the metadata view hears of the record', () => cache.all.store.get('od')?.labels[INFLUENCED] === 'true');
  t.equal(cache.get('od')?.labels[INFLUENCED], 'true', 'and stays known by its metadata');
  t.equal(cache.undecidedNode('od'), undefined, 'but is no node to write a record for');
  t.equal(
    cache.all.store.get('od')?.resourceVersion,
    undefined,
    'the metadata view has no resourceVersion to guard one',
  );
  t.notOk(cache.undecided.store.has('od'), 'from the metadata view alone');
  await core.patchNode({ name: 'od', body: { metadata: { labels: { [INFLUENCED]: null } } } }, merge);
  await until('a removed record brings it back', () => cache.undecided.store.has('od'));
  t.same(
    moves.filter((m) => m.endsWith(' od')),
    ['upsert od', 'upsert od', 'remove od', 'upsert od'],
    'the reconciler hears every move',
  );

  await core.deleteNode({ name: 'od' });
  await until('a deleted node is gone from both views', () => !cache.get('od'));
});

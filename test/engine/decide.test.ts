import t from 'tap';
import { decide, jsonPatch, mergePatch, toNodeClaimView, toNodeView } from '../../src/engine/index.ts';
import type { Decision } from '../../src/engine/decide.ts';
import { buildRecord, type DecisionStory } from '../../src/engine/record.ts';
import {
  computeSavingsPlan,
  ec2InstanceSavingsPlan,
  karpenterNode,
  nodeClaimFor,
  reservedInstance,
} from '../../kit/veneer.ts';
import { indexWith, iso, settings, T0, withStatus } from './fixtures.ts';

const veneerSet = () => [
  computeSavingsPlan(),
  ec2InstanceSavingsPlan('m5', 'us-west-2'),
  reservedInstance('m5.xlarge', 'us-west-2'),
];

function decideNode(
  node: ReturnType<typeof karpenterNode>,
  index = indexWith(veneerSet()),
  now = T0 + 5_000,
  claim?: ReturnType<typeof nodeClaimFor>,
): Decision {
  return decide(
    { node: toNodeView(node), nodeClaim: claim ? toNodeClaimView(claim) : undefined, now, decidedBy: 'reconciler' },
    index,
    settings,
  );
}

const keys = settings.keys;
const index = indexWith(veneerSet());

const overlayOf = (d: Decision) => (d.outcome === 'influenced' ? d.overlay?.name : d.outcome);

t.test('scope: only on-demand Karpenter nodes without a record', async (t) => {
  const plain = karpenterNode({ name: 'n', createdAt: iso(T0) });
  delete plain.metadata?.labels?.['karpenter.sh/nodepool'];
  t.match(decideNode(plain), { outcome: 'out-of-scope', reason: /not a Karpenter node/ });
  t.match(decideNode(karpenterNode({ name: 'n', capacityType: 'spot', createdAt: iso(T0) })), {
    outcome: 'out-of-scope',
    reason: /"spot", not on-demand/,
  });
  const unknown = karpenterNode({ name: 'n', createdAt: iso(T0) });
  delete unknown.metadata?.labels?.['karpenter.sh/capacity-type'];
  t.match(decideNode(unknown), { outcome: 'out-of-scope', reason: /unknown, not on-demand/ });
  const recorded = karpenterNode({
    name: 'n',
    createdAt: iso(T0),
    extraLabels: { 'veneer.io/overlay-influenced': 'false' },
  });
  t.same(decideNode(recorded), { outcome: 'recorded' }, 'a record is never decided again');
});

t.test('precedence: RI (30) > EC2 SP (20) > Compute SP (10); equal weight goes to the later name', async (t) => {
  t.equal(
    overlayOf(decideNode(karpenterNode({ name: 'a', instanceType: 'm5.xlarge', createdAt: iso(T0) }))),
    'cost-aware-ri-m5.xlarge-us-west-2',
  );
  t.equal(
    overlayOf(decideNode(karpenterNode({ name: 'b', instanceType: 'm5.2xlarge', createdAt: iso(T0) }))),
    'cost-aware-ec2-sp-m5-us-west-2',
  );
  t.equal(
    overlayOf(decideNode(karpenterNode({ name: 'c', instanceType: 'c6i.large', createdAt: iso(T0) }))),
    'cost-aware-compute-sp-global',
  );
  const tie = indexWith([
    ec2InstanceSavingsPlan('m5', 'us-east-1'),
    ec2InstanceSavingsPlan('m5', 'us-west-2'),
    ec2InstanceSavingsPlan('m5', 'eu-west-1'),
  ]);
  t.equal(
    overlayOf(decideNode(karpenterNode({ name: 'd', instanceType: 'm5.large', createdAt: iso(T0) }), tie)),
    'cost-aware-ec2-sp-m5-us-west-2',
    'reverse alphabetical: the later name wins',
  );
});

t.test('overlays Karpenter rejected, capacity-only overlays and unselected overlays never count', async (t) => {
  const node = karpenterNode({ name: 'a', instanceType: 'm5.xlarge', createdAt: iso(T0) });
  const conflict = withStatus(reservedInstance('m5.xlarge', 'us-west-2'), [
    { type: 'ValidationSucceeded', status: 'False', reason: 'Conflict' },
    { type: 'Ready', status: 'False', reason: 'Conflict' },
  ]);
  t.equal(
    overlayOf(decideNode(node, indexWith([computeSavingsPlan(), conflict]))),
    'cost-aware-compute-sp-global',
    'Conflict',
  );
  const notReady = withStatus(reservedInstance('m5.xlarge', 'us-west-2'), [
    { type: 'Ready', status: 'False', reason: 'RuntimeValidation' },
  ]);
  t.equal(
    overlayOf(decideNode(node, indexWith([computeSavingsPlan(), notReady]))),
    'cost-aware-compute-sp-global',
    'Ready=False',
  );
  t.equal(
    overlayOf(decideNode(node, indexWith([reservedInstance('m5.xlarge', 'us-west-2')]))),
    'cost-aware-ri-m5.xlarge-us-west-2',
    'no status yet counts',
  );
  t.equal(
    overlayOf(
      decideNode(
        node,
        indexWith([reservedInstance('m5.xlarge', 'us-west-2')], undefined, { requireOverlayReady: true }),
      ),
    ),
    'not-influenced',
    'requireOverlayReady: no status does not count',
  );
  const ready = withStatus(reservedInstance('m5.xlarge', 'us-west-2'), [
    { type: 'ValidationSucceeded', status: 'True' },
    { type: 'Ready', status: 'True' },
  ]);
  t.equal(
    overlayOf(decideNode(node, indexWith([ready], undefined, { requireOverlayReady: true }))),
    'cost-aware-ri-m5.xlarge-us-west-2',
    'requireOverlayReady: Ready=True counts',
  );

  const capacityOnly = reservedInstance('m5.xlarge', 'us-west-2');
  delete capacityOnly.spec?.price;
  capacityOnly.spec = { ...capacityOnly.spec, capacity: { 'example.com/gpu': '1' } };
  t.equal(overlayOf(decideNode(node, indexWith([capacityOnly]))), 'not-influenced', 'capacity-only');
  const adjusted = reservedInstance('m5.xlarge', 'us-west-2');
  adjusted.spec = { ...adjusted.spec, price: null, priceAdjustment: '-30%' };
  t.equal(
    overlayOf(decideNode(node, indexWith([adjusted]))),
    'cost-aware-ri-m5.xlarge-us-west-2',
    'priceAdjustment counts',
  );
  const foreign = reservedInstance('m5.xlarge', 'us-west-2');
  foreign.metadata = { ...foreign.metadata, labels: { team: 'other' } };
  t.equal(overlayOf(decideNode(node, indexWith([foreign]))), 'not-influenced', 'outside the selector');
});

t.test("the NodeClaim's labels are laid over the node's, and make the node decidable at CREATE", async (t) => {
  const kubelet = karpenterNode({ name: 'a', stage: 'kubelet', createdAt: iso(T0) });
  const claim = nodeClaimFor({
    name: 'a',
    claimName: 'default-x1',
    instanceType: 'm5.xlarge',
    claimCreatedAt: iso(T0 - 30_000),
  });
  const d = decideNode(kubelet, undefined, T0 + 1, claim);
  t.equal(overlayOf(d), 'cost-aware-ri-m5.xlarge-us-west-2');
  if (d.outcome !== 'influenced') throw new Error('expected influenced');
  t.equal(d.evaluatedAt, T0 - 30_000, "evaluated at the NodeClaim's creation: the launch decision");
  const story = JSON.parse(d.record.annotations['veneer.io/overlay-decision'] ?? '') as DecisionStory;
  t.equal(story.characteristicsFrom, 'node+nodeclaim');
  t.equal(story.nodeClaim, 'default-x1');
});

t.test('when to decide', async (t) => {
  const kubelet = karpenterNode({ name: 'a', stage: 'kubelet', createdAt: iso(T0) });
  const early = decideNode(kubelet, undefined, T0 + 1_000);
  t.match(early, { outcome: 'undetermined', reason: /not yet on the node/, retryAt: T0 + 60_000 });
  t.equal(
    overlayOf(decideNode(kubelet, undefined, T0 + 60_000)),
    'not-influenced',
    'after the grace period: decided with what is there',
  );
  const registered = karpenterNode({
    name: 'b',
    stage: 'kubelet',
    createdAt: iso(T0),
    extraLabels: { 'karpenter.sh/registered': 'true' },
  });
  t.equal(
    overlayOf(decideNode(registered, undefined, T0 + 1)),
    'not-influenced',
    'registered=true: the labels are final',
  );
  const complete = karpenterNode({
    name: 'c',
    stage: 'kubelet',
    createdAt: iso(T0),
    extraLabels: { 'karpenter.k8s.aws/instance-family': 'c6i', 'node.kubernetes.io/instance-type': 'c6i.large' },
  });
  t.equal(
    overlayOf(decideNode(complete, undefined, T0 + 1)),
    'cost-aware-compute-sp-global',
    'every key the overlays name is present',
  );
  const noCreation = karpenterNode({ name: 'd', stage: 'kubelet' });
  t.match(
    decideNode(noCreation, undefined, T0),
    { outcome: 'undetermined', retryAt: T0 + 60_000 },
    'CREATE has no creationTimestamp yet: now is its creation',
  );
});

t.test('the record: labels, values and the annotation', async (t) => {
  const d = decideNode(
    karpenterNode({ name: 'a', instanceType: 'm5.xlarge', createdAt: iso(T0) }),
    undefined,
    Date.parse('2026-01-12T15:30:00.250Z'),
  );
  if (d.outcome !== 'influenced') throw new Error('expected influenced');
  t.same(d.record.labels, {
    'veneer.io/overlay-influenced': 'true',
    'veneer.io/matching-overlay': 'cost-aware-ri-m5.xlarge-us-west-2',
    'veneer.io/capacity-type': 'reserved-instance',
    'veneer.io/instance-family': 'm5',
    'veneer.io/instance-type': 'm5.xlarge',
    'veneer.io/region': 'us-west-2',
    // Without its NodeClaim the launch cannot be replayed: what the overlay changed is unknown.
    'veneer.io/overlay-effect': 'unknown',
    'veneer.io/labeled-at': '20260112T153000Z',
  });
  t.same(JSON.parse(d.record.annotations['veneer.io/overlay-decision'] ?? ''), {
    influenced: true,
    overlay: 'cost-aware-ri-m5.xlarge-us-west-2',
    weight: 30,
    price: '0.00',
    decidedBy: 'reconciler',
    evaluatedAt: '2026-01-12T15:00:00Z',
    labeledAt: '2026-01-12T15:30:00Z',
    basis: 'exact',
    characteristicsFrom: 'node',
    provider: 'aws',
    providerFrom: 'setting',
    effect: { verdict: 'unknown', reasonCode: 'no-nodeclaim', reason: "the node's NodeClaim is not known" },
    labels: Object.keys(d.record.labels),
  });
  const none = decideNode(karpenterNode({ name: 'b', instanceType: 'm5.xlarge', createdAt: iso(T0) }), indexWith([]));
  if (none.outcome !== 'not-influenced') throw new Error('expected not-influenced');
  t.same(Object.keys(none.record.labels), [
    'veneer.io/overlay-influenced',
    'veneer.io/overlay-effect',
    'veneer.io/labeled-at',
  ]);
  t.equal(none.record.labels['veneer.io/overlay-influenced'], 'false');
});

t.test('another label namespace and a 253-character overlay name', async (t) => {
  const long = reservedInstance('m5.xlarge', 'us-west-2');
  long.metadata = { ...long.metadata, name: `cost-aware-ri-${'m5.xlarge-'.repeat(23)}end` };
  const d = decide(
    {
      node: toNodeView(karpenterNode({ name: 'a', instanceType: 'm5.xlarge', createdAt: iso(T0) })),
      now: T0,
      decidedBy: 'webhook',
    },
    indexWith([long]),
    { ...settings, keys: (await import('../../src/engine/index.ts')).recordKeys('example.com') },
  );
  if (d.outcome !== 'influenced') throw new Error('expected influenced');
  const value = d.record.labels['example.com/matching-overlay'] ?? '';
  t.equal(value.length, 63);
  t.match(value, /^cost-aware-ri-m5\.xlarge-.*-[0-9a-f]{10}$/);
  t.ok(
    d.record.annotations['example.com/overlay-decision']?.includes(long.metadata.name ?? '?'),
    'the full name is in the annotation',
  );
});

t.test('patches: JSON Patch for admission, merge patch for the reconciler', async (t) => {
  const node = karpenterNode({ name: 'a', instanceType: 'm5.xlarge', createdAt: iso(T0) });
  const d = decideNode(node);
  if (d.outcome !== 'influenced') throw new Error('expected influenced');
  const ops = jsonPatch(d.record, node.metadata ?? {}, keys);
  t.ok(
    ops.every((o) => o.op === 'add'),
    'only add operations',
  );
  t.same(ops[0], { op: 'add', path: '/metadata/labels/veneer.io~1overlay-influenced', value: 'true' });
  t.same(
    ops.at(-1),
    { op: 'add', path: '/metadata/annotations', value: d.record.annotations },
    'a missing annotations map is created whole',
  );
  const bare = jsonPatch(d.record, {}, keys);
  t.same(
    bare.map((o) => o.path),
    ['/metadata/labels', '/metadata/annotations'],
  );
  t.same(mergePatch(d.record, '42'), {
    metadata: { labels: d.record.labels, annotations: d.record.annotations, resourceVersion: '42' },
  });
});

t.test('a record the node carries at CREATE is no record: the decision replaces it, keys and story', async (t) => {
  // As a NodePool's template labels or a kubelet's --node-labels would put it there.
  const node = karpenterNode({ name: 'a', instanceType: 'm5.xlarge', createdAt: iso(T0) });
  const forged = {
    ...node,
    metadata: {
      ...node.metadata,
      labels: {
        ...node.metadata?.labels,
        'veneer.io/overlay-influenced': 'false',
        'veneer.io/matching-overlay': 'made-up',
        'veneer.io/team': 'x',
        'veneer.io/opt-out': 'no',
      },
      annotations: { 'veneer.io/overlay-decision': '{"influenced":false}', other: 'kept' },
    },
  };
  t.same(decideNode(forged), { outcome: 'recorded' }, 'on an update it is final');
  const d = decide(
    { node: toNodeView(forged), now: T0 + 5_000, decidedBy: 'webhook', atCreate: true },
    index,
    settings,
  );
  if (d.outcome !== 'influenced') throw new Error(`expected influenced, got ${d.outcome}`);
  const ops = jsonPatch(d.record, forged.metadata, keys);
  const by = (path: string) => ops.filter((o) => o.path === path).map((o) => o.op);
  t.same(by('/metadata/labels/veneer.io~1overlay-influenced'), ['replace']);
  t.same(by('/metadata/labels/veneer.io~1team'), ['remove'], "a key of the watcher's namespace it did not write goes");
  t.same(by('/metadata/labels/veneer.io~1opt-out'), [], 'the opt-out label is an input, left as it is');
  t.same(by('/metadata/annotations/veneer.io~1overlay-decision'), ['replace']);
  t.same(by('/metadata/annotations/other'), []);
  t.same(
    ops.filter((o) => o.op === 'add').map((o) => o.path),
    Object.keys(d.record.labels)
      .filter((k) => !(k in (forged.metadata.labels ?? {})))
      .map((k) => `/metadata/labels/${k.replace('/', '~1')}`),
    'the rest is added',
  );
});

t.test('a node opted out by its launcher is never decided', async (t) => {
  const node = karpenterNode({ name: 'a', instanceType: 'm5.xlarge', createdAt: iso(T0) });
  const out = {
    ...node,
    metadata: { ...node.metadata, labels: { ...node.metadata?.labels, 'veneer.io/opt-out': 'true' } },
  };
  t.match(decideNode(out), { outcome: 'out-of-scope', reason: /opted out \(veneer\.io\/opt-out: "true"\)/ });
  t.match(decide({ node: toNodeView(out), now: T0 + 5_000, decidedBy: 'webhook', atCreate: true }, index, settings), {
    outcome: 'out-of-scope',
  });
  const other = {
    ...node,
    metadata: { ...node.metadata, labels: { ...node.metadata?.labels, 'veneer.io/opt-out': 'false' } },
  };
  t.not(decideNode(other).outcome, 'out-of-scope', 'only "true" opts out');
});

t.test('deciding twice yields no second patch', async (t) => {
  const node = karpenterNode({ name: 'a', instanceType: 'm5.xlarge', createdAt: iso(T0) });
  const first = decideNode(node);
  if (first.outcome !== 'influenced') throw new Error('expected influenced');
  const patched = {
    ...node,
    metadata: {
      ...node.metadata,
      labels: { ...node.metadata?.labels, ...first.record.labels },
      annotations: first.record.annotations,
    },
  };
  t.same(decideNode(patched), { outcome: 'recorded' });
});

t.test("the story's list of overlays that priced a candidate: at most 20 named, with the count", async (t) => {
  const overlays = Array.from(
    { length: 300 },
    (_, i) => `cost-aware-ri-${String(i).padStart(3, '0')}-${'x'.repeat(40)}`,
  );
  const record = (names: string[]) =>
    buildRecord({
      keys: settings.keys,
      overlay: undefined,
      decidedBy: 'webhook',
      basis: 'exact',
      evaluatedAt: T0,
      labeledAt: T0,
      characteristicsFrom: 'node',
      effect: { verdict: 'none', overlays: names },
    });
  const story = (names: string[]) =>
    JSON.parse(Object.values(record(names).annotations)[0]!) as DecisionStory & {
      effect: { overlays: string[]; overlaysCount?: number };
    };
  const many = story(overlays);
  t.same(many.effect.overlays, overlays.slice(0, 20), 'the first 20, as the effect lists them');
  t.equal(many.effect.overlaysCount, 300, 'and how many there were');
  t.ok(
    Object.values(record(overlays).annotations)[0]!.length < 4096,
    'the annotation stays small whatever the cluster holds',
  );
  const few = story(overlays.slice(0, 20));
  t.same(few.effect.overlays, overlays.slice(0, 20));
  t.notOk('overlaysCount' in few.effect, 'no count when every one is named');
});

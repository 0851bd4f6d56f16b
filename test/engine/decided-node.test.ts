// A node as a cache keeps it once nothing about it can be decided: the record's labels and the
// well-known keys its readers ask for, of the story who decided and the overlay's terms.
import t from 'tap';
import { decidedNodeLabelKeys, toDecidedNodeView, toldOf } from '../../src/engine/decided-node.ts';
import { recordKeys } from '../../src/engine/record.ts';
import { realNode } from '../../kit/real-node.ts';

const keys = recordKeys('veneer.io');
const kept = decidedNodeLabelKeys(keys);

const story = (o: Record<string, unknown> = {}) =>
  JSON.stringify({
    influenced: true,
    overlay: 'cost-aware-ri-m5.xlarge-us-west-2',
    weight: 30,
    price: '0.00',
    decidedBy: 'webhook',
    basis: 'exact',
    evaluatedAt: '2026-12-06T10:00:00Z',
    labeledAt: '2026-12-06T10:00:00Z',
    characteristicsFrom: 'node+nodeclaim',
    effect: { verdict: 'capacity-type', with: { capacityType: 'on-demand' } },
    labels: ['veneer.io/overlay-influenced'],
    ...o,
  });

function recorded(name: string, index: number) {
  const node = realNode({ name, index });
  Object.assign(node.metadata!.labels!, {
    'veneer.io/overlay-influenced': 'true',
    'veneer.io/matching-overlay': 'cost-aware-ri-m5.xlarge-us-west-2',
    'veneer.io/capacity-type': 'reserved-instance',
    'veneer.io/overlay-effect': 'capacity-type',
    'veneer.io/labeled-at': `20261206T10000${index}Z`,
  });
  node.metadata!.annotations = { ...node.metadata!.annotations, [keys.decisionAnnotation]: story() };
  // What the apiserver adds on create.
  Object.assign(node.metadata!, { uid: `uid-${index}`, creationTimestamp: '2026-12-06T10:00:00Z' });
  return node;
}

t.test(
  'the keys kept: the record, the scope, the instance type, registration, zone and region, and their aliases',
  async (t) => {
    for (const key of keys.ownedLabels) t.ok(kept.includes(key), key);
    for (const key of [
      'karpenter.sh/nodepool',
      'karpenter.sh/capacity-type',
      'node.kubernetes.io/instance-type',
      'beta.kubernetes.io/instance-type',
      'karpenter.sh/registered',
      'topology.kubernetes.io/zone',
      'failure-domain.beta.kubernetes.io/region',
    ])
      t.ok(kept.includes(key), key);
    t.equal(new Set(kept).size, kept.length, 'each once');
  },
);

t.test('a real-size node: only the kept labels, its identity, and what its story tells', async (t) => {
  const node = recorded('ip-10-0-1-1', 1);
  const labelsServed = Object.keys(node.metadata!.labels!).length;
  const view = toDecidedNodeView(node, keys, kept);
  t.ok(labelsServed > 25, `the node carries ${labelsServed} labels`);
  t.same(
    Object.keys(view.labels).sort(),
    Object.keys(view.labels)
      .filter((k) => kept.includes(k))
      .sort(),
  );
  t.match(view.labels, {
    'veneer.io/overlay-influenced': 'true',
    'veneer.io/labeled-at': '20261206T100001Z',
    'karpenter.sh/nodepool': String,
    'node.kubernetes.io/instance-type': 'm5.xlarge',
  });
  t.notOk('kubernetes.io/hostname' in view.labels, 'a label no reader of a decided node asks for');
  t.match(view, { name: 'ip-10-0-1-1', uid: String, createdAt: Number });
  t.same(view.told, {
    overlay: 'cost-aware-ri-m5.xlarge-us-west-2',
    decidedBy: 'webhook',
    basis: 'exact',
    weight: 30,
    price: '0.00',
  });
  t.notOk('story' in view || 'resourceVersion' in view || 'providerID' in view, 'nothing else of the object');
});

t.test('nodes told alike share one story object; unreadable stories are none', async (t) => {
  const a = toDecidedNodeView(recorded('a', 1), keys, kept);
  const b = toDecidedNodeView(recorded('b', 2), keys, kept);
  t.equal(a.told, b.told, 'the same object');
  t.not(toldOf(story({ weight: 20 })), a.told, 'other terms, another');
  t.equal(toldOf('{not json'), undefined);
  t.equal(toldOf(JSON.stringify({ overlay: 'x' })), undefined, 'not a story of ours');
  t.ok(Object.isFrozen(a.told), 'shared, so frozen');
});

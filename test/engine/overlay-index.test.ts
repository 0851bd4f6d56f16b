import fc from 'fast-check';
import t from 'tap';
import { decide, toNodeView, toOverlayView, type OverlayObject } from '../../src/engine/index.ts';
import { computeSavingsPlan, ec2InstanceSavingsPlan, karpenterNode, reservedInstance } from '../../kit/veneer.ts';
import { iso, newIndex, settings, T0, viewOf, withCreation } from './fixtures.ts';

const ri = () => withCreation(reservedInstance('m5.xlarge', 'us-west-2'), T0);
const labelsOf = (type = 'm5.xlarge') => toNodeView(karpenterNode({ name: 'n', instanceType: type })).labels;
const winner = (index: ReturnType<typeof newIndex>, at: number, type?: string) =>
  index.match(viewOf(labelsOf(type)), at).version?.overlay.name;

t.test('history: an overlay counts from its creation until its deletion', async (t) => {
  const index = newIndex();
  index.markSynced(T0 - 60_000);
  index.observe(toOverlayView(ri()), T0 + 50);
  t.equal(winner(index, T0 - 1), undefined, 'not before it was created');
  t.equal(winner(index, T0), 'cost-aware-ri-m5.xlarge-us-west-2', 'from its creationTimestamp');
  index.forget('cost-aware-ri-m5.xlarge-us-west-2', T0 + 10_000);
  t.equal(
    winner(index, T0 + 9_999),
    'cost-aware-ri-m5.xlarge-us-west-2',
    'a node launched before the deletion still matches',
  );
  t.equal(winner(index, T0 + 10_000), undefined, 'not after the deletion');
  t.equal(index.size, 0);
});

t.test('history: a changed overlay is judged by the version active at the time', async (t) => {
  const index = newIndex();
  index.markSynced(T0 - 60_000);
  index.observe(toOverlayView(ri()), T0);
  const moved = ri();
  moved.spec = {
    ...moved.spec,
    requirements: [{ key: 'node.kubernetes.io/instance-type', operator: 'In', values: ['m5.2xlarge'] }],
  };
  index.observe(toOverlayView(moved), T0 + 5_000);
  t.equal(winner(index, T0 + 4_999, 'm5.xlarge'), 'cost-aware-ri-m5.xlarge-us-west-2');
  t.equal(winner(index, T0 + 5_000, 'm5.xlarge'), undefined);
  t.equal(winner(index, T0 + 5_000, 'm5.2xlarge'), 'cost-aware-ri-m5.xlarge-us-west-2');
  index.observe(toOverlayView(moved), T0 + 6_000);
  t.equal(index.activeVersionsAt(T0 + 7_000).length, 1, 'an unchanged re-observation opens no new version');
});

t.test('history: deletionTimestamp ends an overlay even before the DELETE event', async (t) => {
  const index = newIndex();
  index.markSynced(T0 - 60_000);
  index.observe(toOverlayView(ri()), T0);
  const deleting = ri();
  deleting.metadata = { ...deleting.metadata, deletionTimestamp: iso(T0 + 3_000) };
  index.observe(toOverlayView(deleting), T0 + 3_100);
  t.equal(winner(index, T0 + 2_999), 'cost-aware-ri-m5.xlarge-us-west-2');
  t.equal(winner(index, T0 + 3_000), undefined, 'being deleted: no longer active');
});

t.test('basis: exact while watching; approximate before the first sync and beyond retention', async (t) => {
  const index = newIndex({ retentionMs: 60_000 });
  index.replaceAll([toOverlayView(withCreation(reservedInstance('m5.xlarge', 'us-west-2'), T0 - 3_600_000))], T0);
  t.equal(index.synced, false);
  index.markSynced(T0);
  t.equal(index.match(viewOf(labelsOf()), T0 - 1).basis, 'approximate', 'before we watched');
  t.equal(
    index.match(viewOf(labelsOf()), T0 - 1).version?.overlay.name,
    'cost-aware-ri-m5.xlarge-us-west-2',
    'the earliest state known is used',
  );
  t.equal(index.match(viewOf(labelsOf()), T0).basis, 'exact');
  index.observe(toOverlayView(withCreation(computeSavingsPlan(), T0 + 1_000)), T0 + 1_000);
  index.forget('cost-aware-compute-sp-global', T0 + 2_000);
  index.prune(T0 + 2_000 + 59_999);
  t.equal(
    index.match(viewOf(labelsOf('c5.large')), T0 + 1_500).version?.overlay.name,
    'cost-aware-compute-sp-global',
    'kept inside retention',
  );
  index.prune(T0 + 2_000 + 60_001);
  t.equal(index.match(viewOf(labelsOf('c5.large')), T0 + 1_500).version, undefined, 'pruned after retention');
  t.equal(
    index.match(viewOf(labelsOf('c5.large')), T0 + 1_500).basis,
    'approximate',
    'and the answer says it may be wrong',
  );
  t.equal(index.match(viewOf(labelsOf('c5.large')), T0 + 2_000).basis, 'exact');
});

t.test('a relist closes overlays that vanished unseen', async (t) => {
  const index = newIndex();
  index.replaceAll([toOverlayView(ri()), toOverlayView(withCreation(computeSavingsPlan(), T0))], T0 + 1);
  index.markSynced(T0 + 1);
  index.replaceAll([toOverlayView(withCreation(computeSavingsPlan(), T0))], T0 + 60_000);
  t.equal(winner(index, T0 + 59_999), 'cost-aware-ri-m5.xlarge-us-west-2');
  t.equal(winner(index, T0 + 60_000), 'cost-aware-compute-sp-global');
});

t.test('keysNamedAt lists the keys that active, eligible overlays need', async (t) => {
  const index = newIndex();
  index.replaceAll([toOverlayView(ri()), toOverlayView(withCreation(computeSavingsPlan(), T0))], T0);
  t.same([...index.keysNamedAt(T0)].sort(), [
    'karpenter.k8s.aws/instance-family',
    'karpenter.sh/capacity-type',
    'node.kubernetes.io/instance-type',
  ]);
  t.same([...index.keysNamedAt(T0 - 1)], [], 'nothing existed before');
});

t.test('unanchored overlays (no In requirement) are still found', async (t) => {
  const index = newIndex();
  const bounded: OverlayObject = withCreation(
    {
      metadata: { name: 'big-boxes', labels: { 'app.kubernetes.io/managed-by': 'veneer' } },
      spec: {
        priceAdjustment: '-10%',
        weight: 50,
        requirements: [{ key: 'karpenter.k8s.aws/instance-cpu', operator: 'Gte', values: ['32'] }],
      },
    },
    T0,
  );
  index.replaceAll([toOverlayView(bounded), toOverlayView(ri())], T0);
  const labels = { ...labelsOf(), 'karpenter.k8s.aws/instance-cpu': '48' };
  t.equal(index.match(viewOf(labels), T0).version?.overlay.name, 'big-boxes');
  t.equal(
    index.match(viewOf({ ...labels, 'karpenter.k8s.aws/instance-cpu': '16' }), T0).version?.overlay.name,
    'cost-aware-ri-m5.xlarge-us-west-2',
  );
});

t.test('property: the order overlays arrive in never changes a decision', async (t) => {
  const families = ['m5', 'c6i', 'r6g'];
  const types = ['m5.large', 'm5.xlarge', 'c6i.large', 'r6g.2xlarge', 't3.micro'];
  const regions = ['us-west-2', 'us-east-1'];
  const all: OverlayObject[] = [
    computeSavingsPlan(),
    ...families.flatMap((f) => regions.map((r) => ec2InstanceSavingsPlan(f, r))),
    ...types.flatMap((ty) => regions.map((r) => reservedInstance(ty, r))),
  ].map((o) => withCreation(o, T0 - 1_000));
  const decideAll = (overlays: OverlayObject[]) => {
    const index = newIndex();
    for (const o of overlays) index.observe(toOverlayView(o), T0);
    index.markSynced(T0);
    return types.map((ty) => {
      const d = decide(
        {
          node: toNodeView(karpenterNode({ name: 'n', instanceType: ty, createdAt: iso(T0 + 1) })),
          now: T0 + 2,
          decidedBy: 'reconciler',
        },
        index,
        settings,
      );
      return d.outcome === 'influenced' || d.outcome === 'not-influenced'
        ? (d.record.labels['veneer.io/matching-overlay'] ?? 'none')
        : d.outcome;
    });
  };
  const expected = decideAll(all);
  t.same(
    expected.slice(0, 2),
    ['cost-aware-ri-m5.large-us-west-2', 'cost-aware-ri-m5.xlarge-us-west-2'],
    'sanity: RIs win, later region name on ties',
  );
  fc.assert(
    fc.property(fc.shuffledSubarray(all, { minLength: all.length, maxLength: all.length }), (shuffled) => {
      const got = decideAll(shuffled);
      return JSON.stringify(got) === JSON.stringify(expected);
    }),
    { numRuns: 300 },
  );
  t.pass('300 orders agree');
});

t.test('an overlay first seen while being deleted counted until its deletion began', async (t) => {
  const index = newIndex();
  const deleting = ri();
  deleting.metadata = { ...deleting.metadata, deletionTimestamp: iso(T0 + 5_000) };
  index.replaceAll([toOverlayView(deleting)], T0 + 10_000);
  index.markSynced(T0 + 10_000);
  t.equal(winner(index, T0 + 4_999), 'cost-aware-ri-m5.xlarge-us-west-2');
  t.equal(winner(index, T0 + 5_000), undefined);
});

t.test('a broken watch makes decisions about its gap approximate', async (t) => {
  const index = newIndex();
  index.replaceAll([toOverlayView(ri())], T0);
  index.markSynced(T0);
  index.markGap(T0 + 10_000, T0 + 20_000);
  t.equal(index.match(viewOf(labelsOf()), T0 + 9_999).basis, 'exact');
  t.equal(index.match(viewOf(labelsOf()), T0 + 15_000).basis, 'approximate');
  t.equal(index.match(viewOf(labelsOf()), T0 + 20_001).basis, 'exact');
});

// What Karpenter compares an overlay with: the NodePool's name and template labels, the
// instance type's and the offering's keys; and from when an overlay counts: once Karpenter
// validated its current generation. The differential test checks the same against Karpenter's
// own controller on generated clusters; these cases name each rule.
import t from 'tap';
import {
  decide,
  toNodeClaimView,
  toNodeView,
  toOverlayView,
  withExtraKeys,
  type OverlayObject,
} from '../../src/engine/index.ts';
import type { Decision } from '../../src/engine/decide.ts';
import { NOT_VALIDATED } from '../../src/engine/overlay.ts';
import { AWS_KEYS, KWOK_KEYS } from '../../src/engine/providers.ts';
import { computeSavingsPlan, karpenterNode, nodeClaimFor, reservedInstance } from '../../kit/veneer.ts';
import { defaultPool, indexWith, iso, newIndex, settings, T0, withCreation, withStatus } from './fixtures.ts';

const overlay = (
  name: string,
  requirements: OverlayObject['spec'] extends infer S ? (S extends { requirements?: infer R } ? R : never) : never,
  weight = 50,
): OverlayObject => ({
  metadata: { name, labels: { 'app.kubernetes.io/managed-by': 'veneer' } },
  spec: { price: '0.00', weight, requirements },
});
const onDemand = { key: 'karpenter.sh/capacity-type', operator: 'In', values: ['on-demand'] };
const node = (extraLabels: Record<string, string> = {}, createdAt = T0) =>
  karpenterNode({ name: 'n', instanceType: 'm5.xlarge', createdAt: iso(createdAt), extraLabels });
const winnerOf = (d: Decision) =>
  d.outcome === 'influenced' || d.outcome === 'not-influenced' ? (d.overlay?.name ?? null) : d.outcome;
const decideWith = (index: ReturnType<typeof indexWith>, n = node(), now = T0 + 5_000, s = settings) =>
  decide({ node: toNodeView(n), now, decidedBy: 'reconciler' }, index, s);

t.test('a label Karpenter does not compare is undefined for the overlay', async (t) => {
  // A NodePool requiring `team In [ml]` gives its nodes team=ml, but Karpenter's overlay check never sees it.
  const team = overlay('team-ml', [onDemand, { key: 'team', operator: 'In', values: ['ml'] }]);
  const notOther = overlay('team-not-web', [onDemand, { key: 'team', operator: 'NotIn', values: ['web'] }], 40);
  const labelled = node({ team: 'web' });
  t.equal(
    winnerOf(decideWith(indexWith([team]), node({ team: 'ml' }))),
    null,
    'In on a template *requirement* label: never applies',
  );
  t.equal(
    winnerOf(decideWith(indexWith([notOther]), labelled)),
    'team-not-web',
    'NotIn on an undefined key passes, whatever the node carries',
  );
  const exists = overlay('hostname', [onDemand, { key: 'kubernetes.io/hostname', operator: 'Exists' }]);
  t.equal(winnerOf(decideWith(indexWith([exists]))), null, 'kubernetes.io/hostname: undefined for Karpenter');
  const kubelet = overlay('kubelet-label', [onDemand, { key: 'example.com/role', operator: 'DoesNotExist' }]);
  t.equal(
    winnerOf(decideWith(indexWith([kubelet]), node({ 'example.com/role': 'batch' }))),
    'kubelet-label',
    'DoesNotExist on a kubelet label passes',
  );
});

t.test("the NodePool's template labels count, as they were at the launch", async (t) => {
  const team = overlay('team-ml', [onDemand, { key: 'team', operator: 'In', values: ['ml'] }]);
  const index = indexWith([team], undefined, { nodePools: [defaultPool({ team: 'ml' })] });
  t.equal(winnerOf(decideWith(index, node({ team: 'ml' }))), 'team-ml', 'a template label is compared');
  // The label leaves the NodePool at T0 + 10 s: nodes launched before still count it.
  index.nodePools.observe({ name: 'default', templateLabels: {} }, T0 + 10_000);
  t.equal(winnerOf(decideWith(index, node({ team: 'ml' }, T0), T0 + 20_000)), 'team-ml', 'launched before the change');
  t.equal(winnerOf(decideWith(index, node({ team: 'ml' }, T0 + 15_000), T0 + 20_000)), null, 'launched after it');
  const other = indexWith([team], undefined, {
    nodePools: [
      defaultPool({ team: 'ml' }),
      { ...defaultPool(), metadata: { name: 'batch', creationTimestamp: iso(T0 - 86_400_000) } },
    ],
  });
  t.equal(
    winnerOf(
      decideWith(
        other,
        karpenterNode({
          name: 'b',
          nodepool: 'batch',
          instanceType: 'm5.xlarge',
          createdAt: iso(T0),
          extraLabels: { team: 'ml' },
        }),
      ),
    ),
    null,
    'only for that NodePool',
  );
  const byPool = overlay('pool-batch', [onDemand, { key: 'karpenter.sh/nodepool', operator: 'In', values: ['batch'] }]);
  t.equal(
    winnerOf(decideWith(indexWith([byPool], undefined, { nodePools: [defaultPool()] }))),
    null,
    "karpenter.sh/nodepool is the NodePool's name",
  );
});

t.test('a node whose NodePool is unknown is judged on its labels, approximately', async (t) => {
  const team = overlay('team-ml', [onDemand, { key: 'team', operator: 'In', values: ['ml'] }]);
  const d = decideWith(indexWith([team], undefined, { nodePools: [] }), node({ team: 'ml' }));
  t.match(d, { outcome: 'influenced', basis: 'approximate' });
  t.equal(winnerOf(d), 'team-ml');
  t.match(
    decideWith(indexWith([reservedInstance('m5.xlarge', 'us-west-2')])),
    { outcome: 'influenced', basis: 'exact' },
    'exact with its NodePool',
  );
});

t.test('a key only the offering defines narrows NotIn and nothing else (KWOK: region in the offering)', async (t) => {
  const kwok = { ...settings, provider: KWOK_KEYS };
  const labels = { 'topology.kubernetes.io/region': 'us-west-2' };
  const inRegion = overlay('in-region', [
    onDemand,
    { key: 'topology.kubernetes.io/region', operator: 'In', values: ['us-west-2'] },
  ]);
  const notOwn = overlay('not-own-region', [
    onDemand,
    { key: 'topology.kubernetes.io/region', operator: 'NotIn', values: ['us-west-2'] },
  ]);
  const notOther = overlay('not-other-region', [
    onDemand,
    { key: 'topology.kubernetes.io/region', operator: 'NotIn', values: ['eu-west-1'] },
  ]);
  const absent = overlay('no-region', [onDemand, { key: 'topology.kubernetes.io/region', operator: 'DoesNotExist' }]);
  for (const [o, expected] of [
    [inRegion, null],
    [notOwn, null],
    [notOther, 'not-other-region'],
    [absent, null],
  ] as const) {
    t.equal(winnerOf(decideWith(indexWith([o]), node(labels), T0 + 5_000, kwok)), expected, o.metadata?.name ?? '');
  }
  t.equal(
    winnerOf(decideWith(indexWith([inRegion]), node(labels))),
    'in-region',
    'AWS defines region on the instance type',
  );
});

t.test('an overlay counts once Karpenter validated its current generation', async (t) => {
  const validated = (o: OverlayObject, generation: number, observed: number, since: number): OverlayObject => ({
    ...withStatus(o, [
      { type: 'ValidationSucceeded', status: 'True' },
      { type: 'Ready', status: 'True' },
    ]),
    metadata: { ...o.metadata, generation, creationTimestamp: iso(T0 - 60_000) },
    status: {
      conditions: [
        { type: 'ValidationSucceeded', status: 'True', observedGeneration: observed, lastTransitionTime: iso(since) },
        { type: 'Ready', status: 'True', observedGeneration: observed, lastTransitionTime: iso(since) },
      ],
    },
  });
  const ri = reservedInstance('m5.xlarge', 'us-west-2');
  const strict = (o: OverlayObject) => indexWith([o], T0 - 3_600_000, { requireOverlayReady: true });
  t.equal(winnerOf(decideWith(strict(withCreation(ri, T0 - 60_000)))), null, 'no status: not validated');
  t.equal(winnerOf(decideWith(strict(validated(ri, 2, 1, T0 - 30_000)))), null, 'Ready=True for an older generation');
  t.equal(
    winnerOf(decideWith(strict(validated(ri, 2, 2, T0 - 30_000)))),
    'cost-aware-ri-m5.xlarge-us-west-2',
    'validated in its generation',
  );

  // Seen unvalidated first, then validated at T0 + 2 s (seen at T0 + 3 s): it counts from the condition's transition.
  const index = newIndex({ requireOverlayReady: true });
  index.nodePools.replaceAll([{ name: 'default', templateLabels: {}, createdAt: T0 - 86_400_000 }], T0 - 10_000);
  index.observe(
    toOverlayView({ ...ri, metadata: { ...ri.metadata, generation: 1, creationTimestamp: iso(T0 - 5_000) } }),
    T0 - 5_000,
  );
  index.markSynced(T0 - 10_000);
  index.observe(toOverlayView(validated(ri, 1, 1, T0 + 2_000)), T0 + 3_000);
  t.equal(
    winnerOf(decideWith(index, node({}, T0 + 1_999), T0 + 9_000)),
    null,
    'a launch before Karpenter validated it',
  );
  t.equal(
    winnerOf(decideWith(index, node({}, T0 + 2_000), T0 + 9_000)),
    'cost-aware-ri-m5.xlarge-us-west-2',
    "from Ready's lastTransitionTime",
  );
  // A spec change (generation 2) leaves Ready=True: the new generation counts once seen validated.
  index.observe(toOverlayView(validated({ ...ri, spec: { ...ri.spec, weight: 31 } }, 2, 1, T0 + 2_000)), T0 + 20_000);
  index.observe(toOverlayView(validated({ ...ri, spec: { ...ri.spec, weight: 31 } }, 2, 2, T0 + 2_000)), T0 + 21_000);
  t.equal(
    winnerOf(decideWith(index, node({}, T0 + 20_500), T0 + 30_000)),
    null,
    'between the change and its validation',
  );
  t.equal(
    winnerOf(decideWith(index, node({}, T0 + 21_000), T0 + 30_000)),
    'cost-aware-ri-m5.xlarge-us-west-2',
    'from when it was seen validated',
  );
  const reason = index.activeVersionsAt(T0 + 20_500).find((v) => v.overlay.name === ri.metadata?.name)?.ineligible;
  t.match(reason, `${NOT_VALIDATED} in generation 2 yet (it validated 1)`);
  t.equal(
    winnerOf(
      decideWith(
        indexWith([withCreation(computeSavingsPlan(), T0 - 60_000)], undefined, { requireOverlayReady: false }),
      ),
    ),
    'cost-aware-compute-sp-global',
    'requireOverlayReady: false counts it without a status',
  );
});

t.test(
  'a key every AWS instance type defines with the same values is compared with all of them (tenancy)',
  async (t) => {
    const dedicated = overlay('dedicated', [
      onDemand,
      { key: 'karpenter.k8s.aws/instance-tenancy', operator: 'In', values: ['dedicated'] },
    ]);
    const neither = overlay('neither', [
      onDemand,
      { key: 'karpenter.k8s.aws/instance-tenancy', operator: 'NotIn', values: ['default', 'dedicated'] },
    ]);
    const absentTenancy = overlay('no-tenancy', [
      onDemand,
      { key: 'karpenter.k8s.aws/instance-tenancy', operator: 'DoesNotExist' },
    ]);
    const onDefault = node({ 'karpenter.k8s.aws/instance-tenancy': 'default' });
    t.equal(
      winnerOf(decideWith(indexWith([dedicated]), onDefault)),
      'dedicated',
      'In [dedicated] prices a default-tenancy launch too: the type admits both',
    );
    t.equal(winnerOf(decideWith(indexWith([neither]), onDefault)), null, 'NotIn both: no value left');
    t.equal(winnerOf(decideWith(indexWith([absentTenancy]), onDefault)), null, 'DoesNotExist: the type defines it');
    t.equal(
      winnerOf(decideWith(indexWith([dedicated], undefined, { nodePools: [] }), onDefault)),
      null,
      "without the NodePool, the node's one value stands in",
    );
  },
);

t.test("instanceTypeKeys: keys another provider defines are compared like the provider's own", async (t) => {
  const custom = overlay('gen', [onDemand, { key: 'example.com/generation', operator: 'In', values: ['7'] }]);
  const n = node({ 'example.com/generation': '7' });
  t.equal(winnerOf(decideWith(indexWith([custom]), n)), null, 'undefined for the AWS provider');
  const extended = { ...settings, provider: withExtraKeys(AWS_KEYS, ['example.com/generation']) };
  t.equal(winnerOf(decideWith(indexWith([custom]), n, T0 + 5_000, extended)), 'gen', 'defined once listed');
  t.equal(withExtraKeys(AWS_KEYS, []), AWS_KEYS, 'nothing listed: the provider as it is');
});

t.test(
  'without its NodeClaim, a node created within 15 minutes of an overlay change waits for the NodeClaim to date the launch',
  async (t) => {
    const ri = reservedInstance('m5.xlarge', 'us-west-2');
    const index = indexWith([computeSavingsPlan(), ri]);
    // The RI stops counting at T0 - 5 min; Karpenter may have launched the node before or after.
    index.forget(ri.metadata?.name ?? '', T0 - 300_000);
    const kubelet = karpenterNode({
      name: 'n',
      stage: 'kubelet',
      createdAt: iso(T0),
      extraLabels: { 'node.kubernetes.io/instance-type': 'm5.xlarge', 'karpenter.k8s.aws/instance-family': 'm5' },
    });
    t.match(decide({ node: toNodeView(kubelet), now: T0 + 1_000, decidedBy: 'webhook' }, index, settings), {
      outcome: 'undetermined',
      reason: /NodeClaim, which dates the launch, is unknown/,
      retryAt: T0 + 60_000,
    });
    const claim = toNodeClaimView(
      nodeClaimFor({ name: 'n', claimName: 'n-claim', instanceType: 'm5.xlarge', claimCreatedAt: iso(T0 - 400_000) }),
    );
    t.match(
      decide({ node: toNodeView(kubelet), nodeClaim: claim, now: T0 + 1_000, decidedBy: 'webhook' }, index, settings),
      { outcome: 'influenced', basis: 'exact', overlay: { name: ri.metadata?.name } },
      'its NodeClaim dates the launch before the change',
    );
    t.match(
      decide({ node: toNodeView(kubelet), now: T0 + 61_000, decidedBy: 'reconciler' }, index, settings),
      { outcome: 'influenced', basis: 'approximate', overlay: { name: 'cost-aware-compute-sp-global' } },
      'past the grace period: decided, and said to be approximate',
    );
    const later = karpenterNode({
      name: 'm',
      stage: 'kubelet',
      createdAt: iso(T0 + 901_000),
      extraLabels: { 'node.kubernetes.io/instance-type': 'm5.xlarge', 'karpenter.k8s.aws/instance-family': 'm5' },
    });
    t.match(
      decide({ node: toNodeView(later), now: T0 + 902_000, decidedBy: 'webhook' }, index, settings),
      { outcome: 'influenced', basis: 'exact' },
      'nothing changed in the 15 minutes before it: decided at CREATE',
    );
    // An overlay for another instance type, created a minute before the node: the winner is the same all along.
    index.observe(
      toOverlayView({
        ...reservedInstance('c6i.large', 'us-west-2'),
        metadata: { ...reservedInstance('c6i.large', 'us-west-2').metadata, creationTimestamp: iso(T0 + 840_000) },
      }),
      T0 + 840_000,
    );
    t.match(
      decide({ node: toNodeView(later), now: T0 + 902_000, decidedBy: 'webhook' }, index, settings),
      { outcome: 'influenced', basis: 'exact', overlay: { name: 'cost-aware-compute-sp-global' } },
      'a change that cannot alter its winner does not hold it back',
    );
  },
);

// Karpenter's NodeOverlay validation replayed without the selected overlays
// (src/engine/effect/conflicts.ts), on hand-made overlays whose verdicts follow Karpenter's rule:
// in its order, an overlay that prices an offering one of its weight accepted before it prices is a
// Conflict. Karpenter's own controller judges the replay on generated clusters in
// test/judges/conflict-differential.test.ts.
import t from 'tap';
import { OverlayIndex, parseSelector, type PriceBook, toOverlayView } from '../../../src/engine/index.ts';
import { Abstain } from '../../../src/engine/effect/abstain.ts';
import { revalidatedWithout } from '../../../src/engine/effect/conflicts.ts';
import { countedOf, worldsOf } from '../../../src/engine/effect/moment.ts';
import { toNodePoolView } from '../../../src/engine/nodepool.ts';
import { AWS_KEYS } from '../../../src/engine/providers.ts';

const T = Date.parse('2026-12-01T10:00:00Z');
const policy = { selector: parseSelector('app.kubernetes.io/managed-by=veneer'), requireOverlayReady: true };
const ZONES = ['us-east-1a', 'us-east-1b'];
const prices: PriceBook = {
  source: 'test',
  asOf: undefined,
  region: 'us-east-1',
  onDemand: () => 0.1,
  hasSpot: false,
  spot: () => undefined,
  offeredZones: () => new Set(ZONES),
  instanceTypes: () => ['m5.large', 'c6i.large'],
};
const pools = [toNodePoolView({ metadata: { name: 'default' } })];
const setting = { pools, prices, provider: AWS_KEYS, instanceLabels: undefined };

const req = (key: string, operator: string, ...values: string[]) => ({ key, operator, values });
const OD = req('karpenter.sh/capacity-type', 'In', 'on-demand');

function overlay(name: string, verdict: 'accepted' | 'conflict', selected: boolean, requirements: object[]) {
  const validated = verdict === 'accepted';
  return toOverlayView({
    metadata: {
      name,
      generation: 1,
      labels: selected ? { 'app.kubernetes.io/managed-by': 'veneer' } : {},
      creationTimestamp: new Date(T - 3_600_000).toISOString(),
    },
    spec: { weight: 30, price: '0.00', requirements: requirements as never },
    status: {
      conditions: [
        {
          type: 'ValidationSucceeded',
          status: validated ? 'True' : 'False',
          reason: validated ? 'ValidationSucceeded' : 'Conflict',
          observedGeneration: 1,
        },
        { type: 'Ready', status: validated ? 'True' : 'False', observedGeneration: 1 },
      ],
    },
  });
}

const active = (...views: ReturnType<typeof overlay>[]) =>
  OverlayIndex.ofCurrent(views, policy, T - 60_000).activeVersionsAt(T);
const names = (m: ReturnType<typeof revalidatedWithout>) =>
  m instanceof Abstain ? m : Object.fromEntries([...m].map(([o, v]) => [o.name, v]));

// Karpenter's order at one weight: the name that sorts later first.
const RI = overlay('ri', 'accepted', true, [OD, req('node.kubernetes.io/instance-type', 'In', 'm5.large')]);

t.test('an overlay refused only because of a selected one is accepted without it', async (t) => {
  const pref = overlay('pref', 'conflict', false, [OD, req('karpenter.k8s.aws/instance-family', 'In', 'm5')]);
  t.same(names(revalidatedWithout(active(RI, pref), setting)), { pref: 'accepted' });
});

t.test('and then refuses one it accepted after it', async (t) => {
  const pref = overlay('pref', 'conflict', false, [OD]);
  const other = overlay('alpha', 'accepted', false, [OD, req('node.kubernetes.io/instance-type', 'In', 'c6i.large')]);
  const versions = active(RI, pref, other);
  const revalidated = revalidatedWithout(versions, setting);
  t.same(names(revalidated), { pref: 'accepted', alpha: 'refused' });
  t.notOk(revalidated instanceof Abstain);
  const worlds = worldsOf(countedOf(versions, revalidated as Exclude<typeof revalidated, Abstain>));
  t.same(worlds.with.map((o) => o.name).sort(), ['alpha', 'ri'], 'with: as Karpenter applied them');
  t.same(
    worlds.without.map((o) => o.name),
    ['pref'],
    'without: the refused one applies, the one it now refuses does not',
  );
  t.same(
    [...worlds.selected].map((o) => o.name),
    ['ri'],
  );
});

t.test('an overlay that meets the selected one on no offering keeps its verdict', async (t) => {
  const spot = overlay('pref', 'conflict', false, [req('karpenter.sh/capacity-type', 'In', 'spot')]);
  const zz = overlay('zz', 'accepted', false, [req('karpenter.sh/capacity-type', 'In', 'spot')]);
  t.same(names(revalidatedWithout(active(RI, spot, zz), setting)), {}, 'pref was refused by zz, which stays');
});

t.test('abstains where the answer turns on what the watcher does not see', async (t) => {
  const byCpu = overlay('pref', 'conflict', false, [OD, req('karpenter.k8s.aws/instance-cpu', 'Gt', '1')]);
  const unsure = revalidatedWithout(active(RI, byCpu), setting);
  t.ok(unsure instanceof Abstain);
  t.match((unsure as Abstain).reason, /turns on a value of that type the watcher does not know/);
  const known = revalidatedWithout(active(RI, byCpu), {
    ...setting,
    instanceLabels: new Map([
      ['m5.large', { 'karpenter.k8s.aws/instance-cpu': '2' }],
      ['c6i.large', { 'karpenter.k8s.aws/instance-cpu': '2' }],
    ]),
  });
  t.same(names(known), { pref: 'accepted' }, "a node of each type seen: the type's value is known");
  const byZoneId = overlay('pref', 'conflict', false, [OD, req('topology.k8s.aws/zone-id', 'In', 'use1-az1')]);
  t.match((revalidatedWithout(active(RI, byZoneId), setting) as Abstain).reason, /zone-id/);
  const noCatalog = { ...setting, prices: { ...prices, instanceTypes: undefined } };
  t.match((revalidatedWithout(active(RI, byCpu), noCatalog) as Abstain).reason, /does not list its instance types/);
});

t.test("abstains when the replay with every overlay does not give Karpenter's verdicts", async (t) => {
  // pref meets ri on no offering, yet Karpenter refused it: it saw something the watcher does not.
  const pref = overlay('pref', 'conflict', false, [OD, req('node.kubernetes.io/instance-type', 'In', 'c6i.large')]);
  const odd = revalidatedWithout(active(RI, pref), setting);
  t.ok(odd instanceof Abstain);
  t.match((odd as Abstain).reason, /does not give the verdicts Karpenter wrote/);
});

t.test('by zone: overlays of one weight meet only on a zone both name', async (t) => {
  const riA = overlay('ri', 'accepted', true, [OD, req('topology.kubernetes.io/zone', 'In', 'us-east-1a')]);
  const prefA = overlay('pref', 'conflict', false, [OD, req('topology.kubernetes.io/zone', 'In', 'us-east-1a')]);
  const bB = overlay('b', 'accepted', false, [OD, req('topology.kubernetes.io/zone', 'In', 'us-east-1b')]);
  t.same(names(revalidatedWithout(active(riA, prefA, bB), setting)), { pref: 'accepted' }, 'b, in another zone, stays');
});

t.test(
  "a NodePool of one family meets another family's types as Karpenter reads it: no value, so DoesNotExist",
  async (t) => {
    const m5Pool = [
      toNodePoolView({
        metadata: { name: 'm5' },
        spec: { template: { metadata: { labels: { 'karpenter.k8s.aws/instance-family': 'm5' } } } },
      }),
    ];
    // pref names no family on a type: only c6i.large in the m5 pool, where ri (m5.large only) is not.
    const pref = overlay('pref', 'accepted', false, [OD, req('karpenter.k8s.aws/instance-family', 'DoesNotExist')]);
    const alpha = overlay('alpha', 'conflict', false, [OD, req('node.kubernetes.io/instance-type', 'In', 'c6i.large')]);
    t.same(
      names(revalidatedWithout(active(RI, pref, alpha), { ...setting, pools: m5Pool })),
      {},
      'nothing selected touched pref or alpha',
    );
    const odd = revalidatedWithout(active(RI, pref, alpha), setting);
    t.ok(
      odd instanceof Abstain,
      'in a pool without the family label pref meets nothing, and alpha could not be a Conflict',
    );
  },
);

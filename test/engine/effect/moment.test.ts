// The overlays Karpenter applied at a moment, and the two worlds they make
// (src/engine/effect/moment.ts): each list one shared array per distinct set, so that the replay's
// memos, which key on identity, find what another moment or node with the same overlays worked out.
import t from 'tap';
import { OverlayIndex, parseSelector, toOverlayView } from '../../../src/engine/index.ts';
import { alone, countedOf, verdictsInDoubt, worldsOf } from '../../../src/engine/effect/moment.ts';
import { reservedInstance } from '../../../kit/veneer.ts';

const T = Date.parse('2026-12-01T10:00:00Z');
const policy = { selector: parseSelector('app.kubernetes.io/managed-by=veneer'), requireOverlayReady: false };
const RI = toOverlayView(reservedInstance('m5.large', 'us-east-1'));
const other = toOverlayView({
  metadata: { name: 'not-veneer' },
  spec: {
    weight: 30,
    price: '0.01',
    requirements: [{ key: 'node.kubernetes.io/instance-type', operator: 'In', values: ['c6i.large'] }],
  },
});

t.test('the counted overlays: one shared list per set, selected or not', async (t) => {
  const index = OverlayIndex.ofCurrent([RI, other], policy, T - 60_000);
  const counted = countedOf(index.activeVersionsAt(T));
  t.same(Object.fromEntries(counted.map((c) => [c.overlay.name, c.selected])), {
    [RI.name]: true,
    'not-veneer': false,
  });
  t.equal(countedOf(index.activeVersionsAt(T)), counted, 'the same set read again is the same array');
  t.ok(Object.isFrozen(counted), 'shared: never changed');
  t.equal(countedOf([]), countedOf([]), 'none is one empty list');
  const worlds = worldsOf(counted);
  t.same(worlds.with.map((o) => o.name).sort(), [RI.name, 'not-veneer'].sort());
  t.same(
    worlds.without.map((o) => o.name),
    ['not-veneer'],
    'without the selected ones: every other overlay stays',
  );
  t.equal(worldsOf(counted), worlds, 'one pair of worlds per counted list');
  t.equal(alone(RI), alone(RI), 'a world of one overlay, one array per overlay');
  t.same(alone(RI), [RI]);
});

t.test('the overlays whose verdict Karpenter could give differently without the selected ones', async (t) => {
  // Refused as a Conflict at the selected RI's weight: without the RI, Karpenter might accept it.
  const refused = (name: string, weight: number) =>
    toOverlayView({
      metadata: { name },
      spec: {
        weight,
        price: '0.02',
        requirements: [{ key: 'node.kubernetes.io/instance-type', operator: 'In', values: ['m5.large'] }],
      },
      status: { conditions: [{ type: 'ValidationSucceeded', status: 'False', reason: 'Conflict' }] },
    });
  const active = (...overlays: ReturnType<typeof toOverlayView>[]) =>
    OverlayIndex.ofCurrent([RI, ...overlays], policy, T - 60_000).activeVersionsAt(T);
  const atWeight = active(refused('z-refused', RI.weight));
  t.same(
    verdictsInDoubt(atWeight).map((o) => o.name),
    ['z-refused'],
  );
  t.equal(verdictsInDoubt(atWeight), verdictsInDoubt(atWeight), 'one shared list per set');
  t.same(verdictsInDoubt(active(refused('z-refused', RI.weight + 1))), [], 'at another weight: no doubt');
  t.same(verdictsInDoubt(active()), [], 'no Conflict: no doubt');
});

// The per-overlay series: records counted by the overlay and capacity type they name, every
// active overlay present at 0, and the cap folding the smallest into one "other" series.
import t from 'tap';
import { overlayState, parseSelector, recordKeys, toOverlayView, type NodeView } from '../../../src/engine/index.ts';
import { createMetrics } from '../../../src/metrics.ts';
import {
  exportOverlayNodes,
  exportOverlayStates,
  exportOverlaysSeen,
  overlaySeries,
} from '../../../src/controllers/gauges/overlays.ts';
import { OTHER } from '../../../src/controllers/series-cap.ts';
import {
  computeSavingsPlan,
  ec2InstanceSavingsPlan,
  reservedInstance,
  validatedByKarpenter,
} from '../../../kit/veneer.ts';
import { withStatus } from '../../engine/fixtures.ts';

const keys = recordKeys('veneer.io');
const record = (name: string, overlay: string | undefined, capacityType?: string): NodeView => ({
  name,
  labels: {
    'veneer.io/overlay-influenced': overlay ? 'true' : 'false',
    ...(overlay ? { 'veneer.io/matching-overlay': overlay } : {}),
    ...(capacityType ? { 'veneer.io/capacity-type': capacityType } : {}),
  },
});
const active = [
  computeSavingsPlan(),
  ec2InstanceSavingsPlan('m5', 'us-west-2'),
  reservedInstance('c7i.large', 'us-east-1'),
].map((o) => toOverlayView(o));
const nodes = [
  record('a', 'cost-aware-compute-sp-global', 'compute-savings-plan'),
  record('b', 'cost-aware-compute-sp-global', 'compute-savings-plan'),
  record('c', 'cost-aware-ec2-sp-m5-us-west-2', 'ec2-instance-savings-plan'),
  record('d', 'cost-aware-ri-m4.large-us-west-2', 'reserved-instance'),
  record('e', 'hand-made'),
  record('f', undefined),
  { name: 'g', labels: {} },
];

t.test('every active overlay at 0 or more, records of overlays gone since, no node without a record', async (t) => {
  const series = overlaySeries(nodes, active, keys, 300);
  t.same(
    series.map((s) => [s.overlay, s.capacity_type, s.value]),
    [
      ['cost-aware-compute-sp-global', 'compute-savings-plan', 2],
      ['cost-aware-ec2-sp-m5-us-west-2', 'ec2-instance-savings-plan', 1],
      ['cost-aware-ri-c7i.large-us-east-1', 'reserved-instance', 0],
      ['cost-aware-ri-m4.large-us-west-2', 'reserved-instance', 1],
      ['hand-made', 'unknown', 1],
    ],
  );
});

t.test('past the cap the smallest series are summed under overlay="other", deterministically', async (t) => {
  const capped = overlaySeries(nodes, active, keys, 3);
  t.equal(capped.length, 3, 'never more series than the cap');
  t.same(
    capped.map((s) => [s.overlay, s.value]),
    [
      ['cost-aware-compute-sp-global', 2],
      ['cost-aware-ec2-sp-m5-us-west-2', 1],
      [OTHER, 2],
    ],
    'ties keep the name that sorts first; the rest are summed',
  );
  t.same(
    overlaySeries(nodes, active, keys, 1),
    [{ overlay: OTHER, capacity_type: OTHER, value: 5 }],
    'a cap of one: everything in other',
  );
  t.equal(overlaySeries(nodes, active, keys, 5).length, 5, 'exactly at the cap: nothing folded');
});

t.test('computed at each scrape from what the sources hold then', async (t) => {
  const metrics = createMetrics();
  let now = nodes.slice(0, 2);
  exportOverlayNodes(metrics, { nodes: () => now, active: () => active.slice(0, 1) }, keys, 300);
  t.match(
    await metrics.registry.metrics(),
    /^veneer_nodewatcher_overlay_nodes_current\{overlay="cost-aware-compute-sp-global",capacity_type="compute-savings-plan"\} 2$/m,
  );
  now = [];
  const text = await metrics.registry.metrics();
  t.match(
    text,
    /^veneer_nodewatcher_overlay_nodes_current\{overlay="cost-aware-compute-sp-global",capacity_type="compute-savings-plan"\} 0$/m,
  );
  t.notMatch(text, /hand-made/);
});

t.test("overlays by Karpenter's verdict: every state has a series, and no overlay is named", async (t) => {
  const at = '2026-01-12T15:00:00Z';
  const ri = (type: string) => reservedInstance(type, 'us-west-2');
  const capacityOnly = ri('x2.large');
  capacityOnly.spec = { requirements: [], capacity: { 'example.com/gpu': '1' } };
  const deleting = validatedByKarpenter(ri('m4.large'), at);
  deleting.metadata = { ...deleting.metadata, deletionTimestamp: at };
  const overlays = [
    validatedByKarpenter(computeSavingsPlan(), at),
    validatedByKarpenter(ec2InstanceSavingsPlan('m5', 'us-west-2'), at),
    withStatus(ri('m5.xlarge'), [
      { type: 'ValidationSucceeded', status: 'False', reason: 'Conflict' },
      { type: 'Ready', status: 'False', reason: 'UnhealthyDependents' },
    ]),
    withStatus(ri('r6g.large'), [
      { type: 'ValidationSucceeded', status: 'False', reason: 'RuntimeValidation' },
      { type: 'Ready', status: 'False', reason: 'UnhealthyDependents' },
    ]),
    ri('c7i.large'),
    { ...validatedByKarpenter(ri('t3.large'), at, 1), metadata: { ...ri('t3.large').metadata, generation: 2 } },
    validatedByKarpenter(capacityOnly, at),
    deleting,
  ].map((o) => toOverlayView(o));
  t.same(
    overlays.map((o) => overlayState(o)),
    [
      'counted',
      'counted',
      'rejected_conflict',
      'rejected_validation',
      'unvalidated',
      'unvalidated',
      'capacity_only',
      'deleting',
    ],
  );
  const metrics = createMetrics();
  exportOverlayStates(metrics, () => overlays);
  const text = await metrics.registry.metrics();
  for (const [state, n] of Object.entries({
    counted: 2,
    rejected_conflict: 1,
    rejected_validation: 1,
    unvalidated: 2,
    capacity_only: 1,
    deleting: 1,
  })) {
    t.match(text, new RegExp(`^veneer_nodewatcher_overlays\\{state="${state}"\\} ${n}$`, 'm'), `${state}: ${n}`);
  }
  exportOverlayStates(metrics, () => []);
  t.match(
    await metrics.registry.metrics(),
    /^veneer_nodewatcher_overlays\{state="rejected_conflict"\} 0$/m,
    'a state with no overlay reads 0',
  );
  t.notMatch(text, /cost-aware/, 'no overlay names');
});

t.test('every NodeOverlay seen, selected or not, counted at each scrape, never named', async (t) => {
  const handMade = toOverlayView({
    metadata: { name: 'team-gpu-discount', labels: { team: 'ml' } },
    spec: { requirements: [], priceAdjustment: '-10%' },
  });
  let seen = [...active, handMade];
  const metrics = createMetrics();
  const selector = parseSelector('app.kubernetes.io/managed-by=veneer');
  exportOverlaysSeen(
    metrics,
    () => seen,
    (o) => selector.matches(o.labels),
  );
  const count = async () => {
    const text = await metrics.registry.metrics();
    t.notMatch(text, /cost-aware|team-gpu/, 'no overlay names');
    return [...text.matchAll(/^veneer_nodewatcher_nodeoverlays_seen\{selected="(true|false)"\} (\d+)$/gm)].map((m) => [
      m[1],
      Number(m[2]),
    ]);
  };
  t.same(
    await count(),
    [
      ['true', 3],
      ['false', 1],
    ],
    "Veneer's three selected, the hand-made one not",
  );
  seen = [handMade];
  t.same(
    await count(),
    [
      ['true', 0],
      ['false', 1],
    ],
    'the selector matches none of the overlays there are: both series, selected at 0',
  );
  seen = [];
  t.same(
    await count(),
    [
      ['true', 0],
      ['false', 0],
    ],
    'no overlay at all (or the cache not synced yet): both at 0',
  );
});

// What each overlay is worth, as exported: the on-demand list price an hour of the nodes whose
// record names it, by effect (overlay_dollars_per_hour), bounded like overlay_nodes_current.
import t from 'tap';
import {
  onDemandListPrice,
  recordedEffect,
  recordKeys,
  type NodeView,
  type PriceBook,
} from '../../../src/engine/index.ts';
import { createMetrics } from '../../../src/metrics.ts';
import { exportOverlayDollars, overlayDollarSeries } from '../../../src/controllers/gauges/dollars.ts';
import { OTHER } from '../../../src/controllers/series-cap.ts';
import { basicTimestamp } from '../../../src/engine/labels.ts';

const keys = recordKeys('veneer.io');
const LIST: Record<string, number> = { 'm5.xlarge': 0.192, 'c6i.large': 0.085, 'r6g.large': 0.1008 };
const book: PriceBook = {
  source: 'static',
  asOf: undefined,
  region: 'us-west-2',
  hasSpot: false,
  onDemand: (type) => LIST[type],
  spot: () => undefined,
};
const AT = Date.parse('2026-12-03T10:00:00Z');

const record = (
  name: string,
  o: { overlay?: string; effect?: string; type?: string; at?: number; uid?: string; beta?: boolean },
): NodeView => ({
  name,
  ...(o.uid ? { uid: o.uid } : {}),
  labels: {
    'veneer.io/overlay-influenced': o.overlay ? 'true' : 'false',
    ...(o.overlay ? { 'veneer.io/matching-overlay': o.overlay } : {}),
    ...(o.effect ? { 'veneer.io/overlay-effect': o.effect } : {}),
    ...(o.type ? { [o.beta ? 'beta.kubernetes.io/instance-type' : 'node.kubernetes.io/instance-type']: o.type } : {}),
    'veneer.io/labeled-at': basicTimestamp(o.at ?? AT),
  },
});

const RI = 'cost-aware-ri-m5.xlarge-us-west-2';
const SP = 'cost-aware-compute-sp-global';
const nodes = [
  record('a', { overlay: RI, effect: 'capacity-type', type: 'm5.xlarge' }),
  record('b', { overlay: RI, effect: 'capacity-type', type: 'm5.xlarge' }),
  record('c', { overlay: RI, effect: 'none', type: 'm5.xlarge', beta: true }),
  record('d', { overlay: SP, effect: 'instance-type', type: 'c6i.large' }),
  record('e', { overlay: SP, type: 'c6i.large' }), // written before the watcher knew effects
  record('f', { overlay: SP, effect: 'relocated', type: 'r6g.large' }), // a value this watcher does not know
  record('g', { overlay: SP, effect: 'none', type: 'u-24tb1.metal' }), // no price known
  record('h', { effect: 'capacity-type', type: 'm5.xlarge' }), // not influenced: names no overlay
  { name: 'i', labels: { 'node.kubernetes.io/instance-type': 'm5.xlarge' } }, // no record
];

t.test("the engine's price lookup: the node's instance type (or its deprecated alias) in the book", async (t) => {
  t.equal(onDemandListPrice({ 'node.kubernetes.io/instance-type': 'm5.xlarge' }, book), 0.192);
  t.equal(onDemandListPrice({ 'beta.kubernetes.io/instance-type': 'c6i.large' }, book), 0.085);
  t.equal(onDemandListPrice({ 'node.kubernetes.io/instance-type': 'x9.huge' }, book), undefined, 'a type not in it');
  t.equal(onDemandListPrice({}, book), undefined, 'no instance type');
  t.equal(onDemandListPrice({ 'node.kubernetes.io/instance-type': 'm5.xlarge' }, undefined), undefined, 'no prices');
});

t.test('the effect as the metrics name it: an unknown value or none is unknown', async (t) => {
  t.same(
    nodes.slice(0, 7).map((n) => recordedEffect(n.labels, keys)),
    ['capacity-type', 'capacity-type', 'none', 'instance-type', 'unknown', 'unknown', 'none'],
  );
});

t.test('dollars an hour by overlay and effect: list prices summed, only records that name an overlay', async (t) => {
  const series = overlayDollarSeries(nodes, keys, (l) => onDemandListPrice(l, book), 300);
  t.same(
    series.map((s) => [s.overlay, s.effect, s.value]),
    [
      [RI, 'capacity-type', 0.384],
      [RI, 'none', 0.192],
      [SP, 'instance-type', 0.085],
      [SP, 'unknown', 0.1858],
      [SP, 'none', 0],
    ],
    'rounded to 1/10,000 $ as the report is; a node without a price adds 0 but keeps its series',
  );
  const capped = overlayDollarSeries(nodes, keys, (l) => onDemandListPrice(l, book), 3);
  t.same(
    capped.map((s) => [s.overlay, s.effect, s.value]),
    [
      [RI, 'capacity-type', 0.384],
      [RI, 'none', 0.192],
      [OTHER, OTHER, 0.2708],
    ],
    'past the cap the smallest are summed under other',
  );
  t.same(
    overlayDollarSeries(nodes, keys, () => undefined, 300).map((s) => s.value),
    [0, 0, 0, 0, 0],
    'no prices',
  );
});

t.test('the gauge, computed at each scrape with the prices held then', async (t) => {
  const metrics = createMetrics();
  let held: PriceBook | undefined = book;
  let now = nodes.slice(0, 2);
  exportOverlayDollars(
    metrics,
    () => now,
    () => held,
    keys,
    300,
  );
  const line = (text: string) =>
    text.match(/^veneer_nodewatcher_overlay_dollars_per_hour\{overlay="([^"]+)",effect="([^"]+)"\} (\S+)$/m)?.slice(1);
  t.same(line(await metrics.registry.metrics()), [RI, 'capacity-type', '0.384']);
  held = undefined;
  t.same(line(await metrics.registry.metrics()), [RI, 'capacity-type', '0'], 'the prices gone: 0');
  now = [];
  t.same(line(await metrics.registry.metrics()), undefined, 'no node names the overlay: no series');
});

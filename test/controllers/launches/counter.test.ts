// Each record written, counted once by the leader from what the watch shows written: by the path
// its story names, its effect and why that is unknown, and the overlay it names, each family
// bounded by the one series cap. Nothing a review asks the webhook for is counted here.
import t from 'tap';
import { EFFECTS, recordKeys, type NodeView } from '../../../src/engine/index.ts';
import type { RecordTold } from '../../../src/engine/record.ts';
import { createMetrics, type Metrics } from '../../../src/metrics.ts';
import { LaunchCounter, WINDOW_MS, writtenOf } from '../../../src/controllers/launches/counter.ts';
import { OTHER } from '../../../src/controllers/series-cap.ts';
import { basicTimestamp } from '../../../src/engine/labels.ts';

const keys = recordKeys('veneer.io');
const AT = Date.parse('2026-12-03T10:00:00Z');
const RI = 'cost-aware-ri-m5.xlarge-us-west-2';
const SP = 'cost-aware-compute-sp-global';

const record = (
  name: string,
  o: {
    overlay?: string;
    effect?: string;
    at?: number;
    capacityType?: string;
    family?: string;
    told?: Partial<RecordTold>;
  } = {},
): NodeView => ({
  name,
  uid: `u-${name}`,
  labels: {
    'veneer.io/overlay-influenced': o.overlay ? 'true' : 'false',
    ...(o.overlay ? { 'veneer.io/matching-overlay': o.overlay } : {}),
    ...(o.effect ? { 'veneer.io/overlay-effect': o.effect } : {}),
    ...(o.capacityType ? { 'veneer.io/capacity-type': o.capacityType } : {}),
    ...(o.family ? { 'veneer.io/instance-family': o.family } : {}),
    'veneer.io/labeled-at': basicTimestamp(o.at ?? AT),
  },
  told: { overlay: o.overlay ?? null, decidedBy: 'webhook', basis: 'exact', ...o.told } as RecordTold,
});

const values = async (metrics: Metrics, name: 'launches' | 'nodesLabeled' | 'effects' | 'effectUnknown') =>
  Object.fromEntries(
    (await metrics[name].get()).values
      .filter((v) => v.value > 0)
      .map((v) => [Object.values(v.labels).join(' '), v.value]),
  );

t.test('what a record is counted by', async (t) => {
  t.same(
    writtenOf(
      record('a', {
        overlay: RI,
        effect: 'unknown',
        capacityType: 'reserved-instance',
        family: 'm5',
        told: { decidedBy: 'reconciler', effectReason: 'no-spot-prices' },
      }),
      keys,
    ),
    {
      writtenAt: AT,
      overlay: RI,
      effect: 'unknown',
      capacityType: 'reserved-instance',
      instanceFamily: 'm5',
      source: 'reconciler',
      effectReason: 'no-spot-prices',
    },
  );
  t.same(
    writtenOf(record('b'), keys),
    { writtenAt: AT, capacityType: 'none', instanceFamily: 'none', source: 'webhook' },
    'not influenced: counted, naming no overlay; no effect label, none counted',
  );
  const unreadable = record('c', { overlay: SP });
  delete (unreadable as { told?: RecordTold }).told;
  t.equal(writtenOf(unreadable, keys)?.source, 'unknown', 'a story that cannot be read: source unknown');
  t.equal(writtenOf({ name: 'd', labels: {} }, keys), undefined, 'no record');
  const noTime = record('x', { overlay: RI });
  delete (noTime.labels as Record<string, string>)['veneer.io/labeled-at'];
  t.equal(writtenOf(noTime, keys), undefined, 'no labeled-at: not a record this watcher wrote');
});

t.test('counted once, by the leader, records written since it leads', async (t) => {
  const metrics = createMetrics();
  let now = AT;
  let active = [RI, SP];
  const counter = new LaunchCounter({ metrics, keys, max: 300, active: () => active, now: () => now });
  const a = record('a', { overlay: RI, effect: 'capacity-type', at: AT - 5_000 });
  counter.seen(a);
  t.same(await values(metrics, 'launches'), {}, 'a follower counts nothing');

  now = AT + 400; // leads from the second AT
  counter.lead();
  counter.seen(a);
  t.same(await values(metrics, 'launches'), {}, 'a record written before it led is not counted');
  const b = record('b', { overlay: RI, effect: 'capacity-type', capacityType: 'reserved-instance', family: 'm5' });
  const c = record('c', {
    overlay: SP,
    effect: 'unknown',
    at: AT + 2_000,
    capacityType: 'compute-savings-plan',
    told: { decidedBy: 'reconciler', effectReason: 'no-spot-prices' },
  });
  const none = record('n', { effect: 'none', at: AT + 1_000 });
  for (const n of [b, c, b, c, none, none, { name: 'x', labels: {} }]) counter.seen(n);
  t.same(
    await values(metrics, 'launches'),
    { [`${RI} capacity-type`]: 1, [`${SP} unknown`]: 1 },
    'each once, however often the watch shows it',
  );
  t.same(
    await values(metrics, 'nodesLabeled'),
    {
      'reserved-instance m5 webhook': 1,
      'compute-savings-plan none reconciler': 1,
      'none none webhook': 1,
    },
    'nodes_labeled_total: every record once, by the path its story names',
  );
  t.same(await values(metrics, 'effects'), { 'capacity-type': 1, unknown: 1, none: 1 });
  t.same(await values(metrics, 'effectUnknown'), { 'no-spot-prices': 1 });
  const text = await metrics.registry.metrics();
  t.match(text, new RegExp(`^veneer_nodewatcher_launches_total\\{overlay="${SP}",effect="none"\\} 0$`, 'm'));
  t.equal(
    [...text.matchAll(/^veneer_nodewatcher_launches_total\{/gm)].length,
    2 * EFFECTS.length,
    'at scrape every active overlay has a series for each effect, from 0',
  );

  now = AT + WINDOW_MS + 3_000;
  const d = record('d', { overlay: SP, effect: 'none', at: now - 1_000 });
  counter.seen(d);
  counter.seen(b);
  t.equal((await values(metrics, 'launches'))[`${SP} none`], 1, 'a new one counts');
  t.equal(
    (await values(metrics, 'launches'))[`${RI} capacity-type`],
    1,
    'one older than the window is not counted again',
  );

  counter.follow();
  counter.seen(record('e', { overlay: SP, effect: 'none', at: now }));
  t.equal((await values(metrics, 'launches'))[`${SP} none`], 1, 'leadership lost: nothing more counted');
  now += 60_000;
  counter.lead();
  counter.seen(d);
  counter.seen(record('f', { overlay: SP, effect: 'none', at: now }));
  t.equal((await values(metrics, 'launches'))[`${SP} none`], 2, 'leading again: only records written since');
  active = [];
});

t.test('past the cap, the overlays that launched the most keep their names, not the first seen', async (t) => {
  const metrics = createMetrics();
  const now = AT;
  const counter = new LaunchCounter({ metrics, keys, max: 2, active: () => [], now: () => now });
  counter.lead();
  let i = 0;
  const launch = (overlay: string, capacityType: string) =>
    counter.seen(record(`n${i++}`, { overlay, effect: 'none', at: now, capacityType }));
  launch('first-seen', 'reserved-instance');
  await metrics.registry.metrics();
  t.same(await values(metrics, 'launches'), { 'first-seen none': 1 }, 'under the cap: named');
  launch('second', 'reserved-instance');
  for (let k = 0; k < 3; k++) launch('busy', 'compute-savings-plan');
  await metrics.registry.metrics();
  t.same(
    await values(metrics, 'launches'),
    { 'busy none': 3, [`${OTHER} ${OTHER}`]: 1 },
    'past it: the busiest keeps its name; the first one seen ended its series (never moved into other), the other one goes to other',
  );
  launch('first-seen', 'reserved-instance');
  await metrics.registry.metrics();
  t.same(await values(metrics, 'launches'), { 'busy none': 3, [`${OTHER} ${OTHER}`]: 2 });
  t.same(
    await values(metrics, 'nodesLabeled'),
    { 'compute-savings-plan none webhook': 3, 'reserved-instance none webhook': 3 },
    'nodes_labeled_total: two pairs, at the cap of 2: both named',
  );
});

// Recorded nodes that Karpenter's disruption removed, by reason and by what became of the overlay
// the record names: the engine's rule (engine/disruption.ts) and the counter's bookkeeping of the
// two watches (a NodeClaim's DisruptionReason mark, then its Node's removal, in either order).
import t from 'tap';
import {
  recordAtMark,
  disruptionReasonLabel,
  OverlayIndex,
  overlayStateAtDisruption,
  parseSelector,
  recordKeys,
  toNodeClaimView,
  toOverlayView,
  type NodeView,
  type OverlayView,
} from '../../../src/engine/index.ts';
import { toldOf } from '../../../src/engine/decided-node.ts';
import { churnOf } from '../../../src/engine/disruption.ts';
import { createMetrics } from '../../../src/metrics.ts';
import { DisruptionCounter, MARK_GRACE_MS } from '../../../src/controllers/disruptions/counter.ts';

const keys = recordKeys('veneer.io');
const RI = 'cost-aware-ri-m5.xlarge-us-west-2';
const overlay = (o: { price?: string; priceAdjustment?: string; weight?: number; deleting?: boolean } = {}) =>
  toOverlayView({
    metadata: { name: RI, ...(o.deleting ? { deletionTimestamp: '2026-12-03T10:00:00Z' } : {}) },
    spec: {
      weight: o.weight ?? 30,
      ...(o.price !== undefined ? { price: o.price } : {}),
      ...(o.priceAdjustment !== undefined ? { priceAdjustment: o.priceAdjustment } : {}),
      requirements: [{ key: 'node.kubernetes.io/instance-type', operator: 'In', values: ['m5.xlarge'] }],
    },
  });
const story = (o: { weight?: number; price?: string; priceAdjustment?: string; overlay?: string } = {}) =>
  JSON.stringify({
    influenced: true,
    overlay: o.overlay ?? RI,
    weight: o.weight ?? 30,
    ...(o.price !== undefined ? { price: o.price } : { price: '0.00' }),
    ...(o.priceAdjustment !== undefined ? { priceAdjustment: o.priceAdjustment } : {}),
    decidedBy: 'webhook',
    evaluatedAt: '2026-12-03T10:00:00Z',
    labeledAt: '2026-12-03T10:00:00Z',
    basis: 'exact',
    characteristicsFrom: 'node+nodeclaim',
    labels: [],
  });
const readStory = (s: string) => JSON.parse(s);

t.test('the overlay a record names: counting, changed or gone', async (t) => {
  const same = overlay({ price: '0.00' });
  t.equal(overlayStateAtDisruption(same, true, readStory(story())), 'counting', 'same terms, still counts');
  t.equal(overlayStateAtDisruption(same, true, undefined), 'counting', 'no story: it exists and counts');
  t.equal(overlayStateAtDisruption(undefined, false, readStory(story())), 'gone', 'deleted');
  t.equal(
    overlayStateAtDisruption(overlay({ price: '0.00', deleting: true }), true, undefined),
    'gone',
    'being deleted',
  );
  t.equal(
    overlayStateAtDisruption(same, false, readStory(story())),
    'changed',
    'no longer counts (unselected, invalid)',
  );
  t.equal(overlayStateAtDisruption(overlay({ price: '0.01' }), true, readStory(story())), 'changed', 'another price');
  t.equal(
    overlayStateAtDisruption(overlay({ price: '0.00', weight: 5 }), true, readStory(story())),
    'changed',
    'another weight',
  );
  t.equal(
    overlayStateAtDisruption(
      overlay({ priceAdjustment: '-10%' }),
      true,
      readStory(story({ priceAdjustment: '-10%', price: undefined })),
    ),
    'changed',
    'a price adjustment where the story had a price: other terms',
  );
  const adjusted = JSON.parse(story({ priceAdjustment: '-10%' }));
  delete adjusted.price;
  t.equal(
    overlayStateAtDisruption(overlay({ priceAdjustment: '-10%' }), true, adjusted),
    'counting',
    'the same adjustment',
  );
  t.equal(
    overlayStateAtDisruption(overlay({ price: '0.01' }), true, readStory(story({ overlay: 'another-overlay' }))),
    'counting',
    'a story about another overlay (a label-value collision) is not compared',
  );
});

t.test("the churn a replacement's record keeps: its replaced nodes' records, by overlay and state", async (t) => {
  const at = Date.parse('2026-12-03T11:00:00Z');
  const policy = { selector: parseSelector(''), requireOverlayReady: false };
  // As a mark keeps a node's record (recordAtMark): an influenced node's overlay label and story terms.
  const recorded = (o: { overlay?: string; influenced?: boolean; price?: string } = {}) =>
    recordAtMark(
      { [keys.influenced]: o.influenced === false ? 'false' : 'true', [keys.matchingOverlay]: o.overlay ?? RI },
      toldOf(
        story({ ...(o.price !== undefined ? { price: o.price } : {}), ...(o.overlay ? { overlay: o.overlay } : {}) }),
      ),
      keys,
    );
  const none = OverlayIndex.ofCurrent([], policy, at - 60_000);
  t.same(
    churnOf([recorded(), recorded(), undefined, recorded({ influenced: false })], none, at),
    [{ overlay: RI, state: 'gone', nodes: 2 }],
    'the overlay deleted: two recorded nodes; an unknown node and one not influenced are not churn',
  );
  const same = OverlayIndex.ofCurrent([overlay({ price: '0.00' })], policy, at - 60_000);
  t.same(churnOf([recorded()], same, at), [], 'on the same terms: no churn');
  t.same(
    churnOf([recorded({ price: '0.01' }), recorded()], same, at),
    [{ overlay: RI, state: 'changed', nodes: 1 }],
    'the record priced at 0.01 and the overlay now at 0.00: changed',
  );
  const unselected = OverlayIndex.ofCurrent(
    [overlay({ price: '0.00' })],
    { selector: parseSelector('app.kubernetes.io/managed-by=veneer'), requireOverlayReady: false },
    at - 60_000,
  );
  t.same(
    churnOf([recorded()], unselected, at),
    [{ overlay: RI, state: 'changed', nodes: 1 }],
    'no longer selected: changed',
  );
  t.same(
    churnOf([recorded({ overlay: 'other' }), recorded()], none, at),
    [
      { overlay: 'other', state: 'gone', nodes: 1 },
      { overlay: RI, state: 'gone', nodes: 1 },
    ],
    'one entry per overlay',
  );
});

t.test("Karpenter's reasons, lower-cased; any other is other", async (t) => {
  t.same(['Underutilized', 'Empty', 'Drifted', 'Unhealthy', 'Expired', ''].map(disruptionReasonLabel), [
    'underutilized',
    'empty',
    'drifted',
    'unhealthy',
    'other',
    'other',
  ]);
  const claim = (conditions: { type: string; status: string; reason?: string }[]) =>
    toNodeClaimView({ metadata: { name: 'c' }, status: { nodeName: 'n', conditions } });
  t.equal(claim([{ type: 'DisruptionReason', status: 'True', reason: 'Drifted' }]).disruptionReason, 'Drifted');
  t.equal(
    claim([{ type: 'DisruptionReason', status: 'False', reason: 'Drifted' }]).disruptionReason,
    undefined,
    'only while True',
  );
  t.equal(
    claim([{ type: 'Drifted', status: 'True', reason: 'AMIDrift' }]).disruptionReason,
    undefined,
    'not the Drifted condition',
  );
});

t.test('the counter: a mark, then the removal, counted once by the leader', async (t) => {
  let now = Date.parse('2026-12-03T10:00:00Z');
  const metrics = createMetrics();
  let current: OverlayView | undefined = overlay({ price: '0.00' });
  let counts = true;
  const counter = new DisruptionCounter({
    metrics,
    keys,
    overlay: (value) => (current && value === current.nameLabelValue ? current : undefined),
    counts: () => counts,
    now: () => now,
  });
  const values = async () =>
    Object.fromEntries(
      (await metrics.recordedDisruptions.get()).values
        .filter((v) => v.value > 0)
        .map((v) => [`${v.labels.reason} ${v.labels.overlay_state}`, v.value]),
    );
  t.equal((await metrics.recordedDisruptions.get()).values.length, 15, 'every reason and state has its series from 0');
  const node = (name: string, influenced = true): NodeView => ({
    name,
    labels: influenced
      ? { 'veneer.io/overlay-influenced': 'true', 'veneer.io/matching-overlay': RI }
      : { 'veneer.io/overlay-influenced': 'false' },
    told: toldOf(story()),
  });
  const claim = (nodeName: string, reason?: string) =>
    toNodeClaimView({
      metadata: { name: `${nodeName}-claim` },
      status: { nodeName, conditions: reason ? [{ type: 'DisruptionReason', status: 'True', reason }] : [] },
    });

  counter.claimSeen(claim('a', 'Underutilized'));
  counter.nodeGone(node('a'));
  t.same(await values(), {}, 'a follower counts nothing');

  counter.lead();
  counter.claimSeen(claim('b', 'Underutilized'));
  counter.nodeGone(node('b'));
  counter.nodeGone(node('b'));
  t.same(await values(), { 'underutilized counting': 1 }, 'marked, then removed: once');

  counter.claimSeen(claim('c', 'Drifted'));
  counter.claimGone(claim('c', 'Drifted'));
  current = overlay({ price: '0.01' });
  counter.nodeGone(node('c'));
  t.same(
    await values(),
    { 'underutilized counting': 1, 'drifted changed': 1 },
    'the NodeClaim gone first, then the node',
  );

  counter.claimSeen(claim('d', 'Underutilized'));
  counter.claimSeen(claim('d'));
  counter.nodeGone(node('d'));
  counter.nodeGone(node('e'));
  counter.claimSeen(claim('f', 'Empty'));
  counter.nodeGone(node('f', false));
  t.same(
    await values(),
    { 'underutilized counting': 1, 'drifted changed': 1 },
    'a mark cleared (an abandoned command), a node never marked, a record that names no overlay: none counted',
  );

  counter.claimSeen(claim('g', 'Unhealthy'));
  current = undefined;
  counter.nodeGone(node('g'));
  counter.claimSeen(claim('h', 'SomethingNew'));
  current = overlay({ price: '0.00' });
  counts = false;
  counter.nodeGone(node('h'));
  t.same(await values(), {
    'underutilized counting': 1,
    'drifted changed': 1,
    'unhealthy gone': 1,
    'other changed': 1,
  });

  counter.claimSeen(claim('i', 'Underutilized'));
  counter.claimGone(claim('i', 'Underutilized'));
  now += MARK_GRACE_MS + 1;
  counter.claimGone(claim('z'));
  counter.nodeGone(node('i'));
  counter.follow();
  counter.claimSeen(claim('j', 'Underutilized'));
  counter.nodeGone(node('j'));
  t.equal(
    Object.values(await values()).reduce((a, b) => a + b, 0),
    4,
    'a mark whose NodeClaim went longer ago than the grace is forgotten; a follower again counts nothing',
  );
});

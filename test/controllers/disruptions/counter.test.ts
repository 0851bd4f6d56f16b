// Recorded nodes that Karpenter's disruption removed, by reason and by what became of the overlay
// the record names (the engine's rule: test/engine/disruption/churn.test.ts), and the counter's
// bookkeeping of the two watches (a NodeClaim's DisruptionReason mark, then its Node's removal, in
// either order).
import t from 'tap';
import { toNodeClaimView, type NodeView, type OverlayView } from '../../../src/engine/index.ts';
import { toldOf } from '../../../src/engine/decided-node.ts';
import { createMetrics } from '../../../src/metrics.ts';
import { DisruptionCounter, MARK_GRACE_MS } from '../../../src/controllers/disruptions/counter.ts';
import { keys, overlay, RI, story } from '../../engine/disruption/recorded.ts';

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

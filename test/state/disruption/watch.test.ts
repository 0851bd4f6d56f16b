// What the watcher keeps of Karpenter's disruption (src/state/disruption/watch.ts): the marks on
// NodeClaims, kept after the NodeClaims are gone, for an hour and at most MAX_MARKS of them, the
// oldest dropped first. The watches themselves run against a real apiserver in
// test/apiserver/replacements.test.ts; here the marks come straight from a NodeClaim source.
import t from 'tap';
import { createLogger } from '../../../src/log.ts';
import { type NodeClaimView, toNodeClaimView } from '../../../src/engine/index.ts';
import type { KubeClient } from '../../../src/kube/client.ts';
import { DisruptionWatch, MARK_RETENTION_MS, MAX_MARKS } from '../../../src/state/disruption/watch.ts';

const T = Date.parse('2026-12-01T10:00:00Z');

function scene() {
  let now = T;
  let observe: (claim: NodeClaimView, seen: { order: number; added: boolean } | undefined) => void = () => {};
  const counter = { inc: () => {} };
  const watch = new DisruptionWatch(
    {
      // The watches are never started here: nothing calls the client.
      client: {} as KubeClient,
      metrics: { watchEvents: { tally: () => counter }, watchRestarts: counter },
      log: createLogger('silent'),
      now: () => now,
    },
    { subscribe: (listener) => (observe = listener), byName: () => undefined },
  );
  const mark = (name: string, markedAt: number, reason = 'Underutilized', seen?: { order: number; added: boolean }) =>
    observe(
      toNodeClaimView({
        metadata: { name, labels: { 'node.kubernetes.io/instance-type': 'm5.large' } },
        status: {
          nodeName: `node-${name}`,
          conditions: [
            { type: 'DisruptionReason', status: 'True', reason, lastTransitionTime: new Date(markedAt).toISOString() },
          ],
        },
      }),
      seen,
    );
  const created = (name: string, seen: { order: number; added: boolean } | undefined) =>
    observe(toNodeClaimView({ metadata: { name, creationTimestamp: new Date(now).toISOString() } }), seen);
  const names = () => watch.marksBetween(0, Number.MAX_SAFE_INTEGER).map((m) => m.nodeClaim);
  return { watch, mark, created, names, advance: (ms: number) => (now += ms) };
}

t.test('a mark is kept for an hour after it was made, then dropped as others come', async (t) => {
  const s = scene();
  s.mark('old', T);
  s.advance(MARK_RETENTION_MS - 1_000);
  s.mark('recent', T + MARK_RETENTION_MS - 1_000);
  t.same(s.names(), ['old', 'recent'], 'within the hour: both');
  s.advance(2_000);
  s.mark('new', T + MARK_RETENTION_MS + 1_000);
  t.same(s.names(), ['recent', 'new'], 'past the hour: the old one is gone');
  t.equal(s.watch.markCount, 2);
});

t.test('a mark seen again stays; one made again moves behind the others', async (t) => {
  const s = scene();
  s.mark('a', T);
  s.mark('b', T + 1_000);
  s.mark('a', T);
  t.same(s.names(), ['a', 'b'], 'the same mark again changes nothing');
  s.advance(2_000);
  s.mark('a', T + 2_000, 'Drifted');
  t.same(s.names(), ['b', 'a'], 'marked anew: now the latest');
  t.equal(s.watch.marksBetween(T + 2_000, T + 2_000)[0]?.reason, 'Drifted');
});

t.test(`at most ${MAX_MARKS} marks, the oldest dropped first`, async (t) => {
  const s = scene();
  for (let i = 0; i <= MAX_MARKS; i++) s.mark(`c${i}`, T);
  t.equal(s.watch.markCount, MAX_MARKS);
  const kept = s.names();
  t.equal(kept[0], 'c1', 'the first one made is the one dropped');
  t.equal(kept.at(-1), `c${MAX_MARKS}`);
});

t.test("the watch's order: a mark and a creation seen on it can be told apart within a second", async (t) => {
  const s = scene();
  s.mark('listed', T, 'Drifted');
  s.mark('a', T, 'Drifted', { order: 5, added: false });
  s.created('a-replacement', { order: 6, added: true });
  s.mark('b', T, 'Drifted', { order: 7, added: false });
  s.created('b-replacement', { order: 8, added: true });
  s.created('seen-in-a-list', undefined);
  s.created('a', { order: 9, added: false });
  const order = (name: string) => s.watch.marksBetween(T, T).find((m) => m.nodeClaim === name)?.order;
  t.equal(order('listed'), undefined, 'a mark found by a list has no order');
  t.same([order('a'), order('b')], [5, 7]);
  t.same(
    ['a-replacement', 'b-replacement', 'seen-in-a-list', 'a'].map((n) => s.watch.createdOrder(n)),
    [6, 8, undefined, undefined],
    'a creation is an ADDED event on the watch; a list or a later change says nothing of it',
  );
  s.mark('a', T, 'Drifted', { order: 12, added: false });
  t.equal(order('a'), 5, 'the same mark seen again keeps the order it was made in');
  s.advance(MARK_RETENTION_MS + 1_000);
  s.mark('late', T + MARK_RETENTION_MS + 1_000, 'Drifted', { order: 13, added: false });
  t.equal(s.watch.createdOrder('a-replacement'), undefined, 'creations are forgotten with the marks');
});

t.test('creations alone are forgotten too: a cluster with no disruption keeps none past the hour', async (t) => {
  const s = scene();
  s.created('first', { order: 1, added: true });
  s.advance(MARK_RETENTION_MS + 1_000);
  s.created('second', { order: 2, added: true });
  t.same([s.watch.createdOrder('first'), s.watch.createdOrder('second')], [undefined, 2]);
});

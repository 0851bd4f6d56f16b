// A replacement told from a provisioning launch by what Karpenter's disruption queue leaves: the
// marks on the nodes it disrupts, made just before it creates the replacement, and the
// DisruptionLaunching Event it publishes on the replacement once launched.
import t from 'tap';
import type { NodeClaimView } from '../../../src/engine/index.ts';
import {
  type DisruptionEvidence,
  type DisruptionMark,
  evidenceOfReading,
} from '../../../src/engine/disruption/evidence.ts';
import { LAUNCHING_EVENT_WAIT_MS, launchOrigin, MARK_WINDOW_MS } from '../../../src/engine/disruption/queue.ts';

const T = Date.parse('2026-12-01T10:00:00Z');
const mark = (nodeClaim: string, markedAt: number, reason = 'Underutilized'): DisruptionMark => ({
  nodeClaim,
  node: `node-${nodeClaim}`,
  reason,
  markedAt,
  labels: { 'node.kubernetes.io/instance-type': 'c6i.large' },
});
const claim = (name: string, createdAt: number | undefined = T): NodeClaimView => ({
  name,
  labels: {},
  ...(createdAt !== undefined ? { createdAt } : {}),
});

function evidence(
  marks: DisruptionMark[],
  launching: Record<string, string>,
  created: Record<string, number> = {},
): DisruptionEvidence {
  return {
    launching: (n) => launching[n],
    marksBetween: (from, to) => marks.filter((m) => m.markedAt >= from && m.markedAt <= to),
    replacementsCreatedBetween: (from, to, reason) =>
      Object.entries(launching)
        .filter(([n, r]) => r === reason && created[n] !== undefined && created[n]! >= from && created[n]! <= to)
        .map(([n]) => n),
  };
}

t.test('no marks, no Event: provisioning', async (t) => {
  t.same(launchOrigin(claim('a'), evidence([mark('old', T - 60_000)], {}), T + 5000), { kind: 'provisioned' });
});

t.test('the Event and the marks of its reason made just before: a replacement of those nodes', async (t) => {
  const marks = [
    mark('old-1', T - 1000),
    mark('old-2', T),
    mark('drifted', T, 'Drifted'),
    mark('long-ago', T - 60_000),
  ];
  const origin = launchOrigin(claim('new'), evidence(marks, { new: 'Underutilized' }, { new: T }), T + 5000);
  t.equal(origin.kind, 'replacement');
  t.same(
    origin.kind === 'replacement' ? origin.replaced.map((m) => m.nodeClaim) : [],
    ['old-1', 'old-2'],
    'only the marks of its reason, within the window',
  );
});

t.test('marks that can launch and no Event yet: waited for briefly, then a provisioning launch', async (t) => {
  const ev = evidence([mark('old', T)], {});
  const early = launchOrigin(claim('new'), ev, T + 3000);
  t.match(early, { kind: 'awaiting', until: T + LAUNCHING_EVENT_WAIT_MS });
  t.same(launchOrigin(claim('new'), ev, T + LAUNCHING_EVENT_WAIT_MS), { kind: 'provisioned' });
  t.ok(
    LAUNCHING_EVENT_WAIT_MS <= 20_000,
    'shorter than an instance takes to boot and register: the webhook still records the node inline',
  );
});

t.test('marks of commands that never launch hold nothing up', async (t) => {
  const emptiness = evidence([mark('empty-1', T - 1000, 'Empty'), mark('empty-2', T, 'Empty')], {});
  t.same(launchOrigin(claim('new'), emptiness, T + 500), { kind: 'provisioned' }, 'Emptiness only deletes');
  const mixed = evidence([mark('empty', T, 'Empty'), mark('under', T)], {});
  t.match(launchOrigin(claim('new'), mixed, T + 500), { kind: 'awaiting' }, 'a consolidation mark beside it still may');
  const replaced = launchOrigin(
    claim('new'),
    evidence([mark('empty', T, 'Empty'), mark('under', T)], { new: 'Underutilized' }),
    T + 500,
  );
  t.same(replaced.kind === 'replacement' ? replaced.replaced.map((m) => m.nodeClaim) : [], ['under']);
});

t.test('the Event without the marks it needs: unclear, not guessed', async (t) => {
  const origin = launchOrigin(
    claim('new'),
    evidence([mark('old', T - MARK_WINDOW_MS - 1000)], { new: 'Underutilized' }),
    T,
  );
  t.equal(origin.kind, 'unclear');
  const undated = launchOrigin(claim('new', undefined), evidence([], { new: 'Underutilized' }), T);
  t.equal(undated.kind, 'unclear');
});

t.test('two consolidation replacements in the same seconds: which replaced which is not known', async (t) => {
  const ev = evidence(
    [mark('a', T), mark('b', T)],
    { one: 'Underutilized', two: 'Underutilized' },
    { one: T, two: T + 1000 },
  );
  t.equal(launchOrigin(claim('one'), ev, T + 5000).kind, 'unclear');
  // Drift may replace one node by several: they share the nodes they replace.
  const drift = evidence([mark('a', T, 'Drifted')], { one: 'Drifted', two: 'Drifted' }, { one: T, two: T });
  t.equal(launchOrigin(claim('one'), drift, T + 5000).kind, 'replacement');
});

t.test('drift commands in quick succession: each replacement names its own command node, or none', async (t) => {
  const replacedOf = (o: ReturnType<typeof launchOrigin>) =>
    o.kind === 'replacement' ? { nodes: o.replaced.map((m) => m.nodeClaim), unclear: o.replacedUnclear } : o.kind;
  // Command a marks at T-4s and launches at T-3s; command b marks at T-2s and launches at T.
  const marks = [mark('a', T - 4000, 'Drifted'), mark('b', T - 2000, 'Drifted')];
  const launching = { ra: 'Drifted', rb: 'Drifted' };
  const created = { ra: T - 3000, rb: T };
  const ev = evidence(marks, launching, created);
  t.match(replacedOf(launchOrigin(claim('rb', T), ev, T + 1000)), { nodes: ['b'], unclear: undefined });
  t.match(
    replacedOf(launchOrigin(claim('ra', T - 3000), ev, T + 1000)),
    { nodes: ['a'], unclear: undefined },
    "the next command's mark, made after its creation, is not its own",
  );
  // Within the same second the order is not known.
  const tight = evidence([mark('a', T, 'Drifted'), mark('b', T, 'Drifted')], launching, { ra: T, rb: T });
  const o = launchOrigin(claim('ra', T), tight, T + 1000);
  t.match(replacedOf(o), { nodes: [], unclear: /2 nodes were marked Drifted.*1 other replacement/ });
  // A mark of the creation's own second may be this command's or the next one's.
  const near = evidence([mark('a', T - 3000, 'Drifted'), mark('b', T, 'Drifted')], launching, created);
  t.match(replacedOf(launchOrigin(claim('rb', T), near, T + 1000)), { nodes: [] });
  const alone = evidence([mark('a', T - 1000, 'Drifted')], { rb: 'Drifted' }, { rb: T });
  t.match(replacedOf(launchOrigin(claim('rb', T), alone, T + 1000)), { nodes: ['a'] }, 'one mark is its own');
});

t.test("drift commands within one second: the watch's order names each replacement's node", async (t) => {
  const replacedOf = (o: ReturnType<typeof launchOrigin>) =>
    o.kind === 'replacement' ? { nodes: o.replaced.map((m) => m.nodeClaim), unclear: o.replacedUnclear } : o.kind;
  // Three commands in one second, each a mark then a creation, seen on the NodeClaim watch in that order.
  const marks = [
    { ...mark('a', T, 'Drifted'), order: 10 },
    { ...mark('b', T, 'Drifted'), order: 12 },
    { ...mark('c', T, 'Drifted'), order: 14 },
  ];
  const launching = { ra: 'Drifted', rb: 'Drifted', rc: 'Drifted' };
  const orders: Record<string, number> = { ra: 11, rb: 13, rc: 15 };
  const ev = { ...evidence(marks, launching, { ra: T, rb: T, rc: T }), createdOrder: (n: string) => orders[n] };
  t.same(
    ['ra', 'rb', 'rc'].map((n) => replacedOf(launchOrigin(claim(n, T), ev, T + 1000))),
    [
      { nodes: ['a'], unclear: undefined },
      { nodes: ['b'], unclear: undefined },
      { nodes: ['c'], unclear: undefined },
    ],
  );
  // A mark found by a list (the watcher restarted) has no order: back to the timestamps, and no name.
  const listed = [{ ...mark('a', T, 'Drifted') }, marks[1]!, marks[2]!];
  const partly = { ...evidence(listed, launching, { ra: T, rb: T, rc: T }), createdOrder: (n: string) => orders[n] };
  t.match(replacedOf(launchOrigin(claim('rb', T), partly, T + 1000)), { nodes: [], unclear: /3 nodes were marked/ });
  const unseen = { ...ev, createdOrder: () => undefined };
  t.match(
    replacedOf(launchOrigin(claim('rb', T), unseen, T + 1000)),
    { nodes: [] },
    'nor where the creation was listed',
  );
});

t.test('a reading of the cluster: marks there now, and what the records tell of nodes gone since', async (t) => {
  const replacement: NodeClaimView = { name: 'new', labels: {}, createdAt: T };
  const stillMarked: NodeClaimView = {
    name: 'other',
    labels: { 'node.kubernetes.io/instance-type': 'r6i.large' },
    createdAt: T - 600_000,
    disruptionReason: 'Drifted',
    disruptionMarkedAt: T - 1000,
  };
  const story = {
    influenced: true,
    overlay: 'ri',
    decidedBy: 'webhook' as const,
    evaluatedAt: '',
    labeledAt: '',
    basis: 'exact' as const,
    characteristicsFrom: 'node+nodeclaim' as const,
    labels: [],
    effect: {
      verdict: 'replacement' as const,
      disruption: {
        reason: 'Underutilized',
        replaced: [
          {
            nodeClaim: 'old',
            node: 'old-node',
            instanceType: 'c6i.large',
            capacityType: 'on-demand',
            zone: 'z',
            nodePool: 'od',
          },
        ],
        replacedCount: 1,
      },
    },
  };
  const ev = evidenceOfReading({
    claims: [replacement, stillMarked],
    records: [{ nodeClaim: replacement, story }],
  });
  t.equal(ev.launching('new'), 'Underutilized', 'the record says its NodeClaim is a replacement');
  const origin = launchOrigin(replacement, ev, T + 60_000);
  t.match(origin, {
    kind: 'replacement',
    replaced: [
      {
        nodeClaim: 'old',
        node: 'old-node',
        labels: {
          'node.kubernetes.io/instance-type': 'c6i.large',
          'karpenter.sh/capacity-type': 'on-demand',
          'karpenter.sh/nodepool': 'od',
        },
      },
    ],
  });
  t.same(
    ev
      .marksBetween(T - 2000, T)
      .map((m) => m.nodeClaim)
      .sort(),
    ['old', 'other'],
    'a NodeClaim marked now counts as it is',
  );
  const live = evidenceOfReading({ claims: [replacement], records: [], launching: new Map([['new', 'Drifted']]) });
  t.equal(live.launching('new'), 'Drifted', 'the Events read live');
});

t.test(
  "a reading's ConsolidationCandidate and ConsolidationApproved Events, as the watcher's caches answer",
  async (t) => {
    const figures = { score: 0.85, threshold: 0.5, k: 2, savingsPct: 33.3, disruptionPct: 39.3 };
    const ev = evidenceOfReading({
      claims: [],
      records: [],
      candidates: [
        { nodeClaim: 'a', at: T - 30_000 },
        { nodeClaim: 'a', at: T - 10_000 },
        { nodeClaim: 'b', at: T - 5_000 },
      ],
      approvals: [
        { object: 'NodeClaim/a', at: T - 20_000, figures },
        { object: 'NodePool/od', at: T - 20_000, figures },
      ],
    });
    t.equal(ev.candidateAt?.('a', T), T - 10_000, 'the latest no later than asked');
    t.equal(ev.candidateAt?.('a', T - 15_000), T - 30_000);
    t.equal(ev.candidateAt?.('a', T - 60_000), undefined);
    t.equal(ev.candidateAt?.('c', T), undefined, 'none on that NodeClaim');
    t.same(ev.approvalsBetween?.('NodeClaim', 'a', T - 60_000, T), [{ at: T - 20_000, figures }]);
    t.same(ev.approvalsBetween?.('NodePool', 'od', T - 10_000, T), [], 'outside the window');
    const files = evidenceOfReading({ claims: [], records: [] });
    t.equal(files.candidateAt, undefined, 'from files, no Event read: the window the marks give, as before');
    t.equal(files.approvalsBetween, undefined);
  },
);

// A replacement told from a provisioning launch by what Karpenter's disruption queue leaves: the
// marks on the nodes it disrupts, made just before it creates the replacement, and the
// DisruptionLaunching Event it publishes on the replacement once launched.
import t from 'tap';
import {
  type DisruptionEvidence,
  type DisruptionMark,
  evidenceOfReading,
  LAUNCHING_EVENT_WAIT_MS,
  launchingReason,
  launchOrigin,
  MARK_WINDOW_MS,
  type NodeClaimView,
} from '../../src/engine/index.ts';

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
  t.equal(launchingReason('Launching NodeClaim: Underutilized'), 'Underutilized');
  t.equal(launchingReason('Waiting on readiness to continue disruption'), undefined);
});

t.test('marks and no Event yet: waited for, then unclear', async (t) => {
  const ev = evidence([mark('old', T)], {});
  const early = launchOrigin(claim('new'), ev, T + 3000);
  t.match(early, { kind: 'awaiting', until: T + LAUNCHING_EVENT_WAIT_MS });
  const late = launchOrigin(claim('new'), ev, T + LAUNCHING_EVENT_WAIT_MS);
  t.equal(late.kind, 'unclear');
  t.match(late.kind === 'unclear' ? late.reason : '', /no DisruptionLaunching Event/);
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

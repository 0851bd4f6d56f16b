// Balanced consolidation (consolidationPolicy: Balanced): Karpenter approves a command only when
// (savings / pool cost) / (disruption / pool disruption) >= 1/2. An RI at 0.00 on m5.large makes
// replacing an r6i.large ($0.126/h) save all of it; without the RI the cheapest option is c6i.large
// ($0.085/h), which saves a third as much. Whether Karpenter would still approve that is read from
// its ConsolidationApproved Event's rounded figures, the pool's NodeClaims and the prices.
import t from 'tap';
import {
  type ConsolidationApproval,
  type DisruptionEvidence,
  type DisruptionMark,
  type Effect,
  OverlayIndex,
  type PoolOffering,
  toNodePoolView,
} from '../../../src/engine/index.ts';
import { parseApproval } from '../../../src/engine/disruption/events.ts';
import { labelsOf as poolLabels, policy, prices, RI, replacementDecided, T, ZONE } from './decided-replacement.ts';

const labelsOf = (type: string, pool = 'od') => poolLabels(type, pool);

interface Scene {
  /** The replaced NodePool's policy. */
  policy?: string;
  /** ConsolidationApproved messages, dated T-20 s, on the replaced NodeClaim (one node) or the NodePool (several). */
  approvals?: string[];
  /** The pool's NodeClaims by type, all in ZONE on-demand. */
  pool?: Record<string, number>;
  /** When the RI was created (default two hours before). */
  riSince?: number;
  replaced?: string[];
  /** When the approvals were published (default T-20 s). */
  approvedAt?: number;
}

function effectOf(s: Scene): Effect | undefined {
  const index = new OverlayIndex({ policy, retentionMs: Number.POSITIVE_INFINITY });
  const pools = [
    toNodePoolView({
      metadata: { name: 'od' },
      spec: { disruption: { consolidationPolicy: s.policy ?? 'Balanced' } },
    }),
  ];
  index.nodePools.replaceAll(pools, T - 4 * 3_600_000);
  index.replaceAll([], T - 4 * 3_600_000);
  index.observe(RI, s.riSince ?? T - 2 * 3_600_000);
  index.markSynced(T - 4 * 3_600_000);
  const replaced = s.replaced ?? ['r6i.large'];
  const marks: DisruptionMark[] = replaced.map((type, i) => ({
    nodeClaim: `old-${i}`,
    node: `old-node-${i}`,
    reason: 'Underutilized',
    markedAt: T - 1000,
    labels: labelsOf(type),
  }));
  const approvals: ConsolidationApproval[] = (s.approvals ?? []).map((m) => ({
    at: s.approvedAt ?? T - 20_000,
    figures: parseApproval(m)!,
  }));
  const evidence: DisruptionEvidence = {
    launching: (name) => (name === 'new-claim' ? 'Underutilized' : undefined),
    marksBetween: (from, to) => marks.filter((m) => m.markedAt >= from && m.markedAt <= to),
    replacementsCreatedBetween: () => ['new-claim'],
    approvalsBetween: (kind, name, from, to) =>
      (kind === (marks.length === 1 ? 'NodeClaim' : 'NodePool') && name === (marks.length === 1 ? 'old-0' : 'od')
        ? approvals
        : []
      ).filter((a) => a.at >= from && a.at <= to),
  };
  const offerings: PoolOffering[] = Object.entries(s.pool ?? { 'r6i.large': 4 }).map(([type, count]) => ({
    instanceType: type,
    zone: ZONE,
    capacityType: 'on-demand',
    count,
  }));
  return replacementDecided(
    {
      labels: labelsOf('m5.large'),
      requirements: [
        { key: 'node.kubernetes.io/instance-type', operator: 'In', values: ['m5.large', 'c6i.large'] },
        { key: 'karpenter.sh/capacity-type', operator: 'In', values: ['on-demand'] },
      ],
    },
    {
      prices,
      zonesOf: () => new Set([ZONE]),
      disruption: evidence,
      poolOfferings: (pool: string) => (pool === 'od' ? offerings : undefined),
    },
    index,
  );
}

t.test('approved with the RI at a score Karpenter would not reach without it: replacement', async (t) => {
  // Four r6i.large: the pool costs $0.504/h; savings 25% of it, a quarter of its disruption.
  const e = effectOf({ approvals: ['score 1.00 >= threshold 0.50 (k: 2, savings 25.0%, disruption 25.0%)'] });
  t.equal(e?.verdict, 'replacement');
  t.match(e?.reason, /Balanced consolidation would reject it: NodePool od's score 0\.32\d to 0\.32\d against 0\.500/);
  t.equal(e?.disruption?.replacedWithout, false);
  t.same(e?.overlays, [RI.name]);
});

t.test('a score high enough either way: the launch replay answers', async (t) => {
  const e = effectOf({ approvals: ['score 2.50 >= threshold 0.50 (k: 2, savings 25.0%, disruption 10.0%)'] });
  t.not(e?.verdict, 'replacement');
  t.not(e?.verdict, 'unknown');
  t.equal(e?.disruption?.replacedWithout, true);
});

t.test("where the figures' rounding straddles the threshold: unknown (balanced)", async (t) => {
  // Without the RI: $0.041/h of $0.504/h against 16.3% of the disruption, 0.50 give or take the rounding.
  const e = effectOf({ approvals: ['score 1.53 >= threshold 0.50 (k: 2, savings 25.0%, disruption 16.3%)'] });
  t.equal(e?.verdict, 'unknown');
  t.equal(e?.reasonCode, 'balanced');
  t.match(e?.reason, /leaves open/);
});

t.test('without an approval in the window: unknown (balanced), except where it cannot matter', async (t) => {
  const e = effectOf({});
  t.equal(e?.reasonCode, 'balanced');
  t.match(e?.reason, /no ConsolidationApproved Event of this command was seen \(between /);
  t.not(effectOf({ policy: 'WhenEmptyOrUnderutilized' })?.verdict, 'unknown', 'a pool that does not score');
  // Two r6i.large replaced at once, of eight, holding 40% of the pool's disruption: the command
  // stands by price without the RI ($0.167/h saved), and Balanced decides by the NodePool's Event.
  const multi = effectOf({
    replaced: ['r6i.large', 'r6i.large'],
    pool: { 'r6i.large': 8 },
    approvals: ['score 0.63 >= threshold 0.50 (k: 2, savings 25.0%, disruption 40.0%)'],
  });
  t.equal(multi?.verdict, 'replacement', `several nodes: the NodePool's Event (${multi?.reason})`);
  t.equal(multi?.disruption?.replacedCount, 2);
});

t.test("the pool's own nodes the RI prices count in its cost", async (t) => {
  // Two r6i.large and two m5.large at 0.00: $0.252/h with the RI, $0.444/h without.
  const approval = 'score 2.00 >= threshold 0.50 (k: 2, savings 50.0%, disruption 25.0%)';
  const e = effectOf({ pool: { 'r6i.large': 2, 'm5.large': 2 }, approvals: [approval] });
  t.equal(e?.verdict, 'replacement', 'without the RI the pool costs more: 9% saved, not 16%');
  t.match(e?.reason, /score 0\.36\d to 0\.37\d/);
  // The RI came 10 minutes ago: ClusterCost may hold m5.large's price from before it (hourly refresh).
  const fresh = effectOf({ pool: { 'r6i.large': 2, 'm5.large': 2 }, approvals: [approval], riSince: T - 600_000 });
  t.equal(fresh?.reasonCode, 'balanced');
  t.match(fresh?.reason, /score 0\.36\d to 0\.65\d/);
});

t.test('only approvals within the window count, and those must agree', async (t) => {
  const rejecting = 'score 1.00 >= threshold 0.50 (k: 2, savings 25.0%, disruption 25.0%)';
  // The window: from 3 min (single-node consolidation's timeout) before the validation to its start.
  const old = effectOf({ approvals: [rejecting], approvedAt: T - 4 * 60_000 });
  t.equal(old?.reasonCode, 'balanced', "deduplicated by Karpenter for 2 min: an older Event is another command's");
  const both = effectOf({
    approvals: [rejecting, 'score 2.50 >= threshold 0.50 (k: 2, savings 25.0%, disruption 10.0%)'],
  });
  t.equal(both?.reasonCode, 'balanced');
  t.match(both?.reason, /disagree/);
});

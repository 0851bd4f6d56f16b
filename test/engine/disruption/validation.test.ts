// A consolidation is priced when Karpenter computes it, 15 s or more before it marks the nodes
// and creates the replacement (pkg/controllers/disruption: validation re-simulates, it does not
// price again). The replacement's effect is judged with the overlays of that moment, dated by the
// candidates' ConsolidationCandidate Events, or bounded by the computation's timeout without them.
import t from 'tap';
import {
  type DisruptionEvidence,
  type DisruptionMark,
  type Effect,
  OverlayIndex,
  toNodePoolView,
} from '../../../src/engine/index.ts';
import {
  COMPUTE_MAX_MS,
  decisionWindow,
  EVENT_DEDUPE_MS,
  effectAtDecision,
  momentsWithin,
  VALIDATION_MS,
} from '../../../src/engine/disruption/validation.ts';
import { labelsOf, policy, prices, RI, replacementDecided, T, ZONE } from './decided-replacement.ts';

const mark = (markedAt: number, nodeClaim = 'old-claim'): DisruptionMark => ({
  nodeClaim,
  node: 'old',
  reason: 'Underutilized',
  markedAt,
  labels: labelsOf('c6i.large', 'on-demand'),
});

/** The RI overlay in force over `[from, to)`; the NodePool since long before. */
function indexWith(from: number, to?: number): OverlayIndex {
  const index = new OverlayIndex({ policy, retentionMs: Number.POSITIVE_INFINITY });
  index.nodePools.replaceAll([toNodePoolView({ metadata: { name: 'on-demand' } })], T - 3_600_000);
  index.replaceAll([], T - 3_600_000);
  index.observe(RI, from);
  if (to !== undefined) index.forget(RI.name, to);
  index.markSynced(T - 3_600_000);
  return index;
}

/** The replacement of c6i.large by m5.large (the one option the RI at 0.00 leaves), created at T. */
function replacementEffect(index: OverlayIndex, candidateAt?: DisruptionEvidence['candidateAt']): Effect | undefined {
  const marks = [mark(T - 1000)];
  const evidence: DisruptionEvidence = {
    launching: (name) => (name === 'new-claim' ? 'Underutilized' : undefined),
    marksBetween: (from, to) => marks.filter((m) => m.markedAt >= from && m.markedAt <= to),
    replacementsCreatedBetween: () => ['new-claim'],
    ...(candidateAt ? { candidateAt } : {}),
  };
  return replacementDecided(
    {
      labels: labelsOf('m5.large', 'on-demand'),
      requirements: [
        { key: 'node.kubernetes.io/instance-type', operator: 'In', values: ['m5.large'] },
        { key: 'karpenter.sh/capacity-type', operator: 'In', values: ['on-demand'] },
        { key: 'karpenter.k8s.aws/instance-family', operator: 'In', values: ['m5', 'c6i', 'r6i'] },
      ],
    },
    { prices, zonesOf: () => new Set([ZONE]), disruption: evidence },
    index,
  );
}

t.test('the window: after the candidates Event, at least the validation before the marks', async (t) => {
  const marks = [mark(T), mark(T - 1000, 'other')];
  const end = T - 1000 - VALIDATION_MS + 1000;
  t.same(decisionWindow(marks, undefined), { from: end - COMPUTE_MAX_MS, to: end, told: false });
  const events: Record<string, number[]> = { 'old-claim': [T - 60_000, T - 17_000], other: [T - 18_000, T - 2000] };
  const candidateAt = (name: string, notAfter: number) => events[name]?.filter((x) => x <= notAfter).at(-1);
  t.same(
    decisionWindow(marks, candidateAt),
    { from: T - 17_000, to: end, told: true },
    "the latest Event before the validation: an Event after it is another pass's",
  );
  t.equal(decisionWindow([], candidateAt), undefined);
});

t.test(
  "the window: a computation two minutes after a candidate's latest Event would have published another",
  async (t) => {
    const marks = [mark(T), mark(T, 'other')];
    const end = T - VALIDATION_MS + 1000;
    const at = (events: Record<string, number>) => (name: string) => events[name];
    t.same(
      decisionWindow(marks, at({ 'old-claim': T - 170_000, other: T - 160_000 })),
      { from: T - 160_000, to: T - 170_000 + EVENT_DEDUPE_MS + 1000, told: true },
      "the earliest of the latest Events bounds it, by the dedupe and the timestamp's second",
    );
    t.same(
      decisionWindow(marks, at({ 'old-claim': T - 40_000 })),
      { from: T - 40_000, to: end, told: true },
      'within two minutes of the marks: the validation bounds it',
    );
    t.same(
      decisionWindow(marks, at({ 'old-claim': T - 300_000, other: T - 100_000 })),
      { from: T - 100_000, to: end, told: true },
      'Events further apart than the dedupe are not all of this command: no bound from them',
    );
  },
);

t.test('one moment per set of overlays in force within the window', async (t) => {
  const index = indexWith(T - 20_000, T - 5000);
  const any = () => true;
  t.same(momentsWithin(index, { from: T - 30_000, to: T - 14_000, told: true }, any), [T - 30_000, T - 20_000]);
  t.same(momentsWithin(index, { from: T - 19_000, to: T - 14_000, told: true }, any), [T - 19_000]);
  t.same(
    momentsWithin(index, { from: T - 30_000, to: T - 14_000, told: true }, (m) => m >= T - 20_000),
    [T - 20_000],
    'a moment whose overlays would annotate the NodeClaim otherwise is not the one',
  );
  t.same(
    momentsWithin(index, { from: T - 30_000, to: T - 14_000, told: true }, () => false),
    [T - 30_000, T - 20_000],
    'none fits: none is ruled out',
  );
});

t.test('an overlay deleted while Karpenter validated still decided the replacement', async (t) => {
  // Computed at T-20 s, validated, marked at T-1 s, created at T; the RI went at T-5 s.
  const index = indexWith(T - 3_600_000, T - 5000);
  const candidateAt = (name: string) => (name === 'old-claim' ? T - 20_000 : undefined);
  const e = replacementEffect(index, candidateAt);
  t.equal(e?.verdict, 'replacement', 'judged with the RI Karpenter priced with');
  t.same(e?.overlays, [RI.name]);
  const without = replacementEffect(index);
  t.equal(
    without?.verdict,
    'replacement',
    'without the Event too: the RI went after the last moment Karpenter can have priced at',
  );
});

t.test('an overlay created just before the decision: the moments before it do not fit', async (t) => {
  const index = indexWith(T - 30_000);
  t.equal(replacementEffect(index)?.verdict, 'replacement');
});

t.test('moments that fit and disagree: unknown, with both named', async (t) => {
  const fits = (verdict: Effect['verdict']): Effect => ({ verdict });
  const window = { from: T - 40_000, to: T - 14_000, told: false };
  const misfit: Effect = { verdict: 'unknown', reasonCode: 'replaced-prices', reason: 'x' };
  t.equal(
    effectAtDecision(window, [
      { at: T - 40_000, effect: misfit },
      { at: T - 30_000, effect: fits('replacement') },
    ]).verdict,
    'replacement',
  );
  const both = effectAtDecision(window, [
    { at: T - 40_000, effect: fits('none') },
    { at: T - 30_000, effect: fits('replacement') },
  ]);
  t.equal(both.reasonCode, 'decision-moment');
  t.match(both.reason, /no ConsolidationCandidate Event seen/);
  t.equal(
    effectAtDecision(window, [
      { at: T - 40_000, effect: misfit },
      { at: T - 30_000, effect: misfit },
    ]),
    misfit,
    'no moment fits: the latest says why',
  );
});

t.test(
  "moments that fit with one verdict and different figures: the verdict, and the story says they are one moment's",
  async (t) => {
    const window = { from: T - 40_000, to: T - 14_000, told: true };
    const story = (priceWith: number) => ({
      reason: 'Underutilized',
      replaced: [{ nodeClaim: 'old', price: { with: priceWith, without: 0.17 } }],
      replacedCount: 1,
      price: { with: priceWith, without: 0.17 },
      savings: priceWith,
      cheaperWithout: 0,
      replacedWithout: false,
    });
    const at = (t: number, verdict: Effect['verdict'], priceWith: number) => ({
      at: t,
      effect: { verdict, disruption: story(priceWith) } as Effect,
    });
    const two = effectAtDecision(window, [at(T - 40_000, 'replacement', 0.085), at(T - 30_000, 'replacement', 0.0425)]);
    t.equal(two.verdict, 'replacement');
    t.equal(two.disruption?.moments, 2, 'two moments fit');
    t.equal(two.disruption?.price?.with, 0.0425, "the figures are the latest moment's");
    const same = effectAtDecision(window, [at(T - 40_000, 'replacement', 0.085), at(T - 30_000, 'replacement', 0.085)]);
    t.equal(same.disruption?.moments, undefined, 'the same figures at each: nothing to say');
    const split = effectAtDecision(window, [at(T - 40_000, 'none', 0.085), at(T - 30_000, 'replacement', 0.0425)]);
    t.equal(split.reasonCode, 'decision-moment');
    t.same(
      split.disruption,
      { reason: 'Underutilized', replaced: [{ nodeClaim: 'old' }], replacedCount: 1 },
      "an abstention keeps what the command is, not a moment's prices or conclusions",
    );
  },
);

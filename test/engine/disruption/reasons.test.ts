// Karpenter's disruption reasons, spelled once (src/engine/disruption/reasons.ts): the metrics'
// labels, and what each reason tells of the commands it is written by.
import t from 'tap';
import { toNodeClaimView } from '../../../src/engine/index.ts';
import { DISRUPTION_REASONS, reasonOf, sameReason } from '../../../src/engine/disruption/reasons.ts';

t.test("Karpenter's reasons, lower-cased; any other is other", async (t) => {
  t.same(
    ['Underutilized', 'Empty', 'Drifted', 'Unhealthy', 'Expired', ''].map((r) => reasonOf(r).label),
    ['underutilized', 'empty', 'drifted', 'unhealthy', 'other', 'other'],
  );
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

t.test('what each reason tells of its commands, in any casing', async (t) => {
  t.same(
    ['Underutilized', 'underutilized', 'Empty', 'Drifted', 'Unhealthy', 'Expired'].map((r) => {
      const { name, launches, method } = reasonOf(r);
      return [name, launches, method];
    }),
    [
      ['Underutilized', 'one-for-all', 'consolidation'],
      ['Underutilized', 'one-for-all', 'consolidation'],
      ['Empty', 'none', 'launch'],
      ['Drifted', 'one-node-a-command', 'launch'],
      ['Unhealthy', 'one-node-a-command', 'launch'],
      ['Expired', 'unknown', 'launch'],
    ],
    'a reason the watcher does not know keeps its name and is judged as the launch it is',
  );
  t.same(
    DISRUPTION_REASONS.filter((label) => label !== 'other').map((label) => reasonOf(label).label),
    DISRUPTION_REASONS.filter((label) => label !== 'other'),
    "every label but `other` is a reason's own",
  );
  t.ok(sameReason('Drifted', 'drifted'));
  t.notOk(sameReason('Drifted', 'Empty'));
});

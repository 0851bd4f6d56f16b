// The Events of Karpenter's disruption the watcher reads, as Karpenter formats them
// (pkg/controllers/disruption/events.go): DisruptionLaunching's reason, ConsolidationApproved's figures.
import t from 'tap';
import { launchingReason, parseApproval } from '../../../src/engine/disruption/events.ts';

t.test("DisruptionLaunching's reason", async (t) => {
  t.equal(launchingReason('Launching NodeClaim: Underutilized'), 'Underutilized');
  t.equal(launchingReason('Launching NodeClaim: Drifted '), 'Drifted', 'trimmed');
  t.equal(launchingReason('Waiting on readiness to continue disruption'), undefined);
  t.equal(launchingReason(undefined), undefined);
});

t.test("ConsolidationApproved's figures, as Karpenter formats them", async (t) => {
  t.same(parseApproval('score 1.53 >= threshold 0.50 (k: 2, savings 25.0%, disruption 16.3%)'), {
    score: 1.53,
    threshold: 0.5,
    k: 2,
    savingsPct: 25,
    disruptionPct: 16.3,
  });
  t.equal(
    parseApproval('(combined from similar events): score 0.71 >= threshold 0.50 (k: 2, savings 3.2%, disruption 4.5%)')
      ?.score,
    0.71,
    "client-go's aggregate of similar Events",
  );
  t.equal(parseApproval('Consolidation candidate: replace (savings: $0.05)'), undefined);
  t.equal(parseApproval('score +Inf >= threshold 0.50 (k: 2, savings 1.0%, disruption 0.0%)'), undefined);
});

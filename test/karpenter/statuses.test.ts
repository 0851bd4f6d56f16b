// Real Karpenter with its KWOK provider (kit/karpenter.ts) judges the overlays: its own statuses,
// the watcher's count of them and `report`, against the judge (test/support/overlay-statuses.ts;
// the same on AWS: test/aws/statuses.test.ts). (What Karpenter compares an overlay with, on its own
// nodes: test/karpenter/compares.test.ts.)
import t from 'tap';
import { KARPENTER_VERSION, REGION, startKarpenterWithWatcher } from '../../kit/karpenter.ts';
import { kwokJudgeCase } from '../judges/kwok-judge.ts';
import { overlayStatuses } from '../support/overlay-statuses.ts';

t.setTimeout(240_000);
const env = await startKarpenterWithWatcher();
t.teardown(env.stop);
overlayStatuses(t, env, {
  provider: 'kwok',
  region: REGION,
  judgeVersion: KARPENTER_VERSION,
  judgeCase: (overlays) => kwokJudgeCase(env.karpenter.catalog, env.karpenter.nodePools, overlays),
  restrictedKey: 'karpenter.kwok.sh/instance-generation',
  restrictedRefusedBy: 'karpenter',
  judgeAcceptsRestrictedKey: true,
});

// The small world the engine tests of a replacement decided through `decide` share: one zone,
// m5.large, c6i.large and r6i.large at their on-demand list prices, Veneer's RI overlay for
// m5.large at 0.00, and the engine's settings (validation.test.ts, balanced.test.ts).
import {
  decide,
  type Effect,
  type EngineSettings,
  type LaunchKnowledge,
  type OverlayIndex,
  parseSelector,
  type PriceBook,
  recordKeys,
  toNodeClaimView,
  toNodeView,
  toOverlayView,
} from '../../../src/engine/index.ts';
import { instanceLabels, reservedInstance } from '../../../kit/veneer.ts';

export const T = Date.parse('2026-12-01T10:00:00Z');
export const ZONE = 'us-east-1a';
const OD: Record<string, number> = { 'm5.large': 0.096, 'c6i.large': 0.085, 'r6i.large': 0.126 };
export const prices: PriceBook = {
  source: 'test',
  asOf: 0,
  region: 'us-east-1',
  hasSpot: true,
  onDemand: (x) => OD[x],
  spot: () => undefined,
  instanceTypes: () => Object.keys(OD),
};
export const settings: EngineSettings = { keys: recordKeys('veneer.io'), gracePeriodMs: 60_000, provider: 'auto' };
export const policy = { selector: parseSelector('app.kubernetes.io/managed-by=veneer'), requireOverlayReady: false };
export const RI = toOverlayView(reservedInstance('m5.large', 'us-east-1'));
export const iso = (ms: number) => new Date(ms).toISOString();
/** An on-demand node's labels of `type` in `pool`, as Karpenter labels its NodeClaim. */
export const labelsOf = (type: string, pool: string) => ({
  ...instanceLabels(type, ZONE),
  'karpenter.sh/capacity-type': 'on-demand',
  'karpenter.sh/nodepool': pool,
});

/**
 * The replacement `new` (its NodeClaim `new-claim` created at T, its node 5 s later, registered),
 * launched as `labels` with `requirements` as Karpenter writes them, decided at T+10 s
 * with `launch`: its effect, or undefined where nothing was decided.
 */
export function replacementDecided(
  o: { labels: Record<string, string>; requirements: { key: string; operator: string; values: string[] }[] },
  launch: LaunchKnowledge,
  index: OverlayIndex,
): Effect | undefined {
  const claim = toNodeClaimView({
    metadata: {
      name: 'new-claim',
      labels: o.labels,
      annotations: { 'karpenter.sh/price-overlay-applied': 'true' },
      creationTimestamp: iso(T),
    },
    spec: {
      nodeClassRef: { group: 'karpenter.k8s.aws', kind: 'EC2NodeClass', name: 'default' },
      requirements: o.requirements,
    },
    status: { providerID: `aws:///${ZONE}/i-new`, nodeName: 'new' },
  });
  const node = toNodeView({
    metadata: {
      name: 'new',
      creationTimestamp: iso(T + 5000),
      labels: { ...o.labels, 'karpenter.sh/registered': 'true' },
    },
    spec: { providerID: `aws:///${ZONE}/i-new` },
  });
  const d = decide({ node, nodeClaim: claim, now: T + 10_000, decidedBy: 'reconciler', launch }, index, settings);
  return d.outcome === 'influenced' || d.outcome === 'not-influenced' ? d.effect : undefined;
}

// The small world the engine tests of a replacement decided through `decide` share: one zone,
// m5.large, c6i.large and r6i.large at their on-demand list prices, Veneer's RI overlay for
// m5.large at 0.00, and the engine's settings (validation.test.ts, balanced.test.ts).
import {
  type EngineSettings,
  parseSelector,
  type PriceBook,
  recordKeys,
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

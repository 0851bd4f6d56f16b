// A recorded node's overlay and the story its record keeps, as the churn (churn.test.ts) and the
// counter of recorded disruptions (test/controllers/disruptions/counter.test.ts) read them: one RI
// on m5.xlarge, its terms changed as a test needs.
import { recordKeys, toOverlayView } from '../../../src/engine/index.ts';

export const keys = recordKeys('veneer.io');
export const RI = 'cost-aware-ri-m5.xlarge-us-west-2';

export const overlay = (o: { price?: string; priceAdjustment?: string; weight?: number; deleting?: boolean } = {}) =>
  toOverlayView({
    metadata: { name: RI, ...(o.deleting ? { deletionTimestamp: '2026-12-03T10:00:00Z' } : {}) },
    spec: {
      weight: o.weight ?? 30,
      ...(o.price !== undefined ? { price: o.price } : {}),
      ...(o.priceAdjustment !== undefined ? { priceAdjustment: o.priceAdjustment } : {}),
      requirements: [{ key: 'node.kubernetes.io/instance-type', operator: 'In', values: ['m5.xlarge'] }],
    },
  });

/** The record's decision annotation, with the overlay's terms at the launch. */
export const story = (o: { weight?: number; price?: string; priceAdjustment?: string; overlay?: string } = {}) =>
  JSON.stringify({
    influenced: true,
    overlay: o.overlay ?? RI,
    weight: o.weight ?? 30,
    ...(o.price !== undefined ? { price: o.price } : { price: '0.00' }),
    ...(o.priceAdjustment !== undefined ? { priceAdjustment: o.priceAdjustment } : {}),
    decidedBy: 'webhook',
    evaluatedAt: '2026-12-03T10:00:00Z',
    labeledAt: '2026-12-03T10:00:00Z',
    basis: 'exact',
    characteristicsFrom: 'node+nodeclaim',
    labels: [],
  });

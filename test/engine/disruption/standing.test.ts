// Whether a command stands without the selected overlays, and what its cheapest option can cost
// there (Balanced scoring reads the savings): the options surely left bound it above, the types
// Karpenter cut by price with the overlays that the pods might fit bound it below.
import t from 'tap';
import { standsWithout, type WithoutInput } from '../../../src/engine/disruption/standing.ts';
import type { CutType } from '../../../src/engine/disruption/cut-options.ts';
import { cheapestOffering } from '../../../src/engine/disruption/prices.ts';
import type { PricedCandidate } from '../../../src/engine/effect/worlds.ts';

const ZONE = 'us-east-1a';
const reqs = { capacityTypes: new Set(['on-demand']), zones: new Set([ZONE]) };
const priced = (name: string, price: number): PricedCandidate => ({
  type: { name, labels: { 'node.kubernetes.io/instance-type': name } },
  offerings: [{ capacityType: 'on-demand', zone: ZONE, list: price, price }],
  overlays: [],
});
/** A type the price filter cut with the overlays (an overlay priced it up to $0.2/h) that undercuts without them. */
const cut = (name: string, without: number, fits: boolean): CutType => ({
  type: priced(name, without).type,
  with: priced(name, 0.2),
  without: priced(name, without),
  fits,
});

/** m5.large, priced 0.00 by an RI, replaces a $0.192/h node; without the RI it lists at $0.096/h. */
const input = (cutTypes: readonly CutType[]): WithoutInput => ({
  listed: { with: [priced('m5.large', 0)], without: [priced('m5.large', 0.096)] },
  rules: { with: { total: 0.192, reqs, needed: 1 }, without: { total: 0.192, reqs, needed: 1 } },
  candidateCutTypes: [],
  catalogCutTypes: () => cutTypes,
  truncated: false,
  cheapest: (c) => cheapestOffering(c, reqs),
});

t.test('a cut type the pods are shown to fit is an option without the overlays: it sets the cheapest', async (t) => {
  t.same(standsWithout(input([cut('m5a.large', 0.086, true)])), { stands: true, cheapest: { lo: 0.086, hi: 0.086 } });
  t.same(
    standsWithout(input([cut('m5a.large', 0.086, true), cut('t3.medium', 0.0416, false)])),
    { stands: true, cheapest: { lo: 0.0416, hi: 0.086 } },
    'one the pods might fit, cheaper still, leaves it open down to its price',
  );
  t.same(
    standsWithout(input([cut('t3.medium', 0.0416, false)])),
    { stands: true, cheapest: { lo: 0.0416, hi: 0.096 } },
    'only that one: no dearer than m5.large, no cheaper than it',
  );
  t.same(standsWithout(input([])), { stands: true, cheapest: { lo: 0.096, hi: 0.096 } });
});

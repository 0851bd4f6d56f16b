// A launch that would read `unknown` for want of prices the source expects soon (its region still to
// be named by the nodes, or its first AWS reading on its way) waits for them, for a bounded time:
// the record is written once, and the first nodes of an EKS Pod Identity watcher come a moment
// before their prices do.
import t from 'tap';
import {
  decide,
  toNodeClaimView,
  toNodeView,
  type Effect,
  type LaunchKnowledge,
  type PriceBook,
  type PricesDue,
} from '../../../src/engine/index.ts';
import type { Decision } from '../../../src/engine/decide.ts';
import { pricesAwaitedUntil } from '../../../src/engine/effect/prices-due.ts';
import { karpenterNode, nodeClaimFor, reservedInstance } from '../../../kit/veneer.ts';
import { indexWith, iso, settings, T0 } from '../fixtures.ts';

const ZONE = 'us-west-2a';
const WAIT = 120_000;

/** Karpenter's static table has no spot prices; AWS's reading brings them. */
function book(spot: boolean): PriceBook {
  return {
    source: spot ? 'aws' : 'static',
    asOf: spot ? T0 : undefined,
    region: 'us-west-2',
    hasSpot: spot,
    onDemand: (type) => ({ 'm5.xlarge': 0.192 })[type],
    spot: (type, zone) => (spot && type === 'm5.xlarge' && zone === ZONE ? 0.0672 : undefined),
    offeredZones: () => new Set([ZONE]),
  };
}

/** An on-demand m5.xlarge launched from a NodeClaim that allowed spot too, under Veneer's RI overlay. */
function decideAt(
  now: number,
  o: { spot: boolean; due?: PricesDue; capacityTypes?: string[]; createdAt?: number },
): Decision {
  const createdAt = o.createdAt ?? T0;
  const claim = nodeClaimFor({ name: 'n', claimName: 'n-claim', claimCreatedAt: iso(createdAt - 10_000) });
  claim.spec = {
    nodeClassRef: { group: 'karpenter.k8s.aws', kind: 'EC2NodeClass', name: 'default' },
    requirements: [
      { key: 'node.kubernetes.io/instance-type', operator: 'In', values: ['m5.xlarge'] },
      { key: 'karpenter.sh/capacity-type', operator: 'In', values: o.capacityTypes ?? ['on-demand', 'spot'] },
      { key: 'topology.kubernetes.io/zone', operator: 'In', values: [ZONE] },
    ],
  };
  const launch: LaunchKnowledge = { prices: book(o.spot), ...(o.due ? { pricesDue: o.due } : {}) };
  return decide(
    {
      node: toNodeView(karpenterNode({ name: 'n', createdAt: iso(createdAt) })),
      nodeClaim: toNodeClaimView(claim),
      now,
      decidedBy: 'reconciler',
      launch,
    },
    indexWith([reservedInstance('m5.xlarge', 'us-west-2')]),
    settings,
  );
}

const effectOf = (d: Decision) => (d.outcome === 'influenced' ? d.effect : d.outcome);

t.test('the static table while prices are due: undetermined until they come', async (t) => {
  const due = { since: T0 - 600_000, waitMs: WAIT };
  t.match(decideAt(T0 + 5_000, { spot: false, due }), {
    outcome: 'undetermined',
    reason: /^prices on their way: the NodeClaim allows spot, and the price source \(static\) has no spot prices/,
    retryAt: T0 + WAIT,
  });
  t.match(
    effectOf(decideAt(T0 + 8_000, { spot: true, due })),
    { verdict: 'capacity-type' },
    "once AWS's prices are held: decided with them",
  );
});

t.test('bounded: past the wait, unknown as before', async (t) => {
  const due = { since: T0 - 600_000, waitMs: WAIT };
  t.match(effectOf(decideAt(T0 + WAIT, { spot: false, due })), { verdict: 'unknown', reasonCode: 'no-spot-prices' });
  t.match(
    decideAt(T0 + 30_000, { spot: false, due: { since: T0 + 20_000, waitMs: WAIT } }),
    { outcome: 'undetermined', retryAt: T0 + 20_000 + WAIT },
    'a reading that began after the node was created: the wait counts from it',
  );
});

t.test('nothing due (static source, no credentials, the first reading over): never waits', async (t) => {
  t.match(effectOf(decideAt(T0 + 5_000, { spot: false })), { verdict: 'unknown', reasonCode: 'no-spot-prices' });
  t.match(
    effectOf(decideAt(T0 + 5_000, { spot: false, capacityTypes: ['on-demand'], due: { since: T0, waitMs: WAIT } })),
    { verdict: 'none' },
    'a launch the prices due would not change is decided at once',
  );
});

t.test('only an effect unknown for want of prices waits', async (t) => {
  const due = { since: T0, waitMs: WAIT };
  const unknown = (reasonCode: Effect['reasonCode']): Effect => ({ verdict: 'unknown', reasonCode, reason: 'r' });
  t.equal(pricesAwaitedUntil(unknown('no-prices'), due, T0, T0 + 1), T0 + WAIT);
  t.equal(pricesAwaitedUntil(unknown('no-spot-prices'), due, T0 + 5, T0 + 6), T0 + 5 + WAIT);
  t.equal(pricesAwaitedUntil(unknown('zones'), due, T0, T0 + 1), undefined);
  t.equal(pricesAwaitedUntil({ verdict: 'none' }, due, T0, T0 + 1), undefined);
  t.equal(pricesAwaitedUntil(unknown('no-prices'), undefined, T0, T0 + 1), undefined);
});

// What the watcher keeps for Balanced consolidation's test: the latest Events of each object by
// time (ConsolidationCandidate, ConsolidationApproved), and each NodePool's NodeClaims counted by
// offering as Karpenter's ClusterCost counts them.
import t from 'tap';
import { toNodeClaimView } from '../../../src/engine/index.ts';
import { PoolOfferings } from '../../../src/state/disruption/pool-offerings.ts';
import { TimedEvents } from '../../../src/state/disruption/timed-events.ts';

t.test('the latest few Events per object, by time', async (t) => {
  const events = new TimedEvents<{ at: number; n: number }>(3, (a, b) => a.at === b.at && a.n === b.n);
  for (const [at, n] of [
    [30, 1],
    [10, 2],
    [20, 3],
    [20, 3],
    [40, 4],
  ] as const)
    events.add('NodePool/od', { at, n });
  t.same(
    events.between('NodePool/od', 0, 100).map((e) => e.n),
    [3, 1, 4],
    'sorted, the same one once, the oldest dropped past three',
  );
  t.equal(events.latest('NodePool/od', 35)?.n, 1, 'the latest no later than');
  t.same(events.between('NodePool/od', 20, 30).length, 2, 'inclusive');
  t.same(events.between('NodeClaim/x', 0, 100), []);
  events.add('NodeClaim/x', { at: 50, n: 5 });
  events.prune(45, 10);
  t.same(events.between('NodePool/od', 0, 100), [], 'an object whose latest is older than the horizon goes');
  t.equal(events.latest('NodeClaim/x', 100)?.n, 5);
  events.prune(0, 0);
  t.equal(events.latest('NodeClaim/x', 100), undefined, 'and beyond the bound');
});

const claim = (name: string, labels: Record<string, string>, createdAt = '2026-12-01T10:00:00Z') =>
  toNodeClaimView({ metadata: { name, labels, creationTimestamp: createdAt } });
const offering = (type: string, pool = 'od', zone = 'us-east-1a') => ({
  'node.kubernetes.io/instance-type': type,
  'topology.kubernetes.io/zone': zone,
  'karpenter.sh/capacity-type': 'on-demand',
  'karpenter.sh/nodepool': pool,
});

t.test("each NodePool's NodeClaims by offering, as ClusterCost counts them", async (t) => {
  const pools = new PoolOfferings();
  const at = Date.parse('2026-12-01T11:00:00Z');
  pools.upsert(claim('a', offering('m5.large')));
  pools.upsert(claim('b', offering('m5.large')));
  pools.upsert(claim('c', offering('c6i.large')));
  pools.upsert(claim('d', offering('c6i.large', 'other')));
  pools.upsert(claim('launching', { 'karpenter.sh/nodepool': 'od' }));
  const first = pools.offerings('od', at);
  t.same(
    first,
    [
      { instanceType: 'm5.large', zone: 'us-east-1a', capacityType: 'on-demand', count: 2 },
      { instanceType: 'c6i.large', zone: 'us-east-1a', capacityType: 'on-demand', count: 1 },
    ],
    'a NodeClaim without its offering labels (not launched yet) does not count',
  );
  pools.upsert(claim('b', offering('m5.large')));
  t.equal(pools.offerings('od', at), first, 'the same list while the NodeClaims are the same');
  pools.upsert(claim('new', offering('r6i.large'), '2026-12-01T11:00:05Z'));
  t.equal(pools.offerings('od', at).length, 2, 'one created after the moment asked of does not count');
  t.equal(pools.offerings('od', at + 5000).length, 3);
  pools.remove({ name: 'a' });
  pools.upsert(claim('c', offering('c6i.large', 'other')));
  t.same(pools.offerings('od', at), [
    { instanceType: 'm5.large', zone: 'us-east-1a', capacityType: 'on-demand', count: 1 },
  ]);
  t.equal(pools.offerings('other', at)[0]?.count, 2, 'a NodeClaim that moves pools moves with it');
  t.same(pools.offerings('none', at), []);
});

t.test("each NodePool's capacity, as a consolidation's simulation counts it against the limits", async (t) => {
  const pools = new PoolOfferings();
  const at = Date.parse('2026-12-01T11:00:00Z');
  const launched = (name: string, type: string, capacity: Record<string, string>, createdAt?: string) =>
    toNodeClaimView({
      metadata: { name, labels: offering(type), ...(createdAt ? { creationTimestamp: createdAt } : {}) },
      status: { capacity },
    });
  const m5 = { cpu: '2', memory: '7577Mi', pods: '29', 'ephemeral-storage': '20Gi' };
  pools.upsert(launched('a', 'm5.large', m5, '2026-12-01T10:00:00Z'));
  pools.upsert(launched('candidate', 'c6i.large', { cpu: '2', memory: '3788Mi', pods: '29' }, '2026-12-01T10:00:00Z'));
  pools.upsert(launched('later', 'm5.large', m5, '2026-12-01T11:00:05Z'));
  pools.upsert(claim('launching', offering('t3.large')));
  t.same(
    pools.capacity('od', at, new Set(['candidate'])),
    { cpu: 2, memory: 7577 * 2 ** 20, pods: 29 },
    'the candidates, those created later, and those not launched yet (no status.capacity) do not count',
  );
  pools.upsert(launched('a', 'm5.large', { cpu: '2', memory: '7577Mi', pods: '110' }, '2026-12-01T10:00:00Z'));
  t.equal(pools.capacity('od', at, new Set()).pods, 139, 'a capacity written later is read');
  t.same(pools.capacity('none', at, new Set()), { cpu: 0, memory: 0, pods: 0 });
  t.equal(
    launched('x', 'm5.large', m5).capacity,
    launched('y', 'm5.large', m5).capacity,
    'one object per figure: 100,000 NodeClaims of a few types hold a few',
  );
});

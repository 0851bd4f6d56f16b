// The Event recorder with a post function of the test's own: leader only, fresh records only,
// one per node, never in the caller's way, at the configured rate, and what it posts.
import t from 'tap';
import { toldOf } from '../../../src/engine/decided-node.ts';
import { basicTimestamp } from '../../../src/engine/labels.ts';
import { recordKeys, type NodeView } from '../../../src/engine/index.ts';
import { createLogger } from '../../../src/log.ts';
import { createMetrics } from '../../../src/metrics.ts';
import { eventName, nodeEvent } from '../../../src/controllers/events/node-event.ts';
import {
  EventRecorder,
  FRESH_MS,
  MAX_PENDING,
  type EventRecorderOptions,
} from '../../../src/controllers/events/recorder.ts';
import { ApiError } from '../../../src/kube/client.ts';

const keys = recordKeys('veneer.io');
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

function recorded(name: string, writtenAt = Date.now(), influenced = true): NodeView {
  const story = {
    influenced,
    overlay: influenced ? 'cost-aware-ri-m5.xlarge-us-west-2' : null,
    ...(influenced ? { weight: 30 } : {}),
    decidedBy: 'webhook',
    evaluatedAt: '',
    labeledAt: '',
    basis: 'exact',
    characteristicsFrom: 'node',
    labels: [],
  };
  // What the node cache keeps of the decision annotation.
  const told = toldOf(JSON.stringify(story));
  return {
    name,
    uid: `uid-${name}`,
    labels: {
      'veneer.io/overlay-influenced': String(influenced),
      ...(influenced
        ? {
            'veneer.io/matching-overlay': 'cost-aware-ri-m5.xlarge-us-west-2',
            'veneer.io/capacity-type': 'reserved-instance',
          }
        : {}),
      'veneer.io/labeled-at': basicTimestamp(writtenAt),
    },
    ...(told ? { told } : {}),
  };
}

function recorder(post: EventRecorderOptions['post'], opts: Partial<EventRecorderOptions> = {}) {
  const metrics = createMetrics();
  let known: NodeView[] = [];
  const r = new EventRecorder({
    post,
    known: () => known,
    keys,
    enabled: true,
    ratePerSecond: 1000,
    instance: 'pod-a',
    metrics,
    log: createLogger('silent'),
    ...opts,
  });
  const count = async (result: string) =>
    (await metrics.events.get()).values.find((v) => v.labels.result === result)?.value ?? 0;
  /** Leadership gained with these nodes in the cache. */
  const lead = (nodes: NodeView[]) => {
    known = nodes;
    r.lead();
  };
  return { r, count, lead };
}

t.test('the leader posts once per node, only for records written lately', async (t) => {
  const posted: Record<string, unknown>[] = [];
  const { r, count, lead } = recorder(async (e) => void posted.push(e));
  r.seen(recorded('before-leading'));
  await sleep(20);
  t.equal(posted.length, 0, 'a follower posts nothing');
  lead([
    recorded('before-leading'),
    recorded('old', Date.now() - FRESH_MS - 60_000),
    { name: 'no-record', labels: {} },
  ]);
  r.seen(recorded('fresh'));
  r.seen(recorded('fresh'));
  const garbled = recorded('garbled');
  r.seen({ ...garbled, labels: { ...garbled.labels, 'veneer.io/labeled-at': 'yesterday' } });
  await sleep(50);
  r.seen(recorded('fresh'));
  r.seen(recorded('before-leading'));
  await sleep(50);
  t.same(
    posted.map((e) => (e.regarding as { name: string }).name).sort(),
    ['before-leading', 'fresh'],
    'not the old record, nor one whose time cannot be read',
  );
  t.equal(await count('created'), 2);
  await r.stop();
});

t.test('a node whose labels change while its Event is being posted is not posted twice', async (t) => {
  let calls = 0;
  let release: () => void = () => {};
  const { r, lead } = recorder(() => {
    calls++;
    return new Promise<void>((resolve) => (release = resolve));
  });
  lead([recorded('registering')]);
  await sleep(10);
  const registered = recorded('registering');
  r.seen({ ...registered, labels: { ...registered.labels, 'karpenter.sh/registered': 'true' } });
  release();
  await sleep(10);
  t.equal(calls, 1);
  await r.stop();
});

t.test('409 means another replica or run posted it; other failures are retried, then given up', async (t) => {
  const calls = new Map<string, number>();
  const { r, count, lead } = recorder(async (e) => {
    const name = (e.regarding as { name: string }).name;
    calls.set(name, (calls.get(name) ?? 0) + 1);
    if (name === 'exists')
      throw new ApiError(
        409,
        JSON.stringify({ kind: 'Status', reason: 'AlreadyExists', message: 'events "x" already exists' }),
      );
    if (name === 'flaky' && calls.get(name) === 1) throw new ApiError(503, 'Service Unavailable');
    if (name === 'broken') throw new Error('connection reset');
  });
  lead([recorded('exists'), recorded('flaky'), recorded('broken')]);
  await sleep(100);
  t.same(Object.fromEntries(calls), { exists: 1, flaky: 2, broken: 3 });
  t.same([await count('exists'), await count('created'), await count('failed')], [1, 1, 1]);
  r.seen(recorded('exists'));
  await sleep(20);
  t.equal(calls.get('exists'), 1, 'known to exist: not posted again');
  await r.stop();
});

t.test('a burst never waits on the API: the queue drains at the configured rate', async (t) => {
  const posted: number[] = [];
  const { r, lead } = recorder(async () => void posted.push(Date.now()), { ratePerSecond: 20 });
  lead([]);
  const start = performance.now();
  for (let i = 0; i < 40; i++) r.seen(recorded(`burst-${i}`));
  const handed = performance.now() - start;
  t.ok(handed < 50, `40 nodes handed over in ${handed.toFixed(1)} ms`);
  await sleep(2300);
  t.equal(posted.length, 40);
  // A second's worth at once, then one every 50 ms.
  const spanMs = (posted.at(-1) ?? 0) - (posted[0] ?? 0);
  t.ok(spanMs >= 900 && spanMs < 1800, `the last 20 took ${spanMs} ms at 20 a second`);
  await r.stop();
});

t.test('off, losing the lead, and a queue that cannot grow without bound', async (t) => {
  const posted: string[] = [];
  const off = recorder(async (e) => void posted.push((e.regarding as { name: string }).name), { enabled: false });
  off.lead([recorded('a')]);
  off.r.seen(recorded('b'));
  await sleep(20);
  t.same(posted, [], 'events.enabled=false posts nothing');

  let release: () => void = () => {};
  const held = new Promise<void>((r) => (release = r));
  const stuck = recorder(async () => held);
  stuck.lead([]);
  for (let i = 0; i <= MAX_PENDING; i++) stuck.r.seen(recorded(`n-${i}`));
  t.equal(await stuck.count('dropped'), 1, 'MAX_PENDING waiting, the next dropped');
  stuck.r.follow();
  release();
  await stuck.r.stop();
  t.equal(await stuck.count('created'), 1, 'after losing the lead only the call in flight completes');
});

t.test('the Event: fixed name per node object, MicroTime, the story in the note', async (t) => {
  const node = recorded('ip-10-0-1-10.us-west-2.compute.internal');
  const e = nodeEvent(node, keys, 'pod-a', Date.parse('2026-11-30T05:45:05.123Z'));
  t.match(e, {
    apiVersion: 'events.k8s.io/v1',
    kind: 'Event',
    metadata: { name: /^ip-10-0-1-10\.us-west-2\.compute\.internal\.[0-9a-f]{16}$/, namespace: 'default' },
    eventTime: '2026-11-30T05:45:05.123000Z',
    reportingController: 'veneer.io/node-watcher',
    reportingInstance: 'pod-a',
    action: 'Record',
    type: 'Normal',
    reason: 'OverlayInfluenced',
    note: 'Launched under NodeOverlay cost-aware-ri-m5.xlarge-us-west-2 (weight 30, capacity type reserved-instance); recorded by the webhook (basis exact)',
    regarding: { apiVersion: 'v1', kind: 'Node', name: node.name, uid: 'uid-ip-10-0-1-10.us-west-2.compute.internal' },
  });
  t.match(nodeEvent(recorded('n', Date.now(), false), keys, 'p', 0), {
    reason: 'NoOverlayMatched',
    note: 'No active NodeOverlay matched this node at its launch; recorded by the webhook (basis exact)',
  });
  const bare = { name: 'n', labels: { 'veneer.io/overlay-influenced': 'true', 'veneer.io/matching-overlay': 'x' } };
  t.match(
    nodeEvent(bare, keys, 'p', 0),
    { note: 'Launched under NodeOverlay x (capacity type none)', regarding: { name: 'n' } },
    'without its story, the labels tell what they can',
  );
  t.not(
    eventName(node),
    eventName({ ...node, uid: 'another' }),
    'a node created again under the same name is a new node',
  );
  const long = eventName({ name: `${'a'.repeat(240)}-.b`, labels: {} });
  t.ok(long.length <= 253 && /^a+\.[0-9a-f]{16}$/.test(long), 'a long name is cut where a name may end');
});

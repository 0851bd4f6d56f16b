// "Adding a controller is one folder and one line": a leader-only controller appended to
// serve's list (controllers/index.ts's CONTROLLERS) is led when the replica takes the Lease,
// after the controllers before it; followed, in reverse, when another replica takes the Lease;
// and on stop followed before the Lease is released, then stopped, in reverse. The Manager, the
// LeaderElector and the controllers are the real ones; only the Lease API is a map in memory.
import { setTimeout as sleep } from 'node:timers/promises';
import t from 'tap';
import { engineSettings, overlayPolicy } from '../../src/config/engine-settings.ts';
import { loadConfig } from '../../src/config/load.ts';
import type { ControllerContext } from '../../src/controllers/context.ts';
import { CONTROLLERS, type ControllerFactory, makeControllers } from '../../src/controllers/index.ts';
import { ApiError, type KubeClient } from '../../src/kube/client.ts';
import { electLeader } from '../../src/kube/leader.ts';
import { type LeaderRunnable, Manager } from '../../src/kube/manager.ts';
import { createLogger } from '../../src/log.ts';
import { createMetrics } from '../../src/metrics.ts';
import { ClusterCaches } from '../../src/state/caches.ts';

interface Lease {
  metadata: { name: string; namespace: string; resourceVersion?: string };
  spec: { holderIdentity?: string; renewTime?: string; leaseDurationSeconds?: number };
}

/** One Lease, with the apiserver's resourceVersion guard; `said` hears of each take and release. */
function leaseApi(said: string[]) {
  let lease: Lease | undefined;
  let version = 0;
  const store = (next: Lease) => {
    lease = { ...next, metadata: { ...next.metadata, resourceVersion: String(++version) } };
    return structuredClone(lease);
  };
  const call = async (method: string, _path: string, opts: { body?: Lease } = {}) => {
    if (method === 'GET') {
      if (!lease) throw new ApiError(404, '');
      return structuredClone(lease);
    }
    const body = opts.body!;
    if (method === 'PUT' && body.metadata.resourceVersion !== lease?.metadata.resourceVersion)
      throw new ApiError(409, '');
    said.push(body.spec.holderIdentity === '' ? 'lease released' : `lease held by ${body.spec.holderIdentity}`);
    return store(body);
  };
  return {
    client: { call } as unknown as KubeClient,
    takenBy(holder: string) {
      said.push(`lease held by ${holder}`);
      store({ ...lease!, spec: { ...lease!.spec, holderIdentity: holder, renewTime: new Date().toISOString() } });
    },
  };
}

/** A trivial leader-only controller: what a new folder's factory returns. */
const probe =
  (name: string, said: string[]): ControllerFactory =>
  (_ctx: ControllerContext): LeaderRunnable => ({
    name,
    lead: () => void said.push(`lead ${name}`),
    // Slow on purpose: the Lease must wait for it.
    follow: async () => {
      await sleep(30);
      said.push(`follow ${name}`);
    },
    stop: () => void said.push(`stop ${name}`),
  });

async function until(what: string, ok: () => boolean, ms = 5000): Promise<void> {
  const deadline = Date.now() + ms;
  while (!ok()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await sleep(10);
  }
}

function replica(said: string[]) {
  const { config } = loadConfig({});
  const api = leaseApi(said);
  const log = createLogger('silent');
  const metrics = createMetrics();
  const settings = engineSettings(config);
  const caches = new ClusterCaches(
    { client: api.client, metrics, log, now: Date.now },
    { policy: overlayPolicy(config), retentionMs: config.historyRetentionMs, relistIntervalMs: 60_000 },
    settings.keys,
  );
  const deps = {
    caches,
    client: api.client,
    settings,
    options: config,
    launch: {},
    prices: { current: () => undefined, onDueEnded: () => {} },
    hold: { reason: () => undefined, onLift: () => {} },
    identity: 'replica-a',
    metrics,
    log,
    now: Date.now,
  };
  // The one line: serve's list, and the new controllers after it.
  const controllers = makeControllers(deps, [...CONTROLLERS, probe('first', said), probe('second', said)]);
  const elect = electLeader({
    ...config.leaderElection,
    leaseDurationMs: 1000,
    renewDeadlineMs: 500,
    retryPeriodMs: 20,
    client: api.client,
    identity: 'replica-a',
    metrics,
    log,
  });
  return { api, manager: new Manager(controllers, elect) };
}

t.test(
  'a controller added to the list leads after the Lease is taken and follows in reverse when it is lost',
  async (t) => {
    const said: string[] = [];
    const { api, manager } = replica(said);
    await manager.start();
    await until('leading', () => said.includes('lead second'));
    t.same(said, ['lease held by replica-a', 'lead first', 'lead second'], 'led in the order listed, once leading');
    api.takenBy('replica-b');
    await until('following', () => said.includes('follow first'));
    t.same(said.slice(3), ['lease held by replica-b', 'follow second', 'follow first'], 'followed in reverse');
    await manager.stop();
    t.same(said.slice(6), ['stop second', 'stop first'], 'not released: another replica holds it');
  },
);

t.test('stopped while leading: every part follows, in reverse, before the Lease is released; then stops', async (t) => {
  const said: string[] = [];
  const { manager } = replica(said);
  await manager.start();
  await until('leading', () => said.includes('lead second'));
  said.length = 0;
  await manager.stop();
  t.same(said, ['follow second', 'follow first', 'lease released', 'stop second', 'stop first']);
});

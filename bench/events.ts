// What the node Events add to the reconciler's record latency and to the API calls per node, on
// a cluster of its own: the watcher restarted with events off and on in turn (the order
// alternating by round), three bursts of 100 nodes and one of 1,000 in each arm. The on arm
// counts until every Event of its burst is posted.
import { startClusterEnv, WATCHER_AUDIT_POLICY, WATCHER_USER } from '../kit/watcher-env.ts';
import { type Burst, clusterHarness, p50, p99, scrape, sleep } from './cluster.ts';
import { median, type SuiteResult } from './stats.ts';

type Arm = 'off' | 'on';
interface ArmRun {
  size: number;
  burst: Burst;
  calls: number;
  creates: number;
}

const ROUNDS = [
  [0, 100],
  [1, 100],
  [2, 100],
  [3, 1000],
] as const;
const round3 = (x: number) => Math.round(x * 1000) / 1000;

export async function compareEvents(progress: (msg: string) => void): Promise<SuiteResult> {
  const env = await startClusterEnv({ auditPolicy: WATCHER_AUDIT_POLICY });
  let h: Awaited<ReturnType<typeof clusterHarness>> | undefined;
  try {
    h = await clusterHarness(env, progress);
    const harness = h;
    const eventsTotal = () => scrape(harness.metricsPort, 'veneer_nodewatcher_events_total');
    let current: Arm | undefined;
    const use = async (arm: Arm) => {
      if (arm === current) return;
      await harness.startWatcher({ '--events-enabled': String(arm === 'on') });
      current = arm;
      // A new leader posts the Events that recent records lack (the off arms' nodes): that
      // backlog goes through first, at the configured rate, so that it weighs on no arm.
      for (let last = -1, still = 0; arm === 'on' && still < 6; await sleep(500)) {
        const n = await eventsTotal();
        still = n === last ? still + 1 : 0;
        last = n;
      }
    };
    await use('off');
    progress('cluster events: warm-up burst of 50 nodes');
    await harness.burst('evwarm', 50);
    const runs: Record<Arm, ArmRun[]> = { off: [], on: [] };
    for (const [round, size] of ROUNDS) {
      for (const arm of round % 2 === 0 ? (['off', 'on'] as const) : (['on', 'off'] as const)) {
        progress(`cluster events: ${arm}, ${size} nodes at once (round ${round + 1} of ${ROUNDS.length})`);
        await use(arm);
        const prefix = `ev${arm}r${round}`;
        const before = env.cp.auditEvents().length;
        const posted = await eventsTotal();
        const burst = await harness.burst(prefix, size);
        const deadline = Date.now() + 300_000;
        while (arm === 'on' && (await eventsTotal()) - posted < size && Date.now() < deadline) await sleep(500);
        // Every call about these nodes: the record's write (a retry after a conflict too) and the Event.
        const mine = env.cp
          .auditEvents()
          .slice(before)
          .filter(
            (e) =>
              e.user.username === WATCHER_USER &&
              e.stage === 'ResponseComplete' &&
              e.objectRef?.name?.startsWith(`${prefix}-`),
          );
        runs[arm].push({
          size,
          burst,
          calls: mine.length,
          creates: mine.filter((e) => e.verb === 'create' && e.objectRef?.resource === 'events').length,
        });
      }
    }
    return summary(runs);
  } finally {
    h?.stop();
    await env.cp.stop();
  }
}

function summary(runs: Record<Arm, ArmRun[]>): SuiteResult {
  const of = (arm: Arm, size: number) => runs[arm].filter((r) => r.size === size);
  const p99Of = (arm: Arm, size: number) => median(of(arm, size).map((r) => p99(r.burst.lat)));
  const perNode = (arm: Arm, what: 'calls' | 'creates') =>
    round3(runs[arm].reduce((n, r) => n + r[what], 0) / runs[arm].reduce((n, r) => n + r.size, 0));
  const ratios = of('on', 100).map((r, i) => p99(r.burst.lat) / p99(of('off', 100)[i]?.burst.lat ?? []));
  const row = (arm: Arm, size: number) => {
    const reps = of(arm, size);
    const p99s = reps.map((r) => p99(r.burst.lat));
    return {
      burst: `${size}, events ${arm}`,
      repetitions: reps.length,
      p50_ms: median(reps.map((r) => p50(r.burst.lat))),
      p99_ms: median(p99s),
      p99_spread_ms: `${Math.min(...p99s)}-${Math.max(...p99s)}`,
      missing: reps.reduce((n, r) => n + r.burst.missing, 0),
      create_s: median(reps.map((r) => r.burst.createSeconds)),
    };
  };
  return {
    keys: {
      events_p99_ms_100_off: p99Of('off', 100),
      events_p99_ms_100_on: p99Of('on', 100),
      events_p99_ratio_100: round3(median(ratios)),
      events_p99_ms_1000_off: p99Of('off', 1000),
      events_p99_ms_1000_on: p99Of('on', 1000),
      api_calls_per_node_events_off: perNode('off', 'calls'),
      api_calls_per_node_events_on: perNode('on', 'calls'),
      event_creates_per_node: perNode('on', 'creates'),
    },
    targets: { events_p99_ratio_100: 'reported', event_creates_per_node: '1' },
    table: [row('off', 100), row('on', 100), row('off', 1000), row('on', 1000)],
    raw: {
      events_arms: Object.fromEntries(
        Object.entries(runs).map(([arm, rs]) => [
          arm,
          rs.map((r) => ({ size: r.size, lat: r.burst.lat, calls: r.calls, creates: r.creates })),
        ]),
      ),
    },
  };
}

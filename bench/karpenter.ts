// karpenter: bursts of pending pods through REAL Karpenter (its KWOK provider, kit/karpenter.ts),
// each pod needing a node of its own (a mix of instance types, every fifth spot, as
// test/karpenter/launches.test.ts launches them), with a registration delay of 2 s (the
// KWOKNodeClass's nodeRegistrationDelay, as a booting kubelet's), and the watcher with both
// webhooks registered. Every node version and NodeClaim is recorded from a watch
// (kit/node-history.ts); each on-demand node's record is checked against the overlay
// Karpenter's own code applies to its offering (the judge, test/judges/karpenter-oracle.ts).
//
// The watcher runs as its own process (the compiled CLI, as bench/cluster.ts runs it), so that
// its RSS is its own and not this harness's (which holds every node version it saw).
// In the 500-pod burst (2 cores; 3 runs, one with 2 of 400 records by the reconciler), Karpenter's
// NodeClaim status writes fall behind KWOK's Node creates: every Node came before its NodeClaim
// showed the providerID, so the webhook could not link it at CREATE and, the overlays having
// changed in the 15 minutes before, recorded it inline in Karpenter's registration update instead
// (at_create 0, register_to_record 0): claim-to-record there is mostly Karpenter's
// Node-to-registration time. In the 100-pod burst every record was in the CREATE.
// VENEER_BENCH_KARPENTER_BURSTS (default `100,500`) sets the bursts, for smoke runs; a warm-up
// burst of 10 comes first, in a pool of its own, and is not counted.
// Last, a burst of 30 on-demand pods on KWOK's instant path (a KWOKNodeClass without a
// registration delay: the Node's CREATE right after Karpenter's launch, before its NodeClaim has a
// providerID), in a pool of its own: reported as kwok_instant_inline_share, not a target and not in
// the other keys (the issue saw such a burst recorded 9 by the webhook and 21 by the reconciler).
// VENEER_BENCH_KARPENTER_INSTANT sets its size (0: none).
import { p50, p99 } from './cluster.ts';
import type { SuiteResult } from './stats.ts';
import { sleep, type ServeProcess } from '../kit/fleet.ts';
import {
  burstPods,
  createPendingPods,
  type KwokNodePool,
  KARPENTER_VERSION,
  REGION,
  startKarpenterEnv,
  usageOf,
  type KarpenterEnv,
} from '../kit/karpenter.ts';
import { computeSavingsPlan, ec2InstanceSavingsPlan, reservedInstance } from '../kit/veneer.ts';
import { KarpenterJudge, type JudgeLaunch } from '../test/judges/karpenter-oracle.ts';
import { kwokJudgeCase } from '../test/judges/kwok-judge.ts';
import { History, storyOf } from '../kit/node-history.ts';
import { type BurstTally, isRegistered, tallyBurst, watcherCountingOverlays } from './burst-tally.ts';

type Progress = (msg: string) => void;

const REGISTRATION_DELAY = '2s';
const BURSTS = (process.env.VENEER_BENCH_KARPENTER_BURSTS ?? '100,500').split(',').map(Number);
const WARM_UP = 10;
const INSTANT = Number(process.env.VENEER_BENCH_KARPENTER_INSTANT ?? 30);
/** Veneer's three kinds on KWOK's keys. */
const OVERLAYS = [
  reservedInstance('m5.xlarge', REGION),
  ec2InstanceSavingsPlan('m5', REGION, 'kwok'),
  computeSavingsPlan('kwok'),
];

const poolName = (i: number, size: number) => `burst${i}-${size}`;

interface BurstResult extends BurstTally {
  size: number;
  podsToRegisteredMs: number;
}

export async function runKarpenterSuite(progress: Progress): Promise<SuiteResult> {
  const started = Date.now();
  const pools: KwokNodePool[] = [
    { name: 'warm', nodeClass: 'booting' },
    ...BURSTS.map((n, i) => ({ name: poolName(i, n), nodeClass: 'booting' })),
    { name: 'instant', nodeClass: 'instant' },
  ];
  progress(
    `karpenter: control plane, Karpenter ${KARPENTER_VERSION} (KWOK, nodeRegistrationDelay ${REGISTRATION_DELAY}) and kube-scheduler`,
  );
  const env: KarpenterEnv = await startKarpenterEnv({
    karpenter: {
      nodeClasses: { booting: { nodeRegistrationDelay: REGISTRATION_DELAY }, instant: {} },
      nodePools: pools,
      logLevel: 'error',
    },
  });
  const { cp, admin, karpenter } = env;
  const history = new History(admin);
  const judge = new KarpenterJudge(KARPENTER_VERSION);
  let serve: ServeProcess | undefined;
  try {
    serve = await watcherCountingOverlays(env, OVERLAYS, (started) => (serve = started));
    await history.start();

    const burst = async (pool: string, size: number, allOnDemand = false): Promise<BurstResult> => {
      const wanted = burstPods(pool, size).map((p) => (allOnDemand ? { ...p, capacityType: 'on-demand' as const } : p));
      const onDemand = wanted.filter((p) => p.capacityType === 'on-demand').length;
      const nodesOf = () =>
        [...history.nodes.entries()].filter(([, v]) => v[0]?.labels['karpenter.sh/nodepool'] === pool);
      const t0 = Date.now();
      await createPendingPods(admin, wanted, karpenter.catalog);
      // A burst that does not finish is measured as it stands (missing records count as wrong).
      const deadline = t0 + 120_000 + size * 500;
      let podsToRegisteredMs = Number.NaN;
      while (Date.now() < deadline) {
        const nodes = nodesOf();
        if (Number.isNaN(podsToRegisteredMs) && nodes.length === size && nodes.every(([, v]) => v.some(isRegistered)))
          podsToRegisteredMs = Date.now() - t0;
        if (
          !Number.isNaN(podsToRegisteredMs) &&
          nodes.filter(([, v]) => v.some((x) => storyOf(x) !== undefined)).length >= onDemand
        )
          break;
        await sleep(100);
      }
      if (Date.now() >= deadline)
        progress(
          `karpenter: burst ${pool} did not finish in ${deadline - t0} ms: ${nodesOf().length} of ${size} nodes`,
        );
      await sleep(1000); // room for a late write to show
      const nodes = nodesOf();
      const launches: JudgeLaunch[] = nodes.map(([, v]) => ({
        nodePool: pool,
        instanceType: v.at(-1)!.labels['node.kubernetes.io/instance-type']!,
        offering: karpenter.offeringOf(v.at(-1)!.labels).offering,
      }));
      const answer = await judge.judge(kwokJudgeCase(karpenter.catalog, karpenter.nodePools, OVERLAYS, launches));
      if (answer.error) throw new Error(`the judge's Reconcile failed: ${answer.error}`);
      const r: BurstResult = { size, ...tallyBurst(nodes, answer.applied, history, onDemand), podsToRegisteredMs };
      return r;
    };

    progress(`karpenter: warm-up burst of ${WARM_UP} pods`);
    await burst('warm', WARM_UP);
    const results: BurstResult[] = [];
    const usage: { size: number; karpenter: number; scheduler: number; watcher: number }[] = [];
    const rss = (pid: number | undefined) => Math.round((usageOf(pid)?.rssMiB ?? Number.NaN) * 10) / 10;
    for (const [i, size] of BURSTS.entries()) {
      progress(`karpenter: ${size} pending pods at once`);
      results.push(await burst(poolName(i, size), size));
      usage.push({
        size,
        karpenter: rss(karpenter.controller.pid),
        scheduler: rss(karpenter.scheduler.pid),
        watcher: rss(serve.child.pid),
      });
      const r = results.at(-1)!;
      progress(
        `karpenter: ${r.nodes} nodes, ${r.correct}/${r.onDemand} records correct, ${r.byWebhook} inline, claim->record p99 ${p99(r.claimToRecord)} ms`,
      );
    }
    let instant: BurstResult | undefined;
    if (INSTANT > 0) {
      progress(`karpenter: ${INSTANT} on-demand pods at once on the instant path (no registration delay)`);
      instant = await burst('instant', INSTANT, true);
      progress(
        `karpenter: instant path: ${instant.nodes} nodes, ${instant.correct}/${instant.onDemand} records correct, ${instant.byWebhook} by the webhook, ${instant.byReconciler} by the reconciler`,
      );
    }
    const peak = {
      karpenter: usageOf(karpenter.controller.pid),
      scheduler: usageOf(karpenter.scheduler.pid),
      watcher: usageOf(serve.child.pid),
    };
    const lastUsage = usage.at(-1)!;
    const round3 = (x: number) => Math.round(x * 1000) / 1000;
    const onDemand = results.reduce((a, r) => a + r.onDemand, 0);
    const wallS = Math.round((Date.now() - started) / 100) / 10;
    const worst = (f: (r: BurstResult) => number) => Math.max(...results.map(f));
    return {
      // Shares over the on-demand nodes of every burst; latencies the worse burst's.
      keys: {
        karpenter_nodes: results.reduce((a, r) => a + r.nodes, 0),
        karpenter_records_correct: round3(results.reduce((a, r) => a + r.correct, 0) / onDemand),
        karpenter_inline_share: round3(results.reduce((a, r) => a + r.byWebhook, 0) / onDemand),
        karpenter_claim_to_record_p50_ms: worst((r) => p50(r.claimToRecord)),
        karpenter_claim_to_record_p99_ms: worst((r) => p99(r.claimToRecord)),
        karpenter_register_to_record_p99_ms: worst((r) => p99(r.registrationToRecord)),
        karpenter_rss_mb: lastUsage.karpenter,
        karpenter_scheduler_rss_mb: lastUsage.scheduler,
        karpenter_watcher_rss_mb: lastUsage.watcher,
        ...(instant ? { kwok_instant_inline_share: round3(instant.byWebhook / instant.onDemand) } : {}),
      },
      targets: {
        karpenter_nodes: String(BURSTS.reduce((a, n) => a + n, 0)),
        karpenter_records_correct: '1.0',
        karpenter_inline_share: '>= 0.99',
        karpenter_claim_to_record_p50_ms: `reported (includes the ${REGISTRATION_DELAY} registration delay)`,
        karpenter_claim_to_record_p99_ms: `reported (includes the ${REGISTRATION_DELAY} registration delay)`,
        karpenter_register_to_record_p99_ms: '<= 500',
        karpenter_rss_mb: 'reported',
        karpenter_scheduler_rss_mb: 'reported',
        karpenter_watcher_rss_mb: '<= 150',
        kwok_instant_inline_share: `reported, not a target (a burst of ${INSTANT} on-demand pods, KWOK without a registration delay)`,
      },
      table: results.map((r, i) => ({
        burst: r.size,
        nodes: r.nodes,
        on_demand: r.onDemand,
        correct: r.correct,
        by_webhook: r.byWebhook,
        by_reconciler: r.byReconciler,
        missing: r.missing,
        spot_with_record: r.spotWithRecord,
        at_create: r.atCreate,
        with_nodeclaim: r.withNodeClaim,
        claim_launched_after_node: r.claimLaunchedAfterNode,
        pods_to_all_registered_s: Math.round(r.podsToRegisteredMs / 100) / 10,
        claim_to_node_p50_ms: p50(r.claimToNode),
        node_to_record_p50_ms: p50(r.nodeToRecord),
        node_to_record_p99_ms: p99(r.nodeToRecord),
        claim_to_record_p50_ms: p50(r.claimToRecord),
        claim_to_record_p99_ms: p99(r.claimToRecord),
        register_to_record_p99_ms: p99(r.registrationToRecord),
        karpenter_rss_mb: usage[i]!.karpenter,
        scheduler_rss_mb: usage[i]!.scheduler,
        watcher_rss_mb: usage[i]!.watcher,
      })),
      raw: {
        karpenter_version: KARPENTER_VERSION,
        registration_delay: REGISTRATION_DELAY,
        bursts: BURSTS,
        suite_wall_s: wallS,
        claim_to_record_ms: Object.fromEntries(results.map((r) => [r.size, r.claimToRecord])),
        node_to_record_ms: Object.fromEntries(results.map((r) => [r.size, r.nodeToRecord])),
        register_to_record_ms: Object.fromEntries(results.map((r) => [r.size, r.registrationToRecord])),
        disagree: results.flatMap((r) => r.disagree).slice(0, 20),
        ...(instant
          ? {
              kwok_instant: {
                nodes: instant.nodes,
                on_demand: instant.onDemand,
                correct: instant.correct,
                by_webhook: instant.byWebhook,
                by_reconciler: instant.byReconciler,
                missing: instant.missing,
                at_create: instant.atCreate,
                with_nodeclaim: instant.withNodeClaim,
                claim_launched_after_node: instant.claimLaunchedAfterNode,
                node_to_record_p50_ms: p50(instant.nodeToRecord),
                node_to_record_p99_ms: p99(instant.nodeToRecord),
                disagree: instant.disagree.slice(0, 20),
              },
              notes: [
                `KWOK instant path (no registration delay), a burst of ${instant.onDemand} on-demand pods after the others: ${instant.byWebhook} recorded by the webhook (${instant.atCreate} in the CREATE), ${instant.byReconciler} by the reconciler, ${instant.correct} correct (kwok_instant_inline_share; the issue saw 9 and 21 of 30).`,
              ],
            }
          : {}),
        peak_rss_mb: {
          karpenter: peak.karpenter?.peakRssMiB,
          scheduler: peak.scheduler?.peakRssMiB,
          watcher: peak.watcher?.peakRssMiB,
        },
        cpu_s: {
          karpenter: peak.karpenter?.cpuSeconds,
          scheduler: peak.scheduler?.cpuSeconds,
          watcher: peak.watcher?.cpuSeconds,
        },
      },
    };
  } finally {
    history.stop();
    await judge.close().catch(() => undefined);
    if (serve && serve.child.exitCode === null) {
      serve.child.kill('SIGTERM');
      await serve.exited;
    }
    await cp.stop();
  }
}

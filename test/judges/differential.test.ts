// Karpenter's own NodeOverlay controller judges the decision engine. Each generated cluster
// (test/judges/karpenter-cluster.ts) goes to test/judges/oracle, which runs Karpenter's
// controller and store (nodeoverlay.NewController, Reconcile, InstanceTypeStore.ApplyAll) over a
// fake API client and answers, per launch, whose price the store applied, with the statuses the
// controller wrote. The engine gets what the watcher gets live (the registered node, its
// NodeClaim, the NodePools, the overlays with Karpenter's statuses) through `decide`, the entry
// point of the webhook and the reconciler; every on-demand launch must name the same overlay.
//
// Both Karpenter versions in JUDGE_VERSIONS judge. VENEER_ORACLE_LAUNCHES sets the launches per
// version (default 20,000), VENEER_ORACLE_SEED replays a run.
import t from 'tap';
import {
  decide,
  OverlayIndex,
  parseSelector,
  recordKeys,
  toNodeClaimView,
  toNodePoolView,
  toNodeView,
  toOverlayView,
  type EngineSettings,
} from '../../src/engine/index.ts';
import { AWS_KEYS } from '../../src/engine/providers.ts';
import { NORMALIZED_LABEL_VALUES, NORMALIZED_LABELS } from '../../src/engine/normalize.ts';
import { JUDGE_VERSIONS, KarpenterJudge, type JudgeAnswer } from './karpenter-oracle.ts';
import {
  Choices,
  generateCluster,
  launchedObjects,
  watchedNodePools,
  watchedOverlays,
  type GeneratedCluster,
} from './karpenter-cluster.ts';

const LAUNCHES_PER_CASE = 16;
const LAUNCHES = Number(process.env.VENEER_ORACLE_LAUNCHES ?? 20_000);
const SEED = Number(process.env.VENEER_ORACLE_SEED ?? Date.now() % 1_000_000);
const settings: EngineSettings = { keys: recordKeys('veneer.io'), gracePeriodMs: 60_000, provider: AWS_KEYS };
const policy = { selector: parseSelector('app.kubernetes.io/managed-by=veneer'), requireOverlayReady: true };

/** Launch times come after every status Karpenter wrote, as on a cluster where the overlays were validated first. */
function launchTime(answer: JudgeAnswer): number {
  let latest = Date.parse('2026-01-12T15:00:00Z');
  for (const s of Object.values(answer.statuses)) {
    for (const c of s.conditions) if (c.lastTransitionTime) latest = Math.max(latest, Date.parse(c.lastTransitionTime));
  }
  return latest + 60_000;
}

/** Per launch, the overlay the engine records (null: none), judging on the Karpenter view or, without NodePools, on node labels. */
function engineAnswers(g: GeneratedCluster, answer: JudgeAnswer, withNodePools: boolean): (string | null)[] {
  const at = launchTime(answer);
  const since = at - 3_600_000;
  const createdAt = new Date(since).toISOString();
  const index = new OverlayIndex({ policy, retentionMs: Number.POSITIVE_INFINITY });
  index.replaceAll(
    watchedOverlays(g.judgeCase, answer, createdAt).map((o) => toOverlayView(o)),
    since,
  );
  if (withNodePools)
    index.nodePools.replaceAll(
      watchedNodePools(g.pools, createdAt).map((p) => toNodePoolView(p)),
      since,
    );
  index.markSynced(since);
  const launchedAt = new Date(at).toISOString();
  return g.launches.map((l, i) => {
    const { node, claim } = launchedObjects(l, `n${i}`, launchedAt);
    const d = decide(
      { node: toNodeView(node), nodeClaim: toNodeClaimView(claim), now: at + 2_000, decidedBy: 'reconciler' },
      index,
      settings,
    );
    if (d.outcome !== 'influenced' && d.outcome !== 'not-influenced')
      throw new Error(`launch ${i} not decided: ${JSON.stringify(d)}`);
    return d.overlay?.name ?? null;
  });
}

for (const version of JUDGE_VERSIONS) {
  t.test(`Karpenter ${version}'s NodeOverlay controller`, async (t) => {
    const judge = new KarpenterJudge(version);
    t.teardown(() => judge.close());

    t.test('the normalization tables are its own (v1.NormalizedLabels, v1.NormalizedLabelValues)', async (t) => {
      const tables = await judge.tables();
      t.same(Object.fromEntries(NORMALIZED_LABELS), tables.normalizedLabels);
      t.same(
        Object.fromEntries([...NORMALIZED_LABEL_VALUES].map(([k, m]) => [k, Object.fromEntries(m)])),
        tables.normalizedLabelValues,
      );
    });

    t.test(`${LAUNCHES} launches: the engine names the overlay whose price Karpenter applied`, async (t) => {
      t.comment(`seed ${SEED} (rerun with VENEER_ORACLE_SEED=${SEED})`);
      const stats = { launches: 0, influenced: 0, labelModelDiffers: 0, conflicts: 0, runtimeValidation: 0 };
      const started = Date.now();
      let cases = 0;
      for (let n = 0; stats.launches < LAUNCHES; n++, cases++) {
        const g = generateCluster(new Choices(SEED * 100_003 + n), LAUNCHES_PER_CASE);
        const answer = await judge.judge(g.judgeCase);
        if (answer.error) throw new Error(`case ${n}: Karpenter's Reconcile failed: ${answer.error}`);
        const engine = engineAnswers(g, answer, true);
        const labelModel = engineAnswers(g, answer, false);
        for (const [i, expected] of answer.applied.entries()) {
          if (engine[i] !== expected) {
            t.fail(
              `case ${n} (seed ${SEED}), launch ${i}: Karpenter applied ${expected}, the engine names ${engine[i]}`,
              {
                launch: g.judgeCase.launches[i],
                nodePools: g.judgeCase.nodePools,
                overlays: g.judgeCase.overlays,
                statuses: answer.statuses,
                instanceType: g.judgeCase.instanceTypes.find((it) => it.name === g.judgeCase.launches[i]?.instanceType),
              },
            );
            return;
          }
          stats.launches++;
          if (expected !== null) stats.influenced++;
          if (labelModel[i] !== expected) stats.labelModelDiffers++;
        }
        for (const s of Object.values(answer.statuses)) {
          const reason = s.conditions.find((c) => c.type === 'ValidationSucceeded' && c.status === 'False')?.reason;
          if (reason === 'Conflict') stats.conflicts++;
          if (reason === 'RuntimeValidation') stats.runtimeValidation++;
        }
      }
      const seconds = (Date.now() - started) / 1000;
      const share = (k: number) => `${((100 * k) / stats.launches).toFixed(1)}%`;
      t.pass(`${stats.launches} launches in ${cases} clusters agree`);
      t.comment(
        `${stats.launches} launches in ${seconds.toFixed(1)} s; ${share(stats.influenced)} influenced; the node-label model differs on ${share(stats.labelModelDiffers)}; ${stats.conflicts} Conflict and ${stats.runtimeValidation} RuntimeValidation statuses`,
      );
      // Cases that cannot tell the models apart, or never reach Karpenter's refusals, would prove little.
      t.ok(
        stats.influenced > stats.launches * 0.1 && stats.influenced < stats.launches * 0.9,
        `both outcomes are common (${share(stats.influenced)} influenced)`,
      );
      t.ok(
        stats.labelModelDiffers > stats.launches * 0.02,
        `the cases tell the Karpenter view from node labels: ${share(stats.labelModelDiffers)} differ`,
      );
      t.ok(stats.conflicts > cases * 0.05, `Conflicts are common (${stats.conflicts} in ${cases} clusters)`);
      t.ok(stats.runtimeValidation > cases * 0.02, `RuntimeValidation refusals occur (${stats.runtimeValidation})`);
      console.error(
        `differential ${version}: ${stats.launches} launches in ${seconds.toFixed(1)} s, seed ${SEED}, label model differs on ${share(stats.labelModelDiffers)}`,
      );
    });
  });
}

// Karpenter's own drift judges the effect of a drift replacement. Drift makes its command through
// the provisioner's scheduling of the drifted node's pods (Drift.ComputeCommands: SimulateScheduling,
// no price test), so it replaces the node whatever the overlays: the replacement's truth is its
// launch's effect, what Karpenter's AWS launch code launches on the NodeClaim drift writes with the
// overlays against what it launches on the one it writes without the selected ones
// (test/judges/replacement-launches.ts), never `replacement`. Each generated cluster (the
// replacement differential's, test/judges/replacement-cases.ts) has each of its nodes drift alone
// in the judge (test/judges/oracle consolidate.go, `drift`); where drift replaces it by an
// on-demand node in both worlds, the engine decides the replacement's node as the watcher does, its
// NodeClaim marked `Drifted`, and its story must name the drifted node.
//
// VENEER_DRIFT_ORACLE_CASES sets the clusters (default 300), VENEER_DRIFT_ORACLE_SEED replays a run.
import t from 'tap';
import { Choices } from './karpenter-cluster.ts';
import { judgedIndex } from './judged-cluster.ts';
import { sizeCatalog } from './case-sizing.ts';
import { KarpenterJudge } from './karpenter-oracle.ts';
import { expected, worldDiffers } from './launch-verdict.ts';
import { generateConsolidationCase, withShapes } from './replacement-cases.ts';
import { engineEffect, policy, T0 } from './replacement-engine.ts';
import { replacementLaunches } from './replacement-launches.ts';

const CASES = Number(process.env.VENEER_DRIFT_ORACLE_CASES ?? 300);
const SEED = Number(process.env.VENEER_DRIFT_ORACLE_SEED ?? Date.now() % 1_000_000);
/** Launches the engine leaves unknown by design (the replacement differential's, less those of consolidation alone). */
const ABSTAIN = new Set(['unseen-options', 'conflict', 'truncation', 'candidates-cut']);

// v1.14.3: drift and Karpenter's AWS launch code in one judge.
const judge = new KarpenterJudge('v1.14.3');
t.teardown(() => judge.close());

t.test(`${CASES} clusters: a drift replacement's effect is its launch's, and names the drifted node`, async (t) => {
  t.comment(`seed ${SEED} (rerun with VENEER_DRIFT_ORACLE_SEED=${SEED})`);
  const decided = new Map<string, number>();
  const abstained = new Map<string, number>();
  const stats = { drifted: 0, replaced: 0, deleted: 0, spot: 0, refused: 0, judged: 0, judgeErrors: 0 };
  const count = (m: Map<string, number>, key: string) => m.set(key, (m.get(key) ?? 0) + 1);
  const fail = (n: number, node: string, why: string) => t.fail(`cluster ${n}, ${node}: ${why} (seed ${SEED})`);
  for (let n = 0; n < CASES; n++) {
    const seed = SEED * 100_003 + n;
    const choices = new Choices(seed);
    const c = generateConsolidationCase(choices);
    const sizing = await sizeCatalog(c.request.instanceTypes, c.catalog, choices, judge);
    withShapes(c, seed);
    // Each node drifts alone: drift's commands have one candidate.
    c.request.commands = c.request.nodes.map((node) => [node.name]);
    c.request.drift = true;
    const answer = await judge.consolidate(c.request);
    if (answer.error) throw new Error(`cluster ${n}: the judge could not run it: ${answer.error}`);
    const launches = await replacementLaunches(judge, c, answer);
    const index = judgedIndex(c.request, answer.statuses, policy, T0 - 7_200_000, undefined);
    for (const [i, [node]] of c.request.commands.entries()) {
      stats.drifted++;
      const { with: w, without: wo } = answer.commands[i]!;
      if (w.error || wo.error) {
        stats.judgeErrors++;
        continue;
      }
      if (w.decision === 'delete') stats.deleted++;
      if (w.decision !== 'replace') continue;
      stats.replaced++;
      if (wo.decision !== 'replace') {
        fail(n, node!, `drift replaces it with the overlays, not without them (${wo.decision}: ${wo.reason ?? ''})`);
        continue;
      }
      const launch = launches.get(i);
      if (launch === undefined) {
        stats.spot++; // a spot replacement in a world: the watcher records none
        continue;
      }
      // Karpenter's Create refused it (the scheduler wrote a NodeClaim whose minValues its offerings
      // cannot meet): no node in that world, nothing recorded there.
      if (launch.with.error || launch.without.error) {
        stats.refused++;
        continue;
      }
      stats.judged++;
      const launched = launch.with.picks?.[0] ?? w.replacement!.instanceTypes[0]!;
      const { effect: e, outcome } = engineEffect(
        c,
        sizing,
        index,
        [node!],
        w,
        launched,
        w.replacement!.priceOverlayApplied,
        undefined,
        'Drifted',
      );
      if (e === undefined) {
        fail(n, node!, `the engine decided nothing (${outcome})`);
        continue;
      }
      if (e.disruption?.reason !== 'Drifted' || e.disruption.replaced[0]?.nodeClaim !== `${node}-claim`)
        fail(n, node!, `the story does not name the drifted node: ${JSON.stringify(e.disruption)}`);
      if (e.verdict === 'replacement') {
        fail(n, node!, 'a drift replacement read `replacement`: drift replaces whatever the overlays');
        continue;
      }
      const want = expected(launched, launch.with, launch.without);
      if (e.verdict === 'unknown' && !(want === 'tie' && e.reasonCode === 'tie')) {
        if (!ABSTAIN.has(e.reasonCode ?? ''))
          fail(n, node!, `the launches give ${want}, the engine ${e.reasonCode} (${e.reason ?? ''})`);
        count(abstained, `${e.reasonCode} (judge: ${want})`);
        continue;
      }
      if (want === 'order' || (want !== 'tie' && e.verdict !== want)) {
        fail(n, node!, `the launches give ${want}, the engine ${e.verdict} (${e.reasonCode ?? ''}: ${e.reason ?? ''})`);
        continue;
      }
      const differs =
        worldDiffers(e.with, launch.with, 'with the overlays') ??
        worldDiffers(e.without, launch.without, 'without them, on the NodeClaim drift writes without them');
      if (differs) {
        fail(n, node!, differs);
        continue;
      }
      count(decided, want);
    }
  }
  const abstentions = [...abstained.values()].reduce((a, b) => a + b, 0);
  const list = (m: Map<string, number>) =>
    [...m]
      .sort()
      .map(([k, v]) => `${k} ${v}`)
      .join(', ') || 'none';
  const summary = `${stats.drifted} drifted nodes in ${CASES} clusters: drift replaced ${stats.replaced} (${stats.deleted} deleted, their pods fitting elsewhere; ${stats.spot} by spot in a world, not recorded; ${stats.refused} whose launch Karpenter's Create refused in a world), judged ${stats.judged}; decided: ${list(decided)}; the engine abstained on ${abstentions}: ${list(abstained)}; judge errors ${stats.judgeErrors}`;
  t.comment(summary);
  console.error(`drift differential: ${summary}, seed ${SEED}`);
  t.ok(stats.judged > 0, 'drift replacements by on-demand nodes occur');
  t.ok((decided.get('instance-type') ?? 0) > 0, 'drift replacements the overlays moved to another type occur');
  t.ok((decided.get('none') ?? 0) > 0, 'drift replacements the overlays did not change occur');
  t.ok(abstentions < stats.judged * 0.1, `the engine abstains on few (${abstentions} of ${stats.judged})`);
});

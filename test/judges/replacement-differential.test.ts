// Karpenter's own consolidation judges the effect of a replacement. Each generated cluster
// (test/judges/replacement-cases.ts) goes to the judge (test/judges/oracle consolidate.go:
// computeConsolidation with Karpenter's provisioner, scheduler and candidates, its NodeOverlay store
// pricing both worlds), which says for each candidate set whether consolidation replaces it with
// every overlay, and whether it would without the selected ones. Where it replaces with them by an
// on-demand node (the only kind the watcher records), the engine gets what the watcher gets live,
// through `decide`: the replacement's node and NodeClaim as Karpenter writes it, the marks on the
// replaced NodeClaims and the DisruptionLaunching Event (as evidence), the NodePools, the overlays
// with the statuses Karpenter wrote, the prices and zones. The engine must say `replacement` exactly
// when Karpenter would not replace those nodes without the selected overlays (its price filter,
// minValues, for several nodes filterOutSameInstanceType, and for a Balanced NodePool's nodes its
// Balanced scoring, read from the ConsolidationApproved Event Karpenter publishes as it approves the
// command with them, handed to the engine as the watcher reads it, with the NodePool's NodeClaims
// by offering), and its story must say whether it
// would have (`replacedWithout`), or abstain with a reason; its story must name the replaced nodes
// and the candidate price Karpenter compared.
//
// VENEER_REPLACEMENT_ORACLE_CASES sets the clusters (default 1,000: about 3,300 candidate sets), VENEER_REPLACEMENT_ORACLE_SEED replays a
// run, and with it VENEER_REPLACEMENT_ORACLE_CASE replays the one cluster a failure names.
// VENEER_REPLACEMENT_ORACLE_VERSION picks the judge's Karpenter (default v1.14.3, the AWS provider's).
import t from 'tap';
import { JUDGE_VERSIONS, type JudgeVersion, KarpenterJudge, type ConsolidateAnswer } from './karpenter-oracle.ts';
import { Choices } from './karpenter-cluster.ts';
import { judgedIndex } from './judged-cluster.ts';
import { type CaseSizing, sizeCatalog } from './case-sizing.ts';
import { type ConsolidationCase, generateConsolidationCase, withShapes } from './replacement-cases.ts';
import { type ReplacementLaunches, replacementLaunches } from './replacement-launches.ts';
import { engineEffect, type Moment, policy, T0 } from './replacement-engine.ts';
import { logAnswer } from '../support/answer-log.ts';
import { expected, worldDiffers } from './launch-verdict.ts';

const CASES = Number(process.env.VENEER_REPLACEMENT_ORACLE_CASES ?? 1000);
const SEED = Number(process.env.VENEER_REPLACEMENT_ORACLE_SEED ?? Date.now() % 1_000_000);
const ONLY_CASE =
  process.env.VENEER_REPLACEMENT_ORACLE_CASE === undefined
    ? undefined
    : Number(process.env.VENEER_REPLACEMENT_ORACLE_CASE);
const IN_FLIGHT = 16;

/** A launch the engine leaves unknown by design: types whose fit it cannot show, a Conflict, Karpenter's cut at 60 or 600. */
const ANYWAY_ABSTAIN = new Set(['unseen-options', 'conflict', 'truncation', 'candidates-cut', 'decision-moment']);

/** Mixed into a cluster's seed for the choice of an overlay that changes while Karpenter decides. */
const MOMENT_STREAM = 0x4d4f4d;
/** The decision's window of every command here: marks at T0 - 1 s, no ConsolidationCandidate Event (validation.ts). */
const WINDOW = { from: T0 - 195_000, to: T0 - 15_000 };

/**
 * In one cluster of four, a selected overlay of a weight of its own that Karpenter validated came
 * (or went) within the decision's window: the engine sees two moments Karpenter may have priced
 * at, and the judge's answer is the one priced with it in force. Its own weight: the others'
 * statuses are Karpenter's with it and without it alike.
 */
function overlayChange(
  c: ConsolidationCase,
  statuses: Record<string, { conditions: { type: string; status: string }[] } | undefined>,
  choices: Choices,
): Moment | undefined {
  if (!choices.chance(0.25)) return undefined;
  const weights = new Map<number, number>();
  for (const o of c.request.overlays) weights.set(o.weight ?? 0, (weights.get(o.weight ?? 0) ?? 0) + 1);
  const eligible = c.request.overlays.filter(
    (o) =>
      o.selected &&
      weights.get(o.weight ?? 0) === 1 &&
      statuses[o.name]?.conditions.some((k) => k.type === 'Ready' && k.status === 'True'),
  );
  if (eligible.length === 0) return undefined;
  const at = Math.round(WINDOW.from + (WINDOW.to - WINDOW.from) * (0.1 + 0.8 * choices.next()));
  const kind = choices.chance(0.5) ? 'came' : 'went';
  // When Karpenter priced: with the overlay in force (after it came, before it went). In half of
  // them its ConsolidationCandidate Event, published as it computes, dates that.
  const decidedAt =
    kind === 'came' ? at + (WINDOW.to - at) * choices.next() : WINDOW.from + (at - WINDOW.from) * choices.next();
  return {
    overlay: choices.pick(eligible).name,
    kind,
    at,
    decidedAt,
    ...(choices.chance(0.5) ? { candidateAt: Math.floor(decidedAt / 1000) * 1000 } : {}),
  };
}

const VERSION = process.env.VENEER_REPLACEMENT_ORACLE_VERSION ?? 'v1.14.3';
if (!JUDGE_VERSIONS.includes(VERSION as JudgeVersion))
  throw new Error(`VENEER_REPLACEMENT_ORACLE_VERSION=${VERSION}: the judge is built for ${JUDGE_VERSIONS.join(', ')}`);
const judge = new KarpenterJudge(VERSION as JudgeVersion);
t.teardown(() => judge.close());
// Karpenter's AWS launch code, in the AWS provider's module (v1.14.3 only): the launches of the replacements.
const launchJudge = VERSION === 'v1.14.3' ? judge : new KarpenterJudge('v1.14.3');
if (launchJudge !== judge) t.teardown(() => launchJudge.close());

t.test(
  `${ONLY_CASE === undefined ? `${CASES} clusters` : `cluster ${ONLY_CASE}`}: the engine's replacement is what Karpenter's consolidation does without the selected overlays`,
  async (t) => {
    t.comment(`seed ${SEED} (rerun with VENEER_REPLACEMENT_ORACLE_SEED=${SEED})`);
    const decided = new Map<string, number>();
    const abstained = new Map<string, number>();
    const stats = {
      commands: 0,
      replaced: 0,
      spotReplacements: 0,
      judged: 0,
      judgeErrors: 0,
      multi: 0,
      sameType: 0,
      minValues: 0,
      balanced: 0,
      balancedRejectedWith: 0,
      limited: 0,
      limitedAbstained: 0,
      moment: 0,
      momentAbstained: 0,
      momentFigures: 0,
      zoneMinValues: 0,
      zoneMinValuesAbstained: 0,
      capacityMinValues: 0,
      capacityMinValuesAbstained: 0,
    };
    const started = Date.now();
    const ahead: {
      c: ConsolidationCase;
      answer: Promise<{
        sizing: CaseSizing;
        answer: ConsolidateAnswer;
        change: Moment | undefined;
        launches: Map<number, ReplacementLaunches>;
      }>;
    }[] = [];
    let generated = ONLY_CASE ?? 0;
    const ask = () => {
      const seed = SEED * 100_003 + generated++;
      const choices = new Choices(seed);
      const c = generateConsolidationCase(choices);
      // Sized by the AWS provider's code first: the judge's types then have Karpenter's allocatable.
      const answer = sizeCatalog(c.request.instanceTypes, c.catalog, choices, launchJudge).then(async (sizing) => {
        withShapes(c, seed);
        const answer = await judge.consolidate(c.request);
        const change = overlayChange(c, answer.statuses, new Choices(seed ^ MOMENT_STREAM));
        return { sizing, answer, change, launches: await replacementLaunches(launchJudge, c, answer) };
      });
      ahead.push({ c, answer });
    };
    const last = ONLY_CASE === undefined ? CASES : ONLY_CASE + 1;
    for (let n = ONLY_CASE ?? 0; n < last; n++) {
      while (ahead.length < Math.min(IN_FLIGHT, last - n)) ask();
      const { c, answer: pending } = ahead.shift()!;
      const { sizing, answer, change, launches } = await pending;
      if (answer.error) throw new Error(`cluster ${n}: the judge could not run it: ${answer.error}`);
      // Since two hours: ClusterCost's prices, up to an hour old, are then those of the overlays too.
      const index = judgedIndex(c.request, answer.statuses, policy, T0 - 7_200_000, change);
      for (const [i, set] of c.request.commands.entries()) {
        stats.commands++;
        const { with: w, without: wo } = answer.commands[i]!;
        if (w.error || wo.error) {
          stats.judgeErrors++;
          continue;
        }
        if (w.decision !== 'replace') continue;
        // Balanced consolidation rejects it with the overlays too: Karpenter makes no such command.
        if (w.balanced?.approved === false) {
          stats.balancedRejectedWith++;
          continue;
        }
        stats.replaced++;
        const ct = w.replacement!.requirements.find((r) => r.key === 'karpenter.sh/capacity-type')?.values ?? [];
        if (ct.includes('spot') || !ct.includes('on-demand')) {
          stats.spotReplacements++; // a spot node: the watcher records none
          continue;
        }
        stats.judged++;
        if (set.length > 1) stats.multi++;
        if (wo.reason?.startsWith('filterOutSameInstanceType')) stats.sameType++;
        if (w.replacement!.requirements.some((r) => r.minValues !== undefined)) stats.minValues++;
        if (w.balanced) stats.balanced++;
        const limited = c.request.nodePools.some((p) => p.name === w.replacement!.nodePool && p.limits);
        if (limited) stats.limited++;
        if (change) stats.moment++;
        const zoneMinValues = w.replacement!.requirements.some(
          (r) => r.key === 'topology.kubernetes.io/zone' && r.minValues !== undefined,
        );
        if (zoneMinValues) stats.zoneMinValues++;
        const capacityMinValues = w.replacement!.requirements.some(
          (r) => r.key === 'karpenter.sh/capacity-type' && r.minValues !== undefined,
        );
        if (capacityMinValues) stats.capacityMinValues++;
        const want = wo.decision === 'replace' && wo.balanced?.approved !== false ? 'anyway' : 'replacement';
        // Replaced anyway by on-demand nodes: the type Karpenter's launch code launches with the overlays.
        const launch = launches.get(i);
        const launched = launch?.with.picks?.[0] ?? w.replacement!.instanceTypes[0]!;
        const { effect: e, outcome } = engineEffect(
          c,
          sizing,
          index,
          set,
          w,
          launched,
          w.replacement!.priceOverlayApplied,
          change,
        );
        logAnswer('replacement', `${n}/${i}`, e ?? outcome);
        const fail = (why: string) =>
          t.fail(
            `cluster ${n} (VENEER_REPLACEMENT_ORACLE_SEED=${SEED} VENEER_REPLACEMENT_ORACLE_CASE=${n}), set ${set.join('+')}: ${why}`,
            { want, engine: e, judge: answer.commands[i], launch, request: c.request, statuses: answer.statuses },
          );
        if (!e) {
          fail(`the engine decided nothing (${outcome})`);
          continue;
        }
        const told = e.disruption;
        if (told?.reason !== 'Underutilized' || told.replacedCount !== set.length) {
          fail('the story does not tell the replaced nodes');
          continue;
        }
        const says = e.verdict === 'replacement' ? 'replacement' : told.replacedWithout === true ? 'anyway' : undefined;
        if (told.moments !== undefined) stats.momentFigures++;
        if (says === undefined) {
          const key = `${e.reasonCode} (judge: ${want})`;
          abstained.set(key, (abstained.get(key) ?? 0) + 1);
          if (limited) stats.limitedAbstained++;
          if (change) stats.momentAbstained++;
          if (zoneMinValues) stats.zoneMinValuesAbstained++;
          if (capacityMinValues) stats.capacityMinValuesAbstained++;
          continue;
        }
        if (says !== want) {
          fail(`Karpenter's consolidation says ${want}, the engine ${says} (${e.reason ?? ''})`);
          continue;
        }
        // The price Karpenter compared, with the overlays, is the one the engine summed (unless the
        // story says its figures are of one of several moments that fit, each with this verdict).
        if (told.moments === undefined && Math.abs((told.price?.with ?? -1) - w.candidatePrice) > 1e-9) {
          fail(`the replaced nodes' price: Karpenter ${w.candidatePrice}, the engine ${told.price?.with}`);
          continue;
        }
        // What refused the command without the selected overlays, beyond the price filter.
        const by = /filterOutSameInstanceType|minValues|Balanced/.exec(
          says === 'replacement' ? (e.reason ?? '') : '',
        )?.[0];
        if (launch === undefined || says === 'replacement') {
          const key = by === undefined ? want : `${want} (${by})`;
          decided.set(key, (decided.get(key) ?? 0) + 1);
          continue;
        }
        // Made anyway: the effect is what the two launches give, each on its world's NodeClaim.
        const launchWant = expected(launched, launch.with, launch.without);
        if (e.verdict === 'unknown' && !(launchWant === 'tie' && e.reasonCode === 'tie')) {
          if (!ANYWAY_ABSTAIN.has(e.reasonCode ?? ''))
            fail(`the launches give ${launchWant}, the engine ${e.reasonCode} (${e.reason ?? ''})`);
          const key = `anyway, launch ${e.reasonCode} (judge: ${launchWant})`;
          abstained.set(key, (abstained.get(key) ?? 0) + 1);
          continue;
        }
        if (launchWant === 'order' || (launchWant !== 'tie' && e.verdict !== launchWant)) {
          fail(`the launches give ${launchWant}, the engine ${e.verdict} (${e.reasonCode ?? ''}: ${e.reason ?? ''})`);
          continue;
        }
        const differs =
          told.moments !== undefined
            ? undefined
            : (worldDiffers(e.with, launch.with, 'with the overlays') ??
              worldDiffers(
                e.without,
                launch.without,
                'without them, on the NodeClaim consolidation writes without them',
              ));
        if (differs) {
          fail(differs);
          continue;
        }
        const key = `anyway (${launchWant})`;
        decided.set(key, (decided.get(key) ?? 0) + 1);
      }
    }
    const seconds = (Date.now() - started) / 1000;
    const count = (m: Map<string, number>) =>
      [...m]
        .sort()
        .map(([k, v]) => `${k} ${v}`)
        .join(', ') || 'none';
    const abstentions = [...abstained.values()].reduce((a, b) => a + b, 0);
    const rate = stats.judged === 0 ? 0 : (100 * abstentions) / stats.judged;
    const summary = `${stats.commands} candidate sets in ${last - (ONLY_CASE ?? 0)} clusters, ${seconds.toFixed(1)} s: Karpenter replaced ${stats.replaced} (${stats.spotReplacements} by spot, not recorded), judged ${stats.judged} (${stats.multi} of several nodes, ${stats.sameType} that filterOutSameInstanceType refuses without the selected overlays, ${stats.minValues} with minValues, ${stats.balanced} of Balanced NodePools, ${stats.limited} of NodePools with limits (${stats.limitedAbstained} abstained), ${stats.moment} with an overlay that came or went while Karpenter decided (${stats.momentAbstained} abstained, ${stats.momentFigures} with the figures of one of the moments that fit), ${stats.zoneMinValues} whose zones have minValues (${stats.zoneMinValuesAbstained} abstained), ${stats.capacityMinValues} whose capacity types have minValues (${stats.capacityMinValuesAbstained} abstained); ${stats.balancedRejectedWith} more that Balanced rejects with the overlays too); decided: ${count(decided)}; the engine abstained on ${abstentions} (${rate.toFixed(1)}%): ${count(abstained)}; judge errors ${stats.judgeErrors}`;
    t.comment(summary);
    console.error(`replacement differential: ${summary}, seed ${SEED}`);
    if (ONLY_CASE !== undefined) return;
    const caused = [...decided].filter(([k]) => k.startsWith('replacement')).reduce((a, [, v]) => a + v, 0);
    t.ok(caused > 0, 'replacements the overlays caused occur');
    t.ok(decided.has('replacement (filterOutSameInstanceType)'), 'filterOutSameInstanceType decides some');
    t.ok(decided.has('replacement (minValues)'), 'minValues decides some');
    t.ok(decided.has('replacement (Balanced)'), 'Balanced scoring decides some');
    const anyway = [...decided].filter(([k]) => k.startsWith('anyway')).reduce((a, [, v]) => a + v, 0);
    t.ok(anyway > 0, 'replacements that happen anyway occur');
    t.ok(
      (decided.get('anyway (instance-type)') ?? 0) > 0,
      'replacements made anyway that would have launched another type occur',
    );
    t.ok(stats.limited > 0, 'replacements in NodePools with limits occur');
    t.ok(stats.moment > stats.momentAbstained, 'replacements decided while the overlays changed occur');
    t.ok(abstentions < stats.judged * 0.25, `the engine abstains on few (${abstentions} of ${stats.judged})`);
  },
);

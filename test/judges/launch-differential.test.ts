// Karpenter's AWS provider's own launch code judges the effect. Each generated case
// (test/judges/launch-cases.ts) goes to the v1.14.3 judge (test/judges/oracle, launch_aws.go),
// which prices the catalog with Karpenter's NodeOverlay controller and store in two worlds (every
// overlay; only those not selected), and runs the AWS provider's instance provider Create for each
// NodeClaim over its fake EC2 API, capturing CreateFleet: capacity type, allocation strategy,
// overrides and priorities, and EC2's documented pick on top. The engine gets what the watcher
// gets live, through `decide`: the registered node (one of the types the judge says EC2 launches
// with the overlays), its NodeClaim, the NodePools, the overlays with the statuses Karpenter wrote,
// the prices and the EC2NodeClass's zones. Where the judge decides, the engine must give the same
// effect and the same launch without the overlays; where EC2 decides (a tie, the pool of a spot
// launch) or the catalog's order does (Karpenter's cut at 60 types), the engine must say unknown.
//
// VENEER_LAUNCH_ORACLE_LAUNCHES sets the launches (default 20,000), VENEER_LAUNCH_ORACLE_SEED replays a run,
// and with it VENEER_LAUNCH_ORACLE_CASE replays the one case a failure names.
import t from 'tap';
import {
  decide,
  parseSelector,
  recordKeys,
  toNodeClaimView,
  toNodeView,
  type Effect,
  type EngineSettings,
} from '../../src/engine/index.ts';
import type { LaunchKnowledge } from '../../src/engine/decide.ts';
import { KarpenterJudge, type LaunchAnswer } from './karpenter-oracle.ts';
import { Choices } from './karpenter-cluster.ts';
import { catalogPrices, judgedIndex } from './judged-cluster.ts';
import { generateLaunchCase, nodeLabelsOfType, type LaunchCase } from './launch-cases.ts';
import { logAnswer } from '../support/answer-log.ts';
import { expected, worldDiffers } from './launch-verdict.ts';

const CLAIMS_PER_CASE = 8;
const IN_FLIGHT = 32;
const LAUNCHES = Number(process.env.VENEER_LAUNCH_ORACLE_LAUNCHES ?? 20_000);
const SEED = Number(process.env.VENEER_LAUNCH_ORACLE_SEED ?? Date.now() % 1_000_000);
const ONLY_CASE =
  process.env.VENEER_LAUNCH_ORACLE_CASE === undefined ? undefined : Number(process.env.VENEER_LAUNCH_ORACLE_CASE);
const settings: EngineSettings = { keys: recordKeys('veneer.io'), gracePeriodMs: 60_000, provider: 'auto' };
const policy = { selector: parseSelector('app.kubernetes.io/managed-by=veneer'), requireOverlayReady: true };
const T0 = Date.parse('2026-02-01T10:00:00Z');

/** Abstentions that are the engine's by design: what a cluster does not show, or shows only approximately. */
const ABSTAIN = new Set(['candidates-cut', 'conflict', 'truncation']);

function engineEffects(c: LaunchCase, answer: LaunchAnswer): (Effect | undefined)[][] {
  const index = judgedIndex(c.request, answer.statuses, policy, T0 - 3_600_000);
  const types = new Map(c.request.instanceTypes.map((x) => [x.name, nodeLabelsOfType(x)]));
  const launch: LaunchKnowledge = {
    prices: catalogPrices(c.catalog, T0),
    zonesOf: () => new Set(c.zones),
    instanceLabels: types,
  };
  return c.request.claims.map((claim, i) => {
    const w = answer.claims[i]!.with;
    if (w.capacityType !== 'on-demand' || w.error) return [];
    return (w.picks ?? []).slice(0, 2).map((launched) => {
      const zone = w.overrides!.find((o) => o.instanceType === launched)!.zone;
      const name = `n${i}-${launched}`;
      const claimObject = {
        metadata: {
          name: `${name}-claim`,
          labels: {
            'karpenter.sh/nodepool': claim.nodePool,
            'karpenter.sh/capacity-type': 'on-demand',
            'node.kubernetes.io/instance-type': launched,
          },
          creationTimestamp: new Date(T0).toISOString(),
          annotations: (w.priceOverlayApplied ? { 'karpenter.sh/price-overlay-applied': 'true' } : {}) as Record<
            string,
            string
          >,
        },
        spec: {
          nodeClassRef: { group: 'karpenter.k8s.aws', kind: 'EC2NodeClass', name: 'default' },
          requirements: claim.requirements,
        },
        status: { providerID: `aws:///${zone}/i-${i}`, nodeName: name },
      };
      const node = {
        metadata: {
          name,
          creationTimestamp: new Date(T0 + 5_000).toISOString(),
          labels: {
            ...types.get(launched),
            'karpenter.sh/nodepool': claim.nodePool,
            'karpenter.sh/capacity-type': 'on-demand',
            'topology.kubernetes.io/zone': zone,
            'karpenter.sh/registered': 'true',
          },
        },
        spec: { providerID: `aws:///${zone}/i-${i}` },
      };
      const d = decide(
        {
          node: toNodeView(node),
          nodeClaim: toNodeClaimView(claimObject),
          now: T0 + 10_000,
          decidedBy: 'reconciler',
          launch,
        },
        index,
        settings,
      );
      return d.outcome === 'influenced' || d.outcome === 'not-influenced' ? d.effect : undefined;
    });
  });
}

const judge = new KarpenterJudge('v1.14.3');
t.teardown(() => judge.close());

t.test(
  `${ONLY_CASE === undefined ? `${LAUNCHES} launches` : `case ${ONLY_CASE}`}: the engine's effect is what Karpenter's AWS launch code does without the selected overlays`,
  async (t) => {
    t.comment(`seed ${SEED} (rerun with VENEER_LAUNCH_ORACLE_SEED=${SEED})`);
    const verdicts = new Map<string, number>();
    const abstained = new Map<string, number>();
    const stats = {
      launches: 0,
      claims: 0,
      spotLaunches: 0,
      judgeErrors: 0,
      ties: 0,
      orderDependent: 0,
      candidates: 0,
      maxCandidates: 0,
      withUnselected: 0,
    };
    const started = Date.now();
    let cases = 0;
    // Cases go to the judge several at a time (it works on all cores); they are checked in order.
    const ahead: { c: LaunchCase; answer: Promise<LaunchAnswer> }[] = [];
    let generated = ONLY_CASE ?? 0;
    const ask = () => {
      const c = generateLaunchCase(new Choices(SEED * 100_003 + generated++), CLAIMS_PER_CASE);
      ahead.push({ c, answer: judge.launch(c.request) });
    };
    for (let n = generated; ONLY_CASE === undefined ? stats.launches < LAUNCHES : n === ONLY_CASE; n++, cases++) {
      while (ahead.length < (ONLY_CASE === undefined ? IN_FLIGHT : 1)) ask();
      const { c, answer: pending } = ahead.shift()!;
      const answer = await pending;
      if (answer.error) throw new Error(`case ${n}: Karpenter's Reconcile failed: ${answer.error}`);
      const effects = engineEffects(c, answer);
      for (const [i, byPick] of effects.entries())
        for (const [k, e] of byPick.entries()) logAnswer('launch', `${n}/${i}/${k}`, e);
      for (const [i, claim] of c.request.claims.entries()) {
        stats.claims++;
        const { with: w, without: wo } = answer.claims[i]!;
        if (w.error || wo.error) {
          stats.judgeErrors++;
          continue;
        }
        if (w.capacityType !== 'on-demand') {
          stats.spotLaunches++;
          continue;
        }
        const candidates = claim.requirements.find((r) => r.key === 'node.kubernetes.io/instance-type')!.values!.length;
        stats.maxCandidates = Math.max(stats.maxCandidates, candidates);
        for (const [k, launched] of (w.picks ?? []).slice(0, 2).entries()) {
          const e = effects[i]![k];
          const want = expected(launched, w, wo);
          const fail = (why: string) =>
            t.fail(
              `case ${n} (VENEER_LAUNCH_ORACLE_SEED=${SEED} VENEER_LAUNCH_ORACLE_CASE=${n}), claim ${i}, launched ${launched}: ${why}`,
              {
                want,
                engine: e,
                judge: answer.claims[i],
                claim,
                overlays: c.request.overlays,
                statuses: answer.statuses,
              },
            );
          if (!e) return fail('the engine decided nothing');
          stats.launches++;
          stats.candidates += candidates;
          if (c.request.overlays.some((o) => !o.selected)) stats.withUnselected++;
          if (want === 'tie') stats.ties++;
          if (want === 'order') stats.orderDependent++;
          if (e.verdict === 'unknown' && ABSTAIN.has(e.reasonCode ?? '')) {
            abstained.set(
              `${e.reasonCode} (judge: ${want})`,
              (abstained.get(`${e.reasonCode} (judge: ${want})`) ?? 0) + 1,
            );
            continue;
          }
          if (want === 'order') {
            if (e.verdict !== 'unknown')
              return fail(`the launch depends on the catalog's order, and the engine says ${e.verdict}`);
            continue;
          }
          if (want === 'tie') {
            if (e.verdict !== 'unknown' || e.reasonCode !== 'tie')
              return fail(
                `EC2 breaks a tie without the overlays, and the engine says ${e.verdict} (${e.reasonCode ?? ''}: ${e.reason ?? ''})`,
              );
          } else if (e.verdict !== want) {
            return fail(
              `Karpenter's code gives ${want}, the engine ${e.verdict} (${e.reasonCode ?? ''}: ${e.reason ?? ''})`,
            );
          }
          // Both worlds as Karpenter built them: capacity type, strategy, and the types EC2 may launch.
          const differs = worldDiffers(e.with, w, 'with the overlays') ?? worldDiffers(e.without, wo, 'without them');
          if (differs) return fail(differs);
          verdicts.set(want, (verdicts.get(want) ?? 0) + 1);
        }
      }
    }
    const seconds = (Date.now() - started) / 1000;
    const share = (k: number) => `${((100 * k) / stats.launches).toFixed(1)}%`;
    const count = (m: Map<string, number>) =>
      [...m]
        .sort()
        .map(([k, v]) => `${k} ${v}`)
        .join(', ') || 'none';
    t.pass(`${stats.launches} launches in ${cases} clusters agree`);
    const summary = `${stats.launches} launches (${stats.claims} NodeClaims, ${stats.spotLaunches} launched spot, ${stats.judgeErrors} refused by Karpenter) in ${cases} clusters, ${seconds.toFixed(1)} s; decided: ${count(verdicts)}; EC2's tie ${stats.ties}, catalog order ${stats.orderDependent}; the engine abstained: ${count(abstained)}; mean ${Math.round(stats.candidates / stats.launches)} candidates, at most ${stats.maxCandidates}`;
    t.comment(summary);
    console.error(`launch differential: ${summary}, seed ${SEED}`);
    if (ONLY_CASE !== undefined) return; // one case says nothing of how common each verdict is
    // Cases that never flip a capacity type or move a type would prove little.
    for (const v of ['capacity-type', 'instance-type', 'none'] as const)
      t.ok((verdicts.get(v) ?? 0) > stats.launches * 0.03, `${v} is common (${share(verdicts.get(v) ?? 0)})`);
    t.ok(stats.ties > 0, `EC2's ties occur (${stats.ties})`);
    t.ok(
      stats.withUnselected > stats.launches * 0.2,
      `overlays the selector does not pick are common (${share(stats.withUnselected)})`,
    );
    // The engine abstains by design where the cluster does not show enough: an overlay refused as a
    // Conflict that a selected overlay shares the weight of (which overlay it conflicted with is not
    // in its status), and a tie across Karpenter's cut at 60 types.
    const abstentions = [...abstained.values()].reduce((a, b) => a + b, 0);
    t.ok(abstentions < stats.launches * 0.1, `the engine abstains on few launches (${share(abstentions)})`);
  },
);

// Karpenter's Balanced consolidation (consolidationPolicy: Balanced, v1.14+;
// pkg/controllers/disruption/balanced.go): a command is approved only if, for each Balanced
// NodePool among its candidates, (savings / pool cost) / (disruption / pool disruption) >= 1/k.
// savings is EstimatedSavings (the candidates' prices less the cheapest option's cheapest
// offering, overlays applied; split by the candidates' prices where the command spans pools), the
// pool cost what its ClusterCost sums (pkg/state/cost), the disruption its pods' eviction costs.
// The overlays move the savings and the pool cost, so a move they make worth it can be one
// Karpenter would reject without them. The disruption the watcher cannot see (pods), but Karpenter
// publishes the figures when it approves (ConsolidationApproved: "score S >= threshold T (k: K,
// savings X%, disruption Y%)"), rounded: everything here is an interval, and where the rounding
// leaves the answer open the answer is open.
import { Abstain, abstain } from '../effect/abstain.ts';
import type { PriceBook } from '../effect/prices.ts';
import type { InstanceLabels } from '../effect/types.ts';
import type { NodePoolView } from '../nodepool.ts';
import type { OverlayIndex } from '../overlay-index.ts';
import type { ProviderKeys } from '../providers.ts';
import { NODEPOOL_LABEL } from '../well-known.ts';
import type { ApprovalFigures } from './events.ts';
import type { DisruptionEvidence, DisruptionMark } from './evidence.ts';
import { costMoments, poolCostShift } from './pool-cost.ts';
import type { Standing } from './standing.ts';
import type { BalancedEvidence, DecisionWindow, Interval, PoolOffering } from './types.ts';

const BALANCED = 'Balanced';

/** Float error in Karpenter's sums and ours: a comparison this close is open. */
const EPS = 1e-9;

/** The fractions the printed figures allow: %.1f of each percentage, %.2f of the score, and the score at least 1/k (it was approved). */
function fractions(f: ApprovalFigures): { sf: Interval; df: Interval } {
  const sf = { lo: Math.max(0, f.savingsPct - 0.05) / 100, hi: (f.savingsPct + 0.05) / 100 };
  const df = { lo: Math.max(0, f.disruptionPct - 0.05) / 100, hi: (f.disruptionPct + 0.05) / 100 };
  const score = { lo: Math.max(f.score - 0.005, 1 / f.k), hi: f.score + 0.005 };
  // score = sf / df: each narrows the other.
  return {
    sf: { lo: Math.max(sf.lo, score.lo * df.lo), hi: Math.min(sf.hi, score.hi * df.hi) },
    df: { lo: Math.max(df.lo, sf.lo / score.hi), hi: Math.min(df.hi, sf.hi / score.lo) },
  };
}

/** One Balanced NodePool's part of the command, in both worlds. */
interface PoolTerms {
  readonly pool: string;
  /** Its share of EstimatedSavings with the overlays (exact) and without the selected ones. */
  readonly savingsWith: number;
  readonly savingsWithout: Interval;
  /** Its ClusterCost without the selected overlays less with them. */
  readonly costShift: Interval;
  /** The approvals Karpenter published for this command's part in the pool: several, when the window holds several. */
  readonly approvals: readonly ApprovalFigures[];
}

/** One approval's answer for a pool: approved or not without the selected overlays, or left open (an abstention). */
type PoolAnswer = { approved: true } | { approved: false; why: string } | Abstain;

const open = (reason: string) => abstain('balanced', reason);

const fmt = (n: number) => (Number.isFinite(n) ? n.toFixed(3) : String(n));

/** Whether Balanced scoring approves the pool's part without the selected overlays, from one approval's figures. */
function scoreWithout(t: PoolTerms, f: ApprovalFigures): PoolAnswer {
  const { sf, df } = fractions(f);
  if (!(t.savingsWith > 0) || sf.hi <= 0 || df.lo <= 0 || sf.lo > sf.hi || df.lo > df.hi)
    return open(
      `its approval (savings ${f.savingsPct}%, disruption ${f.disruptionPct}%) does not fit the savings known`,
    );
  // The pool cost Karpenter divided by, then moved by the selected overlays.
  const costWith = { lo: t.savingsWith / sf.hi, hi: sf.lo > 0 ? t.savingsWith / sf.lo : Number.POSITIVE_INFINITY };
  const cost = { lo: costWith.lo + t.costShift.lo, hi: costWith.hi + t.costShift.hi };
  if (!(cost.lo > 0)) return open('its cost without the selected overlays may be none at all');
  const s = t.savingsWithout;
  const sfWithout = {
    lo: s.lo >= 0 ? s.lo / cost.hi : s.lo / cost.lo,
    hi: s.hi >= 0 ? s.hi / cost.lo : s.hi / cost.hi,
  };
  const score = { lo: sfWithout.lo / df.hi, hi: sfWithout.hi / df.lo };
  const threshold = 1 / f.k;
  const told = `score ${fmt(score.lo)} to ${fmt(score.hi)} against ${fmt(threshold)} (savings ${f.savingsPct}% with them, disruption ${f.disruptionPct}%)`;
  if (sfWithout.lo > 0 && score.lo >= threshold * (1 + EPS)) return { approved: true };
  if (sfWithout.hi <= 0 || score.hi < threshold * (1 - EPS))
    return { approved: false, why: `Balanced consolidation would reject it: NodePool ${t.pool}'s ${told}` };
  return open(`NodePool ${t.pool}'s ${told}, which the rounding of Karpenter's figures leaves open`);
}

/** Without an approval seen: it stands only where it saves at least as large a share of a cost no larger. */
function unscored(t: PoolTerms, window: string): PoolAnswer {
  if (t.costShift.hi <= 0 && t.savingsWithout.lo >= t.savingsWith * (1 + EPS)) return { approved: true };
  return open(
    `NodePool ${t.pool} consolidates Balanced and no ConsolidationApproved Event of this command was seen (${window}): its score without the selected overlays is not known`,
  );
}

/**
 * Whether the command, standing without the selected overlays by price, is approved there by
 * Balanced scoring: rejected in one pool is rejected; several approvals in the window must agree.
 */
function balancedWithout(pools: readonly PoolTerms[], window: string): Standing | Abstain {
  let undecided: Abstain | undefined;
  for (const t of pools) {
    const answers = t.approvals.length === 0 ? [unscored(t, window)] : t.approvals.map((f) => scoreWithout(t, f));
    const rejected = answers.flatMap((a) => (a instanceof Abstain || a.approved ? [] : [a]));
    if (rejected.length === answers.length) return { stands: false, why: rejected[0]!.why };
    if (answers.every((a) => !(a instanceof Abstain))) {
      if (rejected.length === 0) continue;
      undecided ??= open(`the ConsolidationApproved Events of NodePool ${t.pool} within the window disagree`);
    }
    for (const a of answers) if (a instanceof Abstain) undecided ??= a;
  }
  return undecided ?? { stands: true };
}

/** The command as the price test saw it. */
export interface CommandTerms {
  /** The replaced nodes' summed prices by NodePool, in both worlds, with the NodePool as of the marks. */
  readonly byPool: ReadonlyMap<string, { with: number; without: number; view: NodePoolView | undefined }>;
  readonly total: { readonly with: number; readonly without: number };
  /** EstimatedSavings with the overlays. */
  readonly savingsWith: number;
  /** The cheapest option's cheapest offering without the selected overlays, as far as the options are known. */
  readonly cheapestWithout: Interval;
}

interface PricingContext {
  readonly provider: ProviderKeys;
  readonly prices: PriceBook;
  readonly instanceLabels: InstanceLabels | undefined;
}

export const isBalanced = (pool: NodePoolView | undefined) => pool?.consolidationPolicy === BALANCED;

/**
 * Balanced scoring of a command that stands without the selected overlays by price; undefined
 * where none of its NodePools is Balanced. EvaluateBalancedMove splits the savings between pools
 * by their candidates' prices.
 */
export function balancedTest(
  terms: CommandTerms,
  evidence: BalancedEvidence | undefined,
  ctx: PricingContext,
): Standing | Abstain | undefined {
  const balanced = [...terms.byPool].filter(([, p]) => isBalanced(p.view));
  if (balanced.length === 0) return undefined;
  const unknownPool = (name: string) =>
    open(`NodePool ${name} consolidates Balanced, and its NodeClaims are not known here`);
  if (evidence === undefined) return unknownPool(balanced[0]![0]);
  const split = terms.byPool.size > 1;
  const share = (part: number, total: number) => (split && total > 0 ? part / total : 1);
  const moments = evidence.costMoments(ctx);
  if (moments instanceof Abstain) return moments;
  const pools: PoolTerms[] = [];
  for (const [name, p] of balanced) {
    const offerings = evidence.offeringsOf(name);
    if (offerings === undefined) return unknownPool(name);
    const shift = poolCostShift({
      offerings,
      pool: p.view!,
      provider: ctx.provider,
      prices: ctx.prices,
      moments,
      instanceLabels: ctx.instanceLabels,
    });
    if (shift instanceof Abstain) return shift;
    const without = share(p.without, terms.total.without);
    pools.push({
      pool: name,
      savingsWith: terms.savingsWith * share(p.with, terms.total.with),
      savingsWithout: {
        lo: (terms.total.without - terms.cheapestWithout.hi) * without,
        hi: (terms.total.without - terms.cheapestWithout.lo) * without,
      },
      costShift: shift,
      approvals: evidence.approvals(name),
    });
  }
  return balancedWithout(pools, evidence.window);
}

const iso = (t: number) => new Date(t).toISOString();

/**
 * What Balanced scoring read of the command, as far as the watcher saw it: the approvals
 * Karpenter published within the window (ApproveCommand runs between the computation and the
 * validation; its Events are deduplicated for two minutes per object, so an older one is another
 * command's), the pools' NodeClaims created by its end, and the overlays of the hour before, when
 * ClusterCost may have priced them.
 */
export function balancedEvidence(
  window: DecisionWindow,
  candidates: readonly DisruptionMark[],
  evidence: DisruptionEvidence | undefined,
  index: OverlayIndex,
  poolOfferings: ((pool: string, createdBefore: number) => readonly PoolOffering[] | undefined) | undefined,
): BalancedEvidence {
  const one = candidates.length === 1 ? candidates[0] : undefined;
  return {
    approvals: (pool) => {
      const found =
        one === undefined
          ? evidence?.approvalsBetween?.('NodePool', pool, window.from, window.to)
          : one.labels[NODEPOOL_LABEL] === pool
            ? evidence?.approvalsBetween?.('NodeClaim', one.nodeClaim, window.from, window.to)
            : undefined;
      return (found ?? []).map((a) => a.figures);
    },
    offeringsOf: (pool) => poolOfferings?.(pool, window.to),
    costMoments: (ctx) => costMoments(index, window, ctx),
    get window() {
      return `between ${iso(window.from)} and ${iso(window.to)}`;
    },
  };
}

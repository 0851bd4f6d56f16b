// The moment a consolidation's command was priced at, and so the overlays it was priced with.
// Karpenter computes a command (pricing candidates and options with the overlays of that moment,
// and publishing ConsolidationCandidate Events on the candidates), waits 15 s to validate it
// (validation.go re-simulates the scheduling; it does not price again), then marks the candidates
// and creates the replacement (queue.go). So the prices that decided a replacement are those of a
// moment before its marks, not of its NodeClaim's creation: an overlay deleted or changed while
// Karpenter validated did decide it.
import { abstain } from '../effect/abstain.ts';
import type { DisruptionStory, Effect } from '../effect/types.ts';
import type { OverlayIndex } from '../overlay-index.ts';
import type { DisruptionMark } from './evidence.ts';
import type { DecisionWindow } from './types.ts';

/** Consolidation's validation wait (validation.go): the command was computed at least this long before its marks. */
export const VALIDATION_MS = 15_000;
/**
 * SingleNodeConsolidation's timeout (3 min; MultiNodeConsolidation's is 1 min): without a
 * ConsolidationCandidate Event, the computation began at most this long before it was validated.
 */
export const COMPUTE_MAX_MS = 3 * 60_000;

/**
 * Karpenter's recorder drops an Event whose dedupe values it published this recently
 * (events/recorder.go): a ConsolidationCandidate Event's are its object and command text, not its figures.
 */
export const EVENT_DEDUPE_MS = 2 * 60_000;

/**
 * `candidateAt(nodeClaim, notAfter)`: the latest ConsolidationCandidate Event on that NodeClaim
 * no later than `notAfter`. Karpenter publishes it as it computes a command (before the command
 * has an ID: the message is the same each time the same move is computed) and dedupes it for two
 * minutes, so an Event may be older than the computation: it bounds it below. It bounds it above
 * too: a computation more than two minutes after a candidate's latest Event would have published
 * another (nothing is computed between a command and its marks but its validation).
 */
export function decisionWindow(
  replaced: readonly DisruptionMark[],
  candidateAt: ((nodeClaim: string, notAfter: number) => number | undefined) | undefined,
): DecisionWindow | undefined {
  if (replaced.length === 0) return undefined;
  // Whole seconds: the mark may have been made up to a second after its timestamp.
  const to = Math.min(...replaced.map((m) => m.markedAt)) - VALIDATION_MS + 1_000;
  let told: number | undefined;
  let earliest = Number.POSITIVE_INFINITY;
  for (const m of replaced) {
    const at = candidateAt?.(m.nodeClaim, to);
    if (at === undefined) continue;
    if (told === undefined || at > told) told = at;
    earliest = Math.min(earliest, at);
  }
  if (told === undefined) return { from: to - COMPUTE_MAX_MS, to, told: false };
  // Whole seconds again: the Event may have been published up to a second after its timestamp.
  const deduped = earliest + EVENT_DEDUPE_MS + 1_000;
  // Events further apart than that were not all of this command: the dedupe bounds nothing then.
  return { from: told, to: deduped >= told ? Math.min(to, deduped) : to, told: true };
}

/**
 * One moment for each set of overlays in force within the window: its start and every change in
 * it, less those `fits` rules out. The scheduler annotates a NodeClaim
 * (karpenter.sh/price-overlay-applied) exactly when an overlay priced an offering of one of its
 * types, so a moment whose overlays would annotate it otherwise than it is was not the one
 * Karpenter priced at (the window's start is often such a moment: Karpenter publishes a node's
 * ConsolidationCandidate Event once per two minutes for the same command, and an Event from before
 * the overlay came may be the latest). If every moment is ruled out, none is.
 */
export function momentsWithin(
  index: OverlayIndex,
  window: DecisionWindow,
  fits: (moment: number) => boolean,
): number[] {
  const moments = [window.from, ...index.changesBetween(window.from, window.to)];
  if (moments.length === 1) return moments;
  const fitting = moments.filter(fits);
  return fitting.length > 0 ? fitting : moments;
}

/**
 * The effect of the moment Karpenter decided at, from the effects of each moment the window
 * holds. A moment whose prices do not reproduce the options Karpenter kept (`replaced-prices`) is
 * not the one it priced with; of the others, one verdict stands only if all agree.
 */
export function effectAtDecision(window: DecisionWindow, effects: readonly { at: number; effect: Effect }[]): Effect {
  const last = effects.at(-1)!.effect;
  if (effects.length === 1) return last;
  const fitting = effects.filter((e) => e.effect.reasonCode !== 'replaced-prices');
  if (fitting.length === 0) return last;
  const first = fitting[0]!.effect;
  if (fitting.every((e) => sameVerdict(e.effect, first))) {
    const latest = fitting.at(-1)!.effect;
    // The verdict holds whichever Karpenter priced with; its figures need not: say they are one moment's.
    if (fitting.length === 1 || latest.disruption === undefined || fitting.every((e) => sameFigures(e.effect, latest)))
      return latest;
    return { ...latest, disruption: { ...latest.disruption, moments: fitting.length } };
  }
  const changes = fitting.map((e) => new Date(e.at).toISOString()).join(', ');
  return abstain(
    'decision-moment',
    `the overlays in force changed (${changes}) while Karpenter decided this replacement (between ${iso(window.from)} and ${iso(window.to)}${window.told ? '' : ', no ConsolidationCandidate Event seen'}), and the effect depends on which it priced with`,
  ).effect({ ...(last.disruption ? { disruption: commandFacts(last.disruption) } : {}) });
}

/** What a story tells of the command whatever moment it was priced at: its prices and conclusions are each moment's own. */
function commandFacts(d: DisruptionStory): DisruptionStory {
  const {
    price: _price,
    savings: _savings,
    cheaperWithout: _cheaper,
    replacedWithout: _without,
    moments: _moments,
    ...facts
  } = d;
  return { ...facts, replaced: d.replaced.map(({ price: _p, ...r }) => r) };
}

const iso = (t: number) => new Date(t).toISOString();

const sameFigures = (a: Effect, b: Effect) =>
  JSON.stringify([a.disruption?.price, a.with, a.without, a.launched]) ===
  JSON.stringify([b.disruption?.price, b.with, b.without, b.launched]);

function sameVerdict(a: Effect, b: Effect): boolean {
  return a.verdict === b.verdict && (a.verdict !== 'unknown' || a.reasonCode === b.reasonCode);
}

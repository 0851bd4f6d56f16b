// The verdict: what the selected overlays changed about the offering that was launched, read from
// the replay of its NodeClaim in both worlds (effect.ts).
import { Abstain, abstain } from './abstain.ts';
import { type Launch, type LaunchChosen, MAX_LAUNCH_TYPES } from './aws-launch.ts';
import type { PriceBook } from './prices.ts';
import { type Effect, type EffectInput, type LaunchStory, MAX_TYPES_SHOWN } from './types.ts';
import type { PricedCandidate } from './worlds.ts';

/** The first `n` of `names` in sorted order, without sorting all of them (a tie can hold hundreds). */
function firstSorted(names: readonly string[], n: number): string[] {
  const out: string[] = [];
  for (const name of names) {
    if (out.length === n && name >= out[n - 1]!) continue;
    let i = out.length;
    while (i > 0 && out[i - 1]! > name) i--;
    out.splice(i, 0, name);
    if (out.length > n) out.pop();
  }
  return out;
}

export function worldLaunch(l: Launch, prices: PriceBook, atCut: boolean): LaunchStory {
  const single = l.picks.length === 1 && l.capacityType === 'on-demand' ? prices.onDemand(l.picks[0]!) : undefined;
  return {
    capacityType: l.capacityType,
    strategy: l.strategy,
    instanceTypes: firstSorted(l.picks, MAX_TYPES_SHOWN),
    instanceTypeCount: l.picks.length,
    ...(single !== undefined ? { listPrice: single } : {}),
    ...(atCut ? { atCut } : {}),
  };
}

/** Both worlds' launches for a NodeClaim: all that does not depend on which of its candidates was launched. */
export interface Replay {
  /** The candidates as the overlays priced them. */
  readonly priced: readonly PricedCandidate[];
  readonly context: Pick<Effect, 'overlays' | 'prices'>;
  /** Set when the replay stopped early: an unknown that holds whatever was launched. */
  readonly abstained?: Abstain;
  readonly withLaunch?: LaunchChosen;
  readonly predicted?: LaunchStory;
  /** `sameRequest` undefined: a cut straddled in either world leaves the requests' tails to Karpenter's sort. */
  readonly without?: Abstain | { launch: Launch; world: LaunchStory; sameRequest: boolean | undefined };
}

/** The effect for the launched offering, from the NodeClaim's replay. */
export function verdictFor(r: Replay, launchedAs: EffectInput['launched']): Effect {
  const launchedType = launchedAs.instanceType;
  const offer =
    launchedType === undefined
      ? undefined
      : r.priced
          .find((c) => c.type.name === launchedType)
          ?.offerings.find((o) => o.capacityType === launchedAs.capacityType);
  const launched = offer ? { launched: { listPrice: offer.list, price: offer.price } } : {};
  const base = { ...r.context, ...launched };
  if (r.abstained) return r.abstained.effect(base);
  const predicted = r.predicted!;
  // With the overlays an ambiguous cut is no matter where the launch agrees with the widest survival
  // on-demand: the launched type survived it. Spot there could have been cut away.
  if (
    r.withLaunch?.cutAmbiguous !== undefined &&
    predicted.capacityType === 'spot' &&
    launchedAs.capacityType === 'on-demand'
  ) {
    return abstain('truncation', r.withLaunch.cutAmbiguous).effect({ ...base, with: predicted });
  }
  if (
    predicted.capacityType !== launchedAs.capacityType ||
    launchedType === undefined ||
    !r.withLaunch!.launch.picks.includes(launchedType)
  ) {
    return abstain(
      'fallback',
      `Karpenter's prices predict ${predicted.capacityType} ${names(predicted)}, and ${launchedAs.capacityType} ${launchedType} was launched: a capacity fallback, or prices that have moved since`,
    ).effect({ ...base, with: predicted });
  }
  const w = r.without!;
  if (w instanceof Abstain) return w.effect({ ...base, with: predicted });
  const without = w.world;
  const both = { ...base, with: predicted, without };
  // The same CreateFleet request either way (another overlay prices those offerings alike): whatever EC2 does with it, the selected overlays changed nothing.
  if (w.sameRequest)
    return {
      verdict: 'none',
      reason: 'without the selected overlays Karpenter would send the same CreateFleet request',
      ...both,
    };
  if (without.capacityType === 'spot') return { verdict: 'capacity-type', ...both };
  if (!w.launch.picks.includes(launchedType)) return { verdict: 'instance-type', ...both };
  if (w.launch.picks.length === 1) return { verdict: 'none', ...both };
  // EC2 breaks a tie in both worlds, over requests that may or may not be the same.
  if (w.sameRequest === undefined) {
    return abstain(
      'truncation',
      `candidates priced alike straddle Karpenter's cut at ${MAX_LAUNCH_TYPES} types, so which of them each CreateFleet request lists is its sort's choice: whether EC2 would break the tie between ${names(without)} alike without the selected overlays is not known`,
    ).effect(both);
  }
  return abstain('tie', `without the selected overlays EC2 would break a tie between ${names(without)}`).effect(both);
}

const names = (l: LaunchStory) =>
  `${l.instanceTypes.join(', ')}${l.instanceTypeCount > l.instanceTypes.length ? ` and ${l.instanceTypeCount - l.instanceTypes.length} more` : ''}`;

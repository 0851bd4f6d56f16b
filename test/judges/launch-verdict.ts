// What the launch judge's two launches (test/judges/oracle launch_aws.go: Karpenter's AWS launch
// code, one per world) say the effect is, and whether the engine built a world's launch as Karpenter
// did: shared by the launch differential and the replacement differential, which judges the launch
// of a replacement made anyway on the NodeClaims Karpenter's consolidation writes in each world.
import type { Effect } from '../../src/engine/index.ts';
import type { WorldLaunchAnswer } from './karpenter-oracle.ts';

/** What the judge says of one launch: a verdict it decides, or what decides instead. */
type Expected = 'capacity-type' | 'instance-type' | 'none' | 'tie' | 'order';

/** The same CreateFleet request in both worlds: whatever EC2 does with it, the overlays changed nothing. */
function sameRequest(w: WorldLaunchAnswer, wo: WorldLaunchAnswer): boolean {
  const key = (x: WorldLaunchAnswer) =>
    JSON.stringify([
      x.capacityType,
      x.strategy,
      (x.overrides ?? []).map((o) => `${o.instanceType}/${o.zone}/${o.priority}`).sort(),
    ]);
  return key(w) === key(wo);
}

export function expected(launched: string, w: WorldLaunchAnswer, wo: WorldLaunchAnswer): Expected {
  // Which types survive the cut with the overlays is no matter: one of them was launched. Without
  // them it decides the launch.
  if (wo.orderDependent) return 'order';
  if (sameRequest(w, wo)) return 'none';
  if (wo.capacityType === 'spot') return 'capacity-type';
  if (!(wo.picks ?? []).includes(launched)) return 'instance-type';
  return (wo.picks ?? []).length === 1 ? 'none' : 'tie';
}

/** Where the engine's launch in one world differs from Karpenter's: capacity type, strategy, and the types EC2 may launch. */
export function worldDiffers(mine: Effect['with'], theirs: WorldLaunchAnswer, world: string): string | undefined {
  if (!mine || mine.capacityType !== theirs.capacityType || mine.strategy !== theirs.strategy)
    return `${world}: ${mine?.capacityType}/${mine?.strategy} against ${theirs.capacityType}/${theirs.strategy}`;
  if (theirs.capacityType !== 'on-demand') return undefined;
  const picks = [...(theirs.picks ?? [])].sort();
  // Past a cut at 60 that split a tie, the engine names every type that could have survived it.
  if (mine.atCut)
    return picks.every((p) => mine.instanceTypes.includes(p) || mine.instanceTypeCount > mine.instanceTypes.length)
      ? undefined
      : `${world}: ${picks} not among ${mine.instanceTypes}`;
  if (
    mine.instanceTypeCount !== picks.length ||
    JSON.stringify(mine.instanceTypes) !== JSON.stringify(picks.slice(0, mine.instanceTypes.length))
  )
    return `${world}: ${mine.instanceTypes} (${mine.instanceTypeCount}) against ${picks}`;
  return undefined;
}

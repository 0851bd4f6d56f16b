// The launch of a replacement Karpenter's consolidation makes in both worlds, as its AWS launch code
// (test/judges/oracle launch_aws.go) makes it: with the overlays on the NodeClaim consolidation
// wrote with them, and without the selected ones on the NodeClaim it writes without them, whose
// options are the types that undercut the replaced nodes in that world. The engine's effect of a
// replacement made anyway is the one these two launches give (test/judges/launch-verdict.ts).
import type { ConsolidateAnswer, KarpenterJudge, WorldLaunchAnswer } from './karpenter-oracle.ts';
import type { ConsolidationCase } from './replacement-cases.ts';

export interface ReplacementLaunches {
  /** The launch with the overlays, of the NodeClaim consolidation wrote with them. */
  readonly with: WorldLaunchAnswer;
  /** The launch without the selected overlays, of the NodeClaim consolidation writes without them. */
  readonly without: WorldLaunchAnswer;
}

const onDemandOnly = (w: ConsolidateAnswer['commands'][number]['with']) => {
  const ct = w.replacement?.requirements.find((r) => r.key === 'karpenter.sh/capacity-type')?.values ?? [];
  return w.decision === 'replace' && ct.includes('on-demand') && !ct.includes('spot');
};

/** Each command consolidation replaces by an on-demand node in both worlds, by its index, with both launches. */
export async function replacementLaunches(
  judge: KarpenterJudge,
  c: ConsolidationCase,
  answer: ConsolidateAnswer,
): Promise<Map<number, ReplacementLaunches>> {
  const judged = [...answer.commands.entries()].filter(([, k]) => onDemandOnly(k.with) && onDemandOnly(k.without));
  if (answer.error || judged.length === 0) return new Map();
  const claims = judged.flatMap(([, k]) =>
    [k.with.replacement!, k.without.replacement!].map((r) => ({ nodePool: r.nodePool, requirements: r.requirements })),
  );
  const launched = await judge.launch({
    instanceTypes: c.request.instanceTypes,
    nodePools: c.request.nodePools,
    overlays: c.request.overlays,
    zones: c.zones,
    claims,
    orders: 3,
  });
  if (launched.error) throw new Error(`the launch judge could not run the replacements: ${launched.error}`);
  return new Map(
    judged.map(([i], k) => [i, { with: launched.claims[2 * k]!.with, without: launched.claims[2 * k + 1]!.without }]),
  );
}

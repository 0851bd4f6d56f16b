// The types that are not the replacement's options but could have been: the catalog's that
// Karpenter may have cut by price (or, for several nodes, by filterOutSameInstanceType), and the
// candidates' own types, each priced in both worlds. Whether the pods fit them the watcher does not
// see; what their names, a node of theirs and the NodeClaim tell narrows them (fit.ts).
import { Abstain, abstain } from '../effect/abstain.ts';
import type { CandidateType } from '../effect/candidates.ts';
import { candidateTypes } from '../effect/effect.ts';
import type { ClaimForEffect, InstanceLabels } from '../effect/types.ts';
import { type PricedCandidate, priceWorld, type Worlds } from '../effect/worlds.ts';
import { Memo } from '../memo.ts';
import type { ProviderKeys } from '../providers.ts';
import type { Labels } from '../requirements.ts';
import { exactFitOf, fitShown, tooSmall } from './fit.ts';
import type { Room } from './limits.ts';
import { type FilterRequirements, type OptionSetting, optionsWorld, pricedBoth, worstLaunchPrice } from './prices.ts';
import type { Candidate } from './types.ts';

/** A type Karpenter may have cut, in both worlds; a world undefined: an overlay may or may not price it there. */
export interface CutType {
  readonly type: CandidateType;
  readonly with: PricedCandidate | undefined;
  readonly without: PricedCandidate | undefined;
  /** The pods are shown to fit it, within the NodePool's limits: it was no option only if Karpenter cut it. */
  readonly fits: boolean;
  /** Whether the NodePool's limits left it room is not known (limits.ts). */
  readonly roomUnsure?: boolean;
}

/** A cut type priced in both worlds. */
export interface PricedCutType extends CutType {
  readonly with: PricedCandidate;
  readonly without: PricedCandidate;
}

/** What the cut types are found and priced from. */
export interface CutSetting extends OptionSetting {
  readonly worlds: Worlds;
  /** The price filter's requirements. */
  readonly reqs: FilterRequirements;
  /** The command's candidates: their NodeClaims tell what their own types hold. */
  readonly candidates: readonly Candidate[];
  /** Where the replacement's NodePool has limits: each type's room in them (limits.ts). */
  readonly room?: (type: CandidateType) => Room;
  /** A type's zones as its requirements hold them, where the NodeClass's subnets and the offerings are known. */
  readonly zonesOf?: (type: CandidateType) => readonly string[] | undefined;
}

/**
 * The catalog's types that are not options but could have been: allowed by the replacement's
 * requirements as far as their names tell, not among `exclude`, and undercutting the candidates
 * without the selected overlays (or priced there by an overlay that may or may not apply).
 */
export function catalogCutTypes(
  s: CutSetting,
  totalWithout: number,
  exclude: ReadonlySet<string>,
): CutType[] | Abstain {
  const catalog = s.prices.instanceTypes?.();
  if (catalog === undefined)
    return abstain(
      'unseen-options',
      `the price source (${s.prices.source}) does not list its instance types: the options Karpenter cut by price are not known`,
    );
  const { claim, provider } = s;
  const exact = exactFitOf(s);
  const types = UNLISTED.of(claim.candidates, {
    catalog,
    pinned: claim.pinned,
    allowed: claim.allowed,
    instanceLabels: s.instanceLabels,
    provider,
  }).filter(
    (type) =>
      !exclude.has(type.name) &&
      !tooSmall(type, claim, s.candidates) &&
      exact(type) !== false &&
      s.room?.(type) !== 'over',
  );
  const world = { ...optionsWorld([], s), candidates: types };
  const all = { with: priceWorld(world, s.worlds.with), without: priceWorld(world, s.worlds.without) };
  const fits = fitsOf(s);
  // One type an overlay may or may not price leaves the whole list unknown: then type by type.
  const priced: CutType[] =
    all.with instanceof Abstain || all.without instanceof Abstain
      ? types.map((type) => {
          const one = { ...world, candidates: [type] };
          const w = priceWorld(one, s.worlds.with);
          const wo = priceWorld(one, s.worlds.without);
          return {
            type,
            with: w instanceof Abstain ? undefined : w[0],
            without: wo instanceof Abstain ? undefined : wo[0],
            ...fits(type),
          };
        })
      : types.map((type, i) => ({
          type,
          with: (all.with as readonly PricedCandidate[])[i],
          without: (all.without as readonly PricedCandidate[])[i],
          ...fits(type),
        }));
  return priced.filter((p) => p.without === undefined || worstLaunchPrice(p.without, s.reqs) < totalWithout);
}

/**
 * The candidates' types that are not options but could have been, priced as options: allowed by
 * the replacement's requirements as far as their names tell, undercutting the candidates in
 * either world.
 */
export function candidateCutTypes(
  names: ReadonlySet<string>,
  s: CutSetting,
  total: { with: number; without: number },
): PricedCutType[] | Abstain {
  const { claim } = s;
  const listed = new Set(claim.candidates);
  const world = optionsWorld(
    [...names].filter((name) => !listed.has(name)),
    s,
  );
  const exact = exactFitOf(s);
  const types = world.candidates.filter(
    (type) =>
      allowedByName(type, claim) &&
      !tooSmall(type, claim, s.candidates) &&
      exact(type) !== false &&
      s.room?.(type) !== 'over',
  );
  const priced = pricedBoth({ ...world, candidates: types }, s.worlds);
  if (priced instanceof Abstain) return priced;
  const fits = fitsOf(s);
  return types
    .map((type, i) => ({ type, with: priced.with[i]!, without: priced.without[i]!, ...fits(type) }))
    .filter(
      (t) => worstLaunchPrice(t.with, s.reqs) < total.with || worstLaunchPrice(t.without, s.reqs) < total.without,
    );
}

/**
 * Whether the pods are shown to fit a type: by Karpenter's own arithmetic where what it reads is
 * known, else from the options Karpenter kept and the candidates' NodeClaims.
 */
const fitsOf = (s: CutSetting) => {
  const exact = exactFitOf(s);
  const shown = fitShown(
    s.claim,
    candidateTypes(s.claim.candidates, s.claim.pinned, s.provider, s.instanceLabels),
    s.provider,
    s.candidates,
  );
  // A type over only what the pool's other nodes may have left: whether it was an option is not known.
  return (type: CandidateType): Pick<CutType, 'fits' | 'roomUnsure'> =>
    s.room?.(type) === 'unsure' ? { fits: false, roomUnsure: true } : { fits: exact(type) ?? shown(type) };
};

interface UnlistedInput {
  readonly catalog: readonly string[];
  readonly pinned: Labels;
  readonly allowed: ClaimForEffect['allowed'];
  readonly instanceLabels: InstanceLabels | undefined;
  readonly provider: ProviderKeys;
}

/** The catalog's types that are not the NodeClaim's options, kept per options list: a burst's NodeClaims share one. */
const UNLISTED = new Memo<readonly string[], UnlistedInput, CandidateType[]>((candidates, input) => {
  const listed = new Set(candidates);
  const claim = { pinned: input.pinned, allowed: input.allowed };
  return candidateTypes(
    input.catalog.filter((name) => !listed.has(name)),
    input.pinned,
    input.provider,
    input.instanceLabels,
  ).filter((type) => allowedByName(type, claim));
}, 1);

/** Whether a type's labels (its name's, and a node's if one was seen) meet the replacement's requirements; keys not known pass. */
function allowedByName(type: CandidateType, claim: Pick<ClaimForEffect, 'pinned' | 'allowed'>): boolean {
  const known = (key: string) => type.known === undefined || type.known.has(key);
  for (const [key, value] of Object.entries(claim.pinned))
    if (known(key) && key in type.labels && type.labels[key] !== value) return false;
  for (const [key, values] of claim.allowed ?? [])
    if (known(key) && key in type.labels && !values.has(type.labels[key]!)) return false;
  return true;
}

// The types that are not the replacement's options but could have been: the catalog's that
// Karpenter may have cut by price (or, for several nodes, by filterOutSameInstanceType), and the
// replaced nodes' own, each priced in both worlds. Whether the pods fit them the watcher does not
// see; what their names, a node of theirs and the NodeClaim tell narrows them (replacement-fit.ts).
import type { NodePoolView } from '../nodepool.ts';
import type { ProviderKeys } from '../providers.ts';
import type { CandidateType } from './candidates.ts';
import type { PriceBook } from './prices.ts';
import { fitShown, tooSmall } from './replacement-fit.ts';
import {
  candidatesOf,
  type FilterRequirements,
  type OptionContext,
  type Stop,
  stop,
  type Worlds,
  worldInputFor,
  worstLaunchPrice,
} from './replacement-prices.ts';
import type { ClaimForEffect } from './types.ts';
import { type PricedCandidate, priceWorld } from './worlds.ts';

/** A type in both worlds; undefined: an overlay may or may not price it there. */
export interface BothWorlds {
  readonly type: CandidateType;
  readonly with: PricedCandidate | undefined;
  readonly without: PricedCandidate | undefined;
  /** The pods are shown to fit it: it was no option only if Karpenter cut it. */
  readonly fits: boolean;
}

export interface PricedBoth extends BothWorlds {
  readonly with: PricedCandidate;
  readonly without: PricedCandidate;
}

/**
 * The catalog's types that are not options but could have been: allowed by the replacement's
 * requirements as far as their names tell, not among `exclude`, and undercutting the replaced
 * nodes without the selected overlays (or priced there by an overlay that may or may not apply).
 */
export function unseenOptions(
  input: OptionContext,
  claim: ClaimForEffect,
  pool: NodePoolView,
  provider: ProviderKeys,
  prices: PriceBook,
  reqs: FilterRequirements,
  worlds: Worlds,
  totalWithout: number,
  exclude: ReadonlySet<string>,
): Stop | BothWorlds[] {
  const catalog = prices.instanceTypes?.();
  if (catalog === undefined)
    return stop(
      'unseen-options',
      `the price source (${prices.source}) does not list its instance types: the options Karpenter cut by price are not known`,
    );
  const types = unlisted(catalog, claim, input, provider).filter(
    (type) => !exclude.has(type.name) && !tooSmall(type, claim, input.replaced),
  );
  const wi = worldInputFor(types, pool, provider, prices, reqs.zones, 'catalog');
  const all = { with: priceWorld(wi, worlds.with), without: priceWorld(wi, worlds.without) };
  // One type an overlay may or may not price leaves the whole list unknown: then type by type.
  const w0 = 'unknown' in all.with ? undefined : all.with.priced;
  const wo0 = 'unknown' in all.without ? undefined : all.without.priced;
  const fits = fitShown(claim, candidatesOf(claim.candidates, claim, input, provider), provider, input.replaced);
  const priced: BothWorlds[] =
    w0 === undefined || wo0 === undefined
      ? types.map((type) => {
          const one = { ...wi, candidates: [type] };
          const w = priceWorld(one, worlds.with);
          const wo = priceWorld(one, worlds.without);
          return {
            type,
            with: 'unknown' in w ? undefined : w.priced[0],
            without: 'unknown' in wo ? undefined : wo.priced[0],
            fits: fits(type),
          };
        })
      : types.map((type, i) => ({ type, with: w0[i], without: wo0[i], fits: fits(type) }));
  return priced.filter((p) => p.without === undefined || worstLaunchPrice(p.without, reqs) < totalWithout);
}

/**
 * The replaced nodes' types that are not options but could have been, priced as options: allowed
 * by the replacement's requirements as far as their names tell, undercutting the replaced nodes
 * in either world.
 */
export function replacedTypes(
  names: ReadonlySet<string>,
  input: OptionContext,
  claim: ClaimForEffect,
  pool: NodePoolView,
  provider: ProviderKeys,
  prices: PriceBook,
  reqs: FilterRequirements,
  worlds: Worlds,
  total: { with: number; without: number },
): Stop | PricedBoth[] {
  const listed = new Set(claim.candidates);
  const types = candidatesOf(
    [...names].filter((name) => !listed.has(name)),
    claim,
    input,
    provider,
  ).filter((type) => allowedByName(type, claim) && !tooSmall(type, claim, input.replaced));
  const wi = worldInputFor(types, pool, provider, prices, reqs.zones, 'options');
  const w = priceWorld(wi, worlds.with);
  if ('unknown' in w) return stop('attributes', w.unknown);
  const wo = priceWorld(wi, worlds.without);
  if ('unknown' in wo) return stop('attributes', wo.unknown);
  const fits = fitShown(claim, candidatesOf(claim.candidates, claim, input, provider), provider, input.replaced);
  return types
    .map((type, i) => ({ type, with: w.priced[i]!, without: wo.priced[i]!, fits: fits(type) }))
    .filter((t) => worstLaunchPrice(t.with, reqs) < total.with || worstLaunchPrice(t.without, reqs) < total.without);
}

/** The catalog's types that are not the NodeClaim's options, kept per options list: a burst's NodeClaims share one. */
const unlistedOf = new WeakMap<
  readonly string[],
  { catalog: readonly string[]; key: string; types: CandidateType[] }
>();

function unlisted(
  catalog: readonly string[],
  claim: ClaimForEffect,
  input: OptionContext,
  provider: ProviderKeys,
): CandidateType[] {
  const key = `${Object.entries(claim.pinned).join(';')}|${JSON.stringify([...(claim.allowed ?? [])].map(([k, v]) => [k, [...v]]))}`;
  const known = unlistedOf.get(claim.candidates);
  if (known?.catalog === catalog && known.key === key) return known.types;
  const listed = new Set(claim.candidates);
  const types = candidatesOf(
    catalog.filter((name) => !listed.has(name)),
    claim,
    input,
    provider,
  ).filter((type) => allowedByName(type, claim));
  unlistedOf.set(claim.candidates, { catalog, key, types });
  return types;
}

/** Whether a type's labels (its name's, and a node's if one was seen) meet the replacement's requirements; keys not known pass. */
function allowedByName(type: CandidateType, claim: ClaimForEffect): boolean {
  const known = (key: string) => type.known === undefined || type.known.has(key);
  for (const [key, value] of Object.entries(claim.pinned))
    if (known(key) && key in type.labels && type.labels[key] !== value) return false;
  for (const [key, values] of claim.allowed ?? [])
    if (known(key) && key in type.labels && !values.has(type.labels[key]!)) return false;
  return true;
}

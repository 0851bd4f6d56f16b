// Consolidation's price filter in one world (scheduling/nodeclaim.go,
// RemoveInstanceTypeOptionsByPriceAndMinValues): an option is kept only if its WorstLaunchPrice
// under the replacement's requirements undercuts the candidates' summed price, and what is kept
// must then meet the replacement's minValues (SatisfiesMinValues: the distinct values of each such
// key among the options). The options Karpenter cut, whose pods' fit the watcher does not see,
// and label values a type's name does not tell, are hypotheses: the filter takes a leaning on
// them, and standing.ts asks both.
import type { CandidateType } from '../effect/candidates.ts';
import type { ClaimForEffect } from '../effect/types.ts';
import type { PricedCandidate } from '../effect/worlds.ts';
import type { ProviderKeys } from '../providers.ts';
import { CAPACITY_TYPE, ZONE } from '../well-known.ts';
import { type FilterRequirements, worstLaunchPrice } from './prices.ts';

/** An option as one world prices it; `priced` undefined: an overlay may or may not price it. */
export interface PricedOption {
  readonly type: CandidateType;
  readonly priced: PricedCandidate | undefined;
}

export const asOptions = (cs: readonly PricedCandidate[]): PricedOption[] =>
  cs.map((c) => ({ type: c.type, priced: c }));

interface MinValuesRule {
  readonly byKey: ReadonlyMap<string, number>;
  /** A type's values of the key as its requirements hold them; undefined: not known. */
  readonly valuesOf: (type: CandidateType, key: string) => readonly string[] | undefined;
}

/** What decides a command in one world. */
export interface CommandRules {
  /** sumCandidatePrices. */
  readonly total: number;
  /** The price filter's requirements (computeConsolidation filters before it narrows to spot). */
  readonly reqs: FilterRequirements;
  /** Options that must be left: 15 for a spot node moved to spot alone. */
  readonly needed: number;
  /** Several nodes: each candidate type's cheapest candidate's own price, and the replacement's requirements as narrowed (multi-node.ts). */
  readonly sameType?: { readonly own: ReadonlyMap<string, number>; readonly reqs: FilterRequirements };
  readonly minValues?: MinValuesRule;
}

/** What is not known counts for the command (true) or against it. */
export interface Leaning {
  readonly prices: boolean;
  readonly values: boolean;
}

/** What is not known counts against the command. */
export const SURE: Leaning = { prices: false, values: false };

/**
 * The replacement's minValues, and how a type's values of each key are read. `zonesOf`: a type's
 * zones as the AWS provider's requirements hold them (the zones it is offered in that the
 * NodeClass has a subnet in), of those the replacement allows; undefined where not known.
 * `capacityTypes`: those the replacement allowed when Karpenter filtered its options.
 */
export function minValuesRule(
  claim: ClaimForEffect,
  provider: ProviderKeys,
  capacityTypes: ReadonlySet<string>,
  zonesOf?: (type: CandidateType) => readonly string[] | undefined,
): MinValuesRule | undefined {
  const byKey = claim.minValuesByKey;
  if (byKey === undefined) return undefined;
  // A type's capacity types are its usage classes (DescribeInstanceTypes) and `reserved` where the
  // NodeClass holds a reservation of it. Each option has an offering the replacement allows, which
  // the provider makes only for one of those: where on-demand alone is allowed, that is its value.
  const onDemandOnly = capacityTypes.size === 1 && capacityTypes.has('on-demand') ? ['on-demand'] : undefined;
  return {
    byKey,
    valuesOf: (type, key) => {
      if (key === ZONE && zonesOf) return zonesOf(type);
      if (key === CAPACITY_TYPE) return onDemandOnly;
      // The other values of its offerings (reservations, zone IDs): not known here.
      if (provider.offeringKeys.has(key)) return undefined;
      // The same values on every type, those the requirement allows (SatisfiesMinValues' req.Has).
      const fixed = provider.fixedValues?.get(key);
      if (fixed)
        return fixed.filter((v) => (claim.pinned[key] ?? v) === v && (claim.allowed?.get(key)?.has(v) ?? true));
      // A key no instance type defines has no values (Requirements.Get: Exists, none listed).
      if (!provider.instanceTypeKeys.has(key)) return [];
      if (type.known !== undefined && !type.known.has(key)) return undefined;
      const value = type.labels[key];
      return value === undefined ? [] : [value];
    },
  };
}

/** The first minValues the options fall short of, in words. */
export function unmetMinValues(
  options: readonly PricedOption[],
  rule: MinValuesRule,
  leaning: boolean,
): string | undefined {
  for (const [key, min] of rule.byKey) {
    const seen = new Set<string>();
    let open = false;
    for (const o of options) {
      const values = rule.valuesOf(o.type, key);
      if (values === undefined) open = true;
      else for (const v of values) seen.add(v);
    }
    if (seen.size < min && !(open && leaning)) return `${key} has ${seen.size} of ${min} values`;
  }
  return undefined;
}

/** Whether an option's WorstLaunchPrice undercuts `cap`; an option of unknown price as the leaning says. */
export const undercuts = (o: PricedOption, reqs: FilterRequirements, cap: number, leaning: Leaning): boolean =>
  o.priced === undefined ? leaning.prices : worstLaunchPrice(o.priced, reqs) < cap;

/** The options the price filter keeps. */
export const priceFiltered = (
  options: readonly PricedOption[],
  rules: CommandRules,
  leaning: Leaning,
): PricedOption[] => options.filter((o) => undercuts(o, rules.reqs, rules.total, leaning));

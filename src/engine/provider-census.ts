// The cluster's NodeClaims by provider: the gauge, the warnings, `report`.
import { knownList, mostCommonGroup, UNKNOWN_PROVIDER, type ProviderSetting } from './provider-choice.ts';
import type { ProviderKeys } from './providers.ts';

/** How many distinct unknown groups are named, at most (their names are unbounded). */
export const MAX_UNKNOWN_GROUPS = 10;

interface ProviderCount {
  /** A known provider's name or `unknown`: bounded, a metric's label. */
  provider: string;
  nodeClaims: number;
  /** Its nodes are judged with the keys Karpenter compared (false: recorded with basis approximate). */
  matchesSetting: boolean;
}

export interface ProviderCensus {
  /** karpenterProvider: `auto` or a provider's name. */
  setting: string;
  /** Every known provider and `unknown`, in that order, 0 included. */
  nodeClaims: ProviderCount[];
  /** Groups of NodeClaims no known provider has, the most common first (at most MAX_UNKNOWN_GROUPS). */
  unknownGroups: { group: string; nodeClaims: number }[];
  /** Under auto, the provider a node is assumed to run on when neither its NodeClaim nor its labels say. */
  assumed: string | null;
  /** One line for each provider whose nodes are judged approximately, and why. */
  warnings: string[];
}

/** Whether a NodeClaim of this provider is judged with the keys Karpenter compared. */
export function matchesSetting(setting: ProviderSetting, provider: string): boolean {
  return provider !== UNKNOWN_PROVIDER && (setting === 'auto' || setting.name === provider);
}

export function providerCensus(
  setting: ProviderSetting,
  known: readonly ProviderKeys[],
  groups: ReadonlyMap<string, number>,
): ProviderCensus {
  const counts = new Map<string, number>([...known.map((p): [string, number] => [p.name, 0]), [UNKNOWN_PROVIDER, 0]]);
  const unknown: { group: string; nodeClaims: number }[] = [];
  for (const [group, n] of groups) {
    if (n <= 0) continue;
    const p = known.find((k) => k.group === group);
    if (p) counts.set(p.name, (counts.get(p.name) ?? 0) + n);
    else {
      counts.set(UNKNOWN_PROVIDER, (counts.get(UNKNOWN_PROVIDER) ?? 0) + n);
      unknown.push({ group, nodeClaims: n });
    }
  }
  unknown.sort((a, b) => b.nodeClaims - a.nodeClaims || (a.group < b.group ? -1 : 1));
  const settingName = setting === 'auto' ? 'auto' : setting.name;
  const warnings: string[] = [];
  const claims = (n: number, verb: string) => (n === 1 ? `1 NodeClaim ${verb}s` : `${n} NodeClaims ${verb}`);
  for (const u of unknown.slice(0, MAX_UNKNOWN_GROUPS)) {
    warnings.push(
      `${claims(u.nodeClaims, 'name')} nodeClassRef.group ${u.group}, a provider the watcher does not know (${knownList(known)}): their nodes are recorded with basis approximate`,
    );
  }
  if (unknown.length > MAX_UNKNOWN_GROUPS)
    warnings.push(`${unknown.length - MAX_UNKNOWN_GROUPS} more unknown nodeClassRef groups`);
  if (setting !== 'auto') {
    for (const p of known) {
      const n = counts.get(p.name) ?? 0;
      if (p.name !== setting.name && n > 0)
        warnings.push(
          `karpenterProvider is ${setting.name}, but ${claims(n, 'belong')} to ${p.name} (nodeClassRef.group ${p.group}): their nodes are recorded with basis approximate; set karpenterProvider to auto or ${p.name}`,
        );
    }
  }
  const common = mostCommonGroup(groups);
  return {
    setting: settingName,
    nodeClaims: [...counts].map(([provider, nodeClaims]) => ({
      provider,
      nodeClaims,
      matchesSetting: matchesSetting(setting, provider),
    })),
    unknownGroups: unknown.slice(0, MAX_UNKNOWN_GROUPS),
    assumed:
      setting === 'auto' && common !== undefined
        ? (known.find((p) => p.group === common)?.name ?? UNKNOWN_PROVIDER)
        : null,
    warnings,
  };
}

/** NodeClaims by spec.nodeClassRef.group (those without one are not counted). */
export function countGroups(claims: Iterable<{ readonly nodeClassGroup?: string }>): Map<string, number> {
  const groups = new Map<string, number>();
  for (const c of claims)
    if (c.nodeClassGroup !== undefined) groups.set(c.nodeClassGroup, (groups.get(c.nodeClassGroup) ?? 0) + 1);
  return groups;
}

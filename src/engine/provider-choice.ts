// Which provider's keys a launch is judged with. Karpenter runs one cloud provider, and every
// NodeClaim it launches names that provider's NodeClass in spec.nodeClassRef.group: that is the
// evidence. With `karpenterProvider: auto` the group picks the keys; set explicitly, the setting
// does, and a NodeClaim (or, before it is known, the node's labels) that shows another provider
// makes the decision approximate, with the reason in the record. Never a silent guess.

import type { ProviderKeys } from './providers.ts';
import type { Labels } from './requirements.ts';

/** The provider of NodeClaims whose group is none the watcher knows (its keys are unknown). */
export const UNKNOWN_PROVIDER = 'unknown';

/**
 * Where the provider of a launch came from: `nodeclaim`, its NodeClaim's nodeClassRef.group;
 * `node-labels`, the domain of the node's labels (no NodeClaim yet); `cluster`, the provider most
 * NodeClaims in the cluster show; `none`, nothing showed one; `setting`, karpenterProvider.
 */
export type ProviderFrom = 'setting' | 'nodeclaim' | 'node-labels' | 'cluster' | 'none';

export interface ProviderChoice {
  /** The keys the launch is judged with; undefined: the provider is unknown, all the node's labels stand in. */
  readonly keys: ProviderKeys | undefined;
  /** `aws`, `kwok`, ... or `unknown`. */
  readonly name: string;
  readonly from: ProviderFrom;
  /** The NodeClaim's spec.nodeClassRef.group, when it has one. */
  readonly group?: string;
  /** Why these may not be the keys Karpenter compared: the decision is then approximate, and says this. */
  readonly warning?: string;
  /** Neither the NodeClaim nor the node's labels named the provider: worth waiting for the NodeClaim. */
  readonly guessed: boolean;
}

interface ProviderEvidence {
  /** The node's labels with its NodeClaim's on top. */
  labels: Labels;
  nodeClaim?: { readonly name: string; readonly nodeClassGroup?: string } | undefined;
  /** NodeClaims in the cluster by spec.nodeClassRef.group. */
  clusterGroups?: ReadonlyMap<string, number> | undefined;
}

/** `auto`, or the provider set explicitly (karpenterProvider). */
export type ProviderSetting = ProviderKeys | 'auto';

export const knownList = (known: readonly ProviderKeys[]) => known.map((p) => `${p.name}: ${p.group}`).join(', ');

/** The known providers whose label domain (`<group>/...`) the labels use. */
function providersInLabels(labels: Labels, known: readonly ProviderKeys[]): ProviderKeys[] {
  const keys = Object.keys(labels);
  return known.filter((p) => keys.some((k) => k.startsWith(`${p.group}/`)));
}

/**
 * The group most NodeClaims name, or undefined when there is none or two tie. A cluster runs one
 * Karpenter, so in practice this is every NodeClaim's group.
 */
export function mostCommonGroup(groups: ReadonlyMap<string, number> | undefined): string | undefined {
  let best: string | undefined;
  let bestCount = 0;
  let tie = false;
  for (const [group, count] of groups ?? []) {
    if (count > bestCount) [best, bestCount, tie] = [group, count, false];
    else if (count === bestCount && count > 0) tie = true;
  }
  return tie ? undefined : best;
}

export function chooseProvider(
  setting: ProviderSetting,
  known: readonly ProviderKeys[],
  ev: ProviderEvidence,
): ProviderChoice {
  const group = ev.nodeClaim?.nodeClassGroup;
  const claim = ev.nodeClaim?.name ?? '';
  const byGroup = group === undefined ? undefined : known.find((p) => p.group === group);
  const unknownGroup =
    group !== undefined && byGroup === undefined
      ? `NodeClaim ${claim}'s nodeClassRef.group ${group} is not a provider the watcher knows (${knownList(known)}), so which keys Karpenter compared is unknown`
      : undefined;
  // Without a NodeClaim that names its group, the node's own labels: a provider writes its
  // instance-type labels (and its NodeClass's name) under its own domain, karpenter.k8s.aws/* on
  // AWS nodes, karpenter.kwok.sh/* on KWOK ones, and both Karpenter (KWOK) and the kubelet (AWS,
  // from the launch's --node-labels) put them on the Node when it is created.
  const inLabels = group === undefined ? providersInLabels(ev.labels, known) : [];
  const byLabels = inLabels.length === 1 ? inLabels[0] : undefined;

  if (setting !== 'auto') {
    const base = {
      keys: setting,
      name: setting.name,
      from: 'setting' as const,
      guessed: false,
      ...(group !== undefined ? { group } : {}),
    };
    if (unknownGroup)
      return { ...base, warning: `${unknownGroup}; judged with karpenterProvider ${setting.name}'s keys` };
    const shown = byGroup ?? byLabels;
    if (shown === undefined || shown.name === setting.name) return base;
    const evidence = byGroup
      ? `NodeClaim ${claim} belongs to ${shown.name} (nodeClassRef.group ${group})`
      : `the node's labels are ${shown.name}'s (${shown.group}/...) and its NodeClaim is unknown`;
    return {
      ...base,
      warning: `karpenterProvider is ${setting.name}, but ${evidence}: Karpenter compared ${shown.name}'s keys, this decision used ${setting.name}'s`,
    };
  }
  if (byGroup) return { keys: byGroup, name: byGroup.name, from: 'nodeclaim', group: group!, guessed: false };
  if (unknownGroup)
    return {
      keys: undefined,
      name: UNKNOWN_PROVIDER,
      from: 'nodeclaim',
      group: group!,
      guessed: false,
      warning: `${unknownGroup}; judged on all the node's labels`,
    };
  if (byLabels) return { keys: byLabels, name: byLabels.name, from: 'node-labels', guessed: false };
  // Nothing about the node names its provider (a NodeClaim not seen yet, labels of no known
  // domain). The caller waits for the NodeClaim for the grace period; past it, the provider most
  // NodeClaims in the cluster show is assumed, since a cluster runs one Karpenter, one provider.
  // It is still an assumption about this node, so the decision is approximate.
  const common = mostCommonGroup(ev.clusterGroups);
  const assumed = common === undefined ? undefined : known.find((p) => p.group === common);
  const none = "no NodeClaim names the node's provider and its labels name none";
  if (assumed)
    return {
      keys: assumed,
      name: assumed.name,
      from: 'cluster',
      guessed: true,
      warning: `${none}: assumed ${assumed.name}, the provider most NodeClaims in the cluster show`,
    };
  const cluster =
    common === undefined
      ? 'nor does any NodeClaim in the cluster'
      : `and most NodeClaims in the cluster name ${common}, a provider the watcher does not know`;
  return {
    keys: undefined,
    name: UNKNOWN_PROVIDER,
    from: 'none',
    guessed: true,
    warning: `${none}, ${cluster}: judged on all the node's labels`,
  };
}

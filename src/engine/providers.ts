// The label keys a Karpenter cloud provider defines for an instance type and its offerings.
// Karpenter's NodeOverlay controller compares an overlay with the NodePool's name and template
// labels plus these requirements (pkg/controllers/nodeoverlay, getOverlaidOfferings), never
// with the node's labels: any other key on a node is undefined for it.

import type { Labels } from './requirements.ts';

export interface ProviderKeys {
  readonly name: string;
  /**
   * The API group of the provider's NodeClass, which every NodeClaim it launches names in
   * `spec.nodeClassRef.group`; it is also the domain of the labels the provider writes.
   */
  readonly group: string;
  /** Keys in an instance type's requirements (a type that lacks an attribute defines it as DoesNotExist). */
  readonly instanceTypeKeys: ReadonlySet<string>;
  /** Keys in an offering's requirements; those absent from the instance type's narrow only NotIn. */
  readonly offeringKeys: ReadonlySet<string>;
  /**
   * Instance-type keys whose values are the same on every type and in no offering: Karpenter
   * compares an overlay with all of them, never with the one value a node carries.
   */
  readonly fixedValues?: ReadonlyMap<string, readonly string[]>;
  /**
   * The name of the NodeClaim a node was launched for, where the provider's own naming says it
   * before Karpenter links them (the NodeClaim's providerID, its registration's ownerReference).
   */
  readonly nodeClaimNameOf?: (node: { readonly providerID?: string; readonly labels: Labels }) => string | undefined;
}

// karpenter-provider-aws v1.14.1 (paired with core v1.14.1), pkg/providers/instancetype
// (types.go computeRequirements; offering/ base, reserved-capacity and placement-group
// resolvers). test/engine/provider-keys.test.ts checks both sets against what the provider's own
// code builds (test/aws-instance-keys). Most keys are on every instance type (DoesNotExist when
// the type lacks the attribute); conditional ones: topology.k8s.aws/zone-id (subnets with zone
// IDs in the type's zones) and karpenter.k8s.aws/placement-group-* (an EC2NodeClass with a
// placement group; -partition only for a partition group). Every offering key is also an
// instance-type key: the instance type holds all values (every zone, capacity type,
// reservation, partition), the offering one. karpenter.k8s.aws/instance-tenancy is
// `In [default, dedicated]` on every type and in no offering, so an overlay's tenancy
// requirement is judged against both values, never against the node's tenancy.
export const AWS_KEYS: ProviderKeys = {
  name: 'aws',
  group: 'karpenter.k8s.aws',
  instanceTypeKeys: new Set([
    'node.kubernetes.io/instance-type',
    'kubernetes.io/arch',
    'kubernetes.io/os',
    'node.kubernetes.io/windows-build',
    'topology.kubernetes.io/zone',
    'topology.kubernetes.io/region',
    'topology.k8s.aws/zone-id',
    'karpenter.sh/capacity-type',
    'karpenter.k8s.aws/capacity-reservation-id',
    'karpenter.k8s.aws/capacity-reservation-type',
    'karpenter.k8s.aws/capacity-reservation-interruptible',
    'karpenter.k8s.aws/instance-category',
    'karpenter.k8s.aws/instance-family',
    'karpenter.k8s.aws/instance-generation',
    'karpenter.k8s.aws/instance-size',
    'karpenter.k8s.aws/instance-capability-flex',
    'karpenter.k8s.aws/instance-cpu',
    'karpenter.k8s.aws/instance-cpu-manufacturer',
    'karpenter.k8s.aws/instance-cpu-sustained-clock-speed-mhz',
    'karpenter.k8s.aws/instance-memory',
    'karpenter.k8s.aws/instance-ebs-bandwidth',
    'karpenter.k8s.aws/instance-network-bandwidth',
    'karpenter.k8s.aws/instance-hypervisor',
    'karpenter.k8s.aws/instance-encryption-in-transit-supported',
    'karpenter.k8s.aws/instance-tenancy',
    'karpenter.k8s.aws/instance-local-nvme',
    'karpenter.k8s.aws/instance-gpu-name',
    'karpenter.k8s.aws/instance-gpu-manufacturer',
    'karpenter.k8s.aws/instance-gpu-count',
    'karpenter.k8s.aws/instance-gpu-memory',
    'karpenter.k8s.aws/instance-accelerator-name',
    'karpenter.k8s.aws/instance-accelerator-manufacturer',
    'karpenter.k8s.aws/instance-accelerator-count',
    'karpenter.k8s.aws/placement-group-id',
    'karpenter.k8s.aws/placement-group-partition',
  ]),
  offeringKeys: new Set([
    'karpenter.sh/capacity-type',
    'topology.kubernetes.io/zone',
    'topology.k8s.aws/zone-id',
    'karpenter.k8s.aws/capacity-reservation-id',
    'karpenter.k8s.aws/capacity-reservation-type',
    'karpenter.k8s.aws/capacity-reservation-interruptible',
    'karpenter.k8s.aws/placement-group-partition',
  ]),
  fixedValues: new Map([['karpenter.k8s.aws/instance-tenancy', ['default', 'dedicated']]]),
};

// sigs.k8s.io/karpenter v1.14.1 kwok/cloudprovider/helpers.go (newInstanceType): the KWOK
// provider's instance-type keys, checked by test/engine/provider-keys.test.ts. An offering's
// requirements are whatever its catalog lists: the embedded kwok/cloudprovider/instance_types.json
// lists capacity type and zone; a catalog of one's own (INSTANCE_TYPES_FILE_PATH) may list more,
// such as the region kept here, which no KWOK instance type defines.
export const KWOK_KEYS: ProviderKeys = {
  name: 'kwok',
  group: 'karpenter.kwok.sh',
  instanceTypeKeys: new Set([
    'node.kubernetes.io/instance-type',
    'kubernetes.io/arch',
    'kubernetes.io/os',
    'topology.kubernetes.io/zone',
    'karpenter.sh/capacity-type',
    'karpenter.kwok.sh/instance-size',
    'karpenter.kwok.sh/instance-family',
    'karpenter.kwok.sh/instance-cpu',
    'karpenter.kwok.sh/instance-memory',
  ]),
  offeringKeys: new Set(['karpenter.sh/capacity-type', 'topology.kubernetes.io/zone', 'topology.kubernetes.io/region']),
  // KWOK creates the Node itself, before the NodeClaim shows its providerID: a `kwok://` node
  // carries the NodeClaim's labels, whose kubernetes.io/hostname is the NodeClaim's name
  // (kwok/cloudprovider toNode), so the launch is known at CREATE.
  nodeClaimNameOf: (node) => (node.providerID?.startsWith('kwok://') ? node.labels['kubernetes.io/hostname'] : undefined),
};

export const PROVIDERS: Readonly<Record<string, ProviderKeys>> = { aws: AWS_KEYS, kwok: KWOK_KEYS };

/** The providers the watcher knows the keys of, found by their NodeClass group. */
export const KNOWN_PROVIDERS: readonly ProviderKeys[] = [AWS_KEYS, KWOK_KEYS];

/** A provider's keys with more of the user's: instance-type keys a custom provider defines. */
export function withExtraKeys(base: ProviderKeys, instanceTypeKeys: readonly string[]): ProviderKeys {
  if (instanceTypeKeys.length === 0) return base;
  return { ...base, instanceTypeKeys: new Set([...base.instanceTypeKeys, ...instanceTypeKeys]) };
}

// ---------------------------------------------------------------------------------------------
// Which provider's keys a launch is judged with. Karpenter runs one cloud provider, and every
// NodeClaim it launches names that provider's NodeClass in spec.nodeClassRef.group: that is the
// evidence. With `karpenterProvider: auto` the group picks the keys; set explicitly, the setting
// does, and a NodeClaim (or, before it is known, the node's labels) that shows another provider
// makes the decision approximate, with the reason in the record. Never a silent guess.

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

export interface ProviderEvidence {
  /** The node's labels with its NodeClaim's on top. */
  labels: Labels;
  nodeClaim?: { readonly name: string; readonly nodeClassGroup?: string } | undefined;
  /** NodeClaims in the cluster by spec.nodeClassRef.group. */
  clusterGroups?: ReadonlyMap<string, number> | undefined;
}

/** `auto`, or the provider set explicitly (karpenterProvider). */
export type ProviderSetting = ProviderKeys | 'auto';

const knownList = (known: readonly ProviderKeys[]) => known.map((p) => `${p.name}: ${p.group}`).join(', ');

/** The known providers whose label domain (`<group>/...`) the labels use. */
export function providersInLabels(labels: Labels, known: readonly ProviderKeys[]): ProviderKeys[] {
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

export function chooseProvider(setting: ProviderSetting, known: readonly ProviderKeys[], ev: ProviderEvidence): ProviderChoice {
  const group = ev.nodeClaim?.nodeClassGroup;
  const claim = ev.nodeClaim?.name ?? '';
  const byGroup = group === undefined ? undefined : known.find((p) => p.group === group);
  const unknownGroup = group !== undefined && byGroup === undefined
    ? `NodeClaim ${claim}'s nodeClassRef.group ${group} is not a provider the watcher knows (${knownList(known)}), so which keys Karpenter compared is unknown`
    : undefined;
  // Without a NodeClaim that names its group, the node's own labels: a provider writes its
  // instance-type labels (and its NodeClass's name) under its own domain, karpenter.k8s.aws/* on
  // AWS nodes, karpenter.kwok.sh/* on KWOK ones, and both Karpenter (KWOK) and the kubelet (AWS,
  // from the launch's --node-labels) put them on the Node when it is created.
  const inLabels = group === undefined ? providersInLabels(ev.labels, known) : [];
  const byLabels = inLabels.length === 1 ? inLabels[0] : undefined;

  if (setting !== 'auto') {
    const base = { keys: setting, name: setting.name, from: 'setting' as const, guessed: false, ...(group !== undefined ? { group } : {}) };
    if (unknownGroup) return { ...base, warning: `${unknownGroup}; judged with karpenterProvider ${setting.name}'s keys` };
    const shown = byGroup ?? byLabels;
    if (shown === undefined || shown.name === setting.name) return base;
    const evidence = byGroup ? `NodeClaim ${claim} belongs to ${shown.name} (nodeClassRef.group ${group})` : `the node's labels are ${shown.name}'s (${shown.group}/...) and its NodeClaim is unknown`;
    return { ...base, warning: `karpenterProvider is ${setting.name}, but ${evidence}: Karpenter compared ${shown.name}'s keys, this decision used ${setting.name}'s` };
  }
  if (byGroup) return { keys: byGroup, name: byGroup.name, from: 'nodeclaim', group: group!, guessed: false };
  if (unknownGroup) return { keys: undefined, name: UNKNOWN_PROVIDER, from: 'nodeclaim', group: group!, guessed: false, warning: `${unknownGroup}; judged on all the node's labels` };
  if (byLabels) return { keys: byLabels, name: byLabels.name, from: 'node-labels', guessed: false };
  // Nothing about the node names its provider (a NodeClaim not seen yet, labels of no known
  // domain). The caller waits for the NodeClaim for the grace period; past it, the provider most
  // NodeClaims in the cluster show is assumed, since a cluster runs one Karpenter, one provider.
  // It is still an assumption about this node, so the decision is approximate.
  const common = mostCommonGroup(ev.clusterGroups);
  const assumed = common === undefined ? undefined : known.find((p) => p.group === common);
  const none = 'no NodeClaim names the node\'s provider and its labels name none';
  if (assumed) return { keys: assumed, name: assumed.name, from: 'cluster', guessed: true, warning: `${none}: assumed ${assumed.name}, the provider most NodeClaims in the cluster show` };
  const cluster = common === undefined ? 'nor does any NodeClaim in the cluster' : `and most NodeClaims in the cluster name ${common}, a provider the watcher does not know`;
  return { keys: undefined, name: UNKNOWN_PROVIDER, from: 'none', guessed: true, warning: `${none}, ${cluster}: judged on all the node's labels` };
}

// ---------------------------------------------------------------------------------------------
// The cluster's NodeClaims by provider: the gauge, the warnings, `report`.

/** How many distinct unknown groups are named, at most (their names are unbounded). */
export const MAX_UNKNOWN_GROUPS = 10;

export interface ProviderCount {
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

export function providerCensus(setting: ProviderSetting, known: readonly ProviderKeys[], groups: ReadonlyMap<string, number>): ProviderCensus {
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
    warnings.push(`${claims(u.nodeClaims, 'name')} nodeClassRef.group ${u.group}, a provider the watcher does not know (${knownList(known)}): their nodes are recorded with basis approximate`);
  }
  if (unknown.length > MAX_UNKNOWN_GROUPS) warnings.push(`${unknown.length - MAX_UNKNOWN_GROUPS} more unknown nodeClassRef groups`);
  if (setting !== 'auto') {
    for (const p of known) {
      const n = counts.get(p.name) ?? 0;
      if (p.name !== setting.name && n > 0) warnings.push(`karpenterProvider is ${setting.name}, but ${claims(n, 'belong')} to ${p.name} (nodeClassRef.group ${p.group}): their nodes are recorded with basis approximate; set karpenterProvider to auto or ${p.name}`);
    }
  }
  const common = mostCommonGroup(groups);
  return {
    setting: settingName,
    nodeClaims: [...counts].map(([provider, nodeClaims]) => ({ provider, nodeClaims, matchesSetting: matchesSetting(setting, provider) })),
    unknownGroups: unknown.slice(0, MAX_UNKNOWN_GROUPS),
    assumed: setting === 'auto' && common !== undefined ? known.find((p) => p.group === common)?.name ?? UNKNOWN_PROVIDER : null,
    warnings,
  };
}

/** NodeClaims by spec.nodeClassRef.group (those without one are not counted). */
export function countGroups(claims: Iterable<{ readonly nodeClassGroup?: string }>): Map<string, number> {
  const groups = new Map<string, number>();
  for (const c of claims) if (c.nodeClassGroup !== undefined) groups.set(c.nodeClassGroup, (groups.get(c.nodeClassGroup) ?? 0) + 1);
  return groups;
}

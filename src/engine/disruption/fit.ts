// Whether the replacement's pods fit a type that is not among its options, as far as its NodeClaim
// and the nodes it replaced tell. Karpenter kept an option only if the pods fit it (scheduling's
// filterInstanceTypesByRequirements: the requirements, and the requests within its allocatable),
// so a kept option is a type they fit. A type with less CPU or memory than the requests could not
// be one; a type that meets every requirement and has at least the CPU and memory of a kept option
// could.
import { awsAllocatable, type FitSizing } from '../effect/allocatable.ts';
import type { CandidateType } from '../effect/candidates.ts';
import type { PriceBook } from '../effect/prices.ts';
import type { ClaimForEffect } from '../effect/types.ts';
import { labelValue } from '../normalize.ts';
import { AWS_LABEL, type ProviderKeys } from '../providers.ts';
import { requirementPasses } from '../requirements.ts';
import { ARCH, INSTANCE_TYPE } from '../well-known.ts';
import type { Candidate } from './types.ts';

/** A type's vCPUs and memory in bytes as the AWS provider labels them (instance-cpu, instance-memory in MiB); NaN: not known. */
function capacityOf(type: CandidateType) {
  const read = (key: string, unit: number) =>
    type.known === undefined || type.known.has(key) ? Number(type.labels[key] ?? Number.NaN) * unit : Number.NaN;
  return { cpu: read(AWS_LABEL.cpu, 1), memory: read(AWS_LABEL.memory, 2 ** 20) };
}

// A margin for the float parse: a type left in is only left unexcluded.
const over = (requested: number | undefined, held: number) => (requested ?? 0) > held * (1 + 1e-9);

/**
 * Whether the replacement requests more than the type has (pkg/providers/instancetype cpu and
 * memory): its allocatable is no more, so the pods could not have fit it (resources.Fits); or more
 * than a replaced node's NodeClaim says Karpenter holds that type to hold, pods per node included.
 */
export function tooSmall(type: CandidateType, claim: ClaimForEffect, replaced: readonly Candidate[] = []): boolean {
  const has = capacityOf(type);
  const r = claim.requests;
  if (over(r?.cpu, has.cpu) || over(r?.memory, has.memory)) return true;
  const held = replaced.find((n) => n.allocatable !== undefined && n.labels[INSTANCE_TYPE] === type.name)?.allocatable;
  return held !== undefined && (over(r?.cpu, held.cpu) || over(r?.memory, held.memory) || over(r?.pods, held.pods));
}

/**
 * Which types the pods are shown to fit: those that meet each of the NodeClaim's requirements on
 * an instance-type key by labels known to the watcher, and hold at least the CPU and memory of an
 * option Karpenter kept. A type's allocatable is its capacity less what the NodeClass's kubelet
 * settings reserve, the same settings for both, and grows with CPU and memory; only pods per
 * node, where the AWS provider takes them from a type's ENI limits, are not told by either label
 * (a rule the watcher takes the risk of; it does not hold for a NodeClaim that asks for more than
 * CPU, memory and pods: whether another type holds as many GPUs or as much disk is not known).
 */
export function fitShown(
  claim: ClaimForEffect,
  kept: readonly CandidateType[],
  provider: ProviderKeys,
  replaced: readonly Candidate[] = [],
): (type: CandidateType) => boolean {
  const requirements = claim.requirements;
  const requests = claim.requests;
  if (requirements === undefined || requests === undefined || requests.other) return () => false;
  // A replaced node's NodeClaim carries what Karpenter holds its type to hold (status.allocatable,
  // the cloud provider's figure): where the requests are within it, the pods fit that type exactly
  // as Karpenter's scheduling tests it (resources.Fits), pods per node included.
  const held = new Set(
    replaced
      .filter(
        (r) =>
          r.allocatable !== undefined &&
          !over(requests.cpu, r.allocatable.cpu) &&
          !over(requests.memory, r.allocatable.memory) &&
          !over(requests.pods, r.allocatable.pods),
      )
      .map((r) => r.labels[INSTANCE_TYPE]),
  );
  // The kept options no other kept option is as small as in both: a type holding one of them holds the rest.
  const smallest: { cpu: number; memory: number }[] = [];
  const known = kept.map(capacityOf).filter((c) => Number.isFinite(c.cpu) && Number.isFinite(c.memory));
  for (const c of known.sort((a, b) => a.cpu - b.cpu || a.memory - b.memory))
    if (smallest.every((s) => s.memory > c.memory)) smallest.push(c);
  const meets = (type: CandidateType) =>
    requirements.every((r) => {
      if (r.key === INSTANCE_TYPE || provider.offeringKeys.has(r.key) || !provider.instanceTypeKeys.has(r.key))
        return true;
      const fixed = provider.fixedValues?.get(r.key);
      if (fixed) return fixed.some((v) => requirementPasses(r, v));
      return (
        (type.known === undefined || type.known.has(r.key)) && requirementPasses(r, labelValue(type.labels, r.key))
      );
    });
  return (type) => {
    const has = capacityOf(type);
    return (held.has(type.name) || smallest.some((s) => s.cpu <= has.cpu && s.memory <= has.memory)) && meets(type);
  };
}

/** What the exact fit reads: the NodeClaim, the sizing, DescribeInstanceTypes (the price source's catalog). */
interface ExactFitSetting {
  readonly claim: ClaimForEffect;
  readonly provider: ProviderKeys;
  readonly prices: PriceBook;
  readonly sizing?: FitSizing | undefined;
}

const EC2_ARCH: Readonly<Record<string, string>> = { x86_64: 'amd64', arm64: 'arm64' };

/**
 * Karpenter's own answer to "would the pods fit this type?" (scheduling keeps a type whose
 * requirements the NodeClaim's admit and whose allocatable holds its requests), where everything
 * it reads is known; undefined elsewhere. Not for a type a registered node was seen of: once one
 * registered, the provider may hold the memory that node reported (its discovered capacity) in
 * place of its formula's figure.
 */
export function exactFitOf(s: ExactFitSetting): (type: CandidateType) => boolean | undefined {
  const { claim, sizing, prices } = s;
  const requests = claim.requests;
  const requirements = claim.requirements;
  if (sizing === undefined || sizing.nodeClass.expressions || sizing.nodeClass.amiFamily === undefined)
    return () => undefined;
  if (requests === undefined || requests.other || requirements === undefined || prices.instanceInfo === undefined)
    return () => undefined;
  return (type) => {
    if (sizing.registered.has(type.name)) return undefined;
    const info = prices.instanceInfo!(type.name);
    if (info === undefined) return undefined;
    // What EC2 says of the type defines the keys its name does not.
    const labels: Record<string, string> = {
      ...type.labels,
      [AWS_LABEL.cpu]: String(info.vcpus),
      [AWS_LABEL.memory]: String(info.memoryMiB),
      ...(EC2_ARCH[info.arch] ? { [ARCH]: EC2_ARCH[info.arch]! } : {}),
    };
    const known = new Set([...(type.known ?? Object.keys(type.labels)), AWS_LABEL.cpu, AWS_LABEL.memory, ARCH]);
    let unknown = false;
    for (const r of requirements) {
      if (r.key === INSTANCE_TYPE || s.provider.offeringKeys.has(r.key) || !s.provider.instanceTypeKeys.has(r.key))
        continue;
      const fixed = s.provider.fixedValues?.get(r.key);
      if (
        fixed
          ? !fixed.some((v) => requirementPasses(r, v))
          : known.has(r.key) && !requirementPasses(r, labelValue(labels, r.key))
      )
        return false;
      if (!fixed && !known.has(r.key)) unknown = true;
    }
    if (unknown) return undefined;
    let a: ReturnType<typeof awsAllocatable>;
    try {
      a = awsAllocatable(info, sizing.nodeClass.kubelet, sizing.nodeClass.amiFamily, sizing.settings);
    } catch {
      // A kubelet value the provider would refuse too: no figure to compare with.
      return undefined;
    }
    // Reservations past the type's memory: Karpenter's quantities then give a figure of their own
    // (a fractional binary quantity such as 1.5Gi in a negative difference turns positive), not this one.
    if (a.memory < 0 || a.cpu < 0) return undefined;
    return !over(requests.cpu, a.cpu / 1000) && !over(requests.memory, a.memory) && !over(requests.pods, a.pods);
  };
}

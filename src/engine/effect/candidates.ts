// The instance types a NodeClaim could have launched (its `node.kubernetes.io/instance-type In`
// list), described as Karpenter's cloud provider describes them: the label values an overlay's
// requirements are compared with, and whether the provider's launch treats the type as exotic.
import { AWS_LABEL } from '../providers.ts';
import type { Labels } from '../requirements.ts';
import { INSTANCE_TYPE } from '../well-known.ts';

export interface CandidateType {
  readonly name: string;
  /** One value per instance-type key, as a node of this type carries them (a key absent: DoesNotExist). */
  readonly labels: Labels;
  /** The keys whose value (or absence) is known; undefined: every key (a complete catalog). */
  readonly known?: ReadonlySet<string>;
  /**
   * GPUs or accelerators Karpenter counts (NVIDIA, AMD, Neuron, Habana), or a metal size: the AWS
   * provider launches such a type only if no other is left. Undefined when that is not known.
   */
  readonly exotic?: boolean;
}

// pkg/providers/instancetype/types.go (v1.14.3), computeRequirements: the labels an AWS instance
// type's name alone defines.
const AWS_NAME_SCHEME = /^([a-z]+)(-[0-9]+tb)?([0-9]+).*\./;
const AWS_NAME_KEYS: ReadonlySet<string> = new Set([
  INSTANCE_TYPE,
  AWS_LABEL.family,
  AWS_LABEL.size,
  AWS_LABEL.category,
  AWS_LABEL.generation,
  AWS_LABEL.flex,
]);

/** What an AWS instance type's name says of it, as Karpenter's AWS provider reads the name. */
function awsNameLabels(name: string): Record<string, string> {
  const labels: Record<string, string> = { [INSTANCE_TYPE]: name };
  const scheme = AWS_NAME_SCHEME.exec(name);
  if (scheme) {
    labels[AWS_LABEL.category] = scheme[1]!;
    labels[AWS_LABEL.generation] = scheme[3]!;
  }
  const parts = name.split('.');
  if (parts.length === 2) {
    labels[AWS_LABEL.family] = parts[0]!;
    labels[AWS_LABEL.size] = parts[1]!;
  }
  labels[AWS_LABEL.flex] = String(parts[0]!.includes('-flex'));
  return labels;
}

/**
 * Instance categories whose every family carries devices the exotic filter counts: NVIDIA GPUs
 * (p, g, gr; g4ad's AMD GPUs too), AWS Neuron (inf, trn). `dl` is left out: dl1 has Habana Gaudi
 * (counted), dl2q Qualcomm accelerators (not counted).
 */
const AWS_DEVICE_CATEGORIES: ReadonlySet<string> = new Set(['p', 'g', 'gr', 'inf', 'trn']);
/** Categories known to have a family with counted devices and one without. */
const AWS_MIXED_CATEGORIES: ReadonlySet<string> = new Set(['dl']);

/**
 * Whether the AWS provider's exotic filter (instance/filter, ExoticInstanceTypeFilter) counts the
 * type as exotic: a metal size, or GPUs or accelerators (NVIDIA, AMD, Neuron, Habana). From the
 * device counts among its labels when `knowsDevices`, else from its category.
 */
function awsExotic(labels: Labels, knowsDevices: boolean): boolean | undefined {
  if ((labels[AWS_LABEL.size] ?? '').includes('metal')) return true;
  if (knowsDevices)
    return Number(labels[AWS_LABEL.gpuCount] ?? 0) > 0 || Number(labels[AWS_LABEL.acceleratorCount] ?? 0) > 0;
  const category = labels[AWS_LABEL.category];
  if (category === undefined || AWS_MIXED_CATEGORIES.has(category)) return undefined;
  return AWS_DEVICE_CATEGORIES.has(category);
}

/**
 * An AWS candidate from what is known of it: its name, the values every candidate shares (the
 * NodeClaim pins them with `In [one value]`), and the labels of a node of that type if one was
 * seen (every instance-type key Karpenter defines, the GPU and accelerator counts among them).
 */
function awsCandidate(
  name: string,
  pinned: Labels,
  nodeLabels: Labels | undefined,
  instanceTypeKeys: ReadonlySet<string>,
): CandidateType {
  if (nodeLabels) {
    const labels: Record<string, string> = {};
    for (const key of instanceTypeKeys) if (Object.hasOwn(nodeLabels, key)) labels[key] = nodeLabels[key]!;
    return { name, labels: { ...labels, ...awsNameLabels(name) }, exotic: awsExotic(labels, true) };
  }
  const labels = { ...pinned, ...awsNameLabels(name) };
  return { name, labels, known: new Set([...Object.keys(pinned), ...AWS_NAME_KEYS]), exotic: awsExotic(labels, false) };
}

/**
 * Candidate types are shared between decisions, one object per provider's keys, pinned values
 * (one shared object per distinct set: node.ts), name and node labels (one object per instance
 * type seen), so that what is worked out per type, its pricing in a world above all, is kept. The
 * key is every argument, each by identity or value; past the bound the table starts again.
 */
const candidateTypes = new WeakMap<
  ReadonlySet<string>,
  WeakMap<Labels, Map<string, Map<Labels | undefined, CandidateType>>>
>();
let candidateTypeCount = 0;
const MAX_CANDIDATE_TYPES = 20_000;

export function internedCandidate(
  name: string,
  pinned: Labels,
  nodeLabels: Labels | undefined,
  instanceTypeKeys: ReadonlySet<string>,
): CandidateType {
  let byPinned = candidateTypes.get(instanceTypeKeys);
  if (!byPinned || candidateTypeCount >= MAX_CANDIDATE_TYPES) {
    byPinned = new WeakMap();
    candidateTypes.set(instanceTypeKeys, byPinned);
    candidateTypeCount = 0;
  }
  let byName = byPinned.get(pinned);
  if (!byName) {
    byName = new Map();
    byPinned.set(pinned, byName);
  }
  let byLabels = byName.get(name);
  if (!byLabels) {
    byLabels = new Map();
    byName.set(name, byLabels);
  }
  let type = byLabels.get(nodeLabels);
  if (!type) {
    type = awsCandidate(name, pinned, nodeLabels, instanceTypeKeys);
    byLabels.set(nodeLabels, type);
    candidateTypeCount++;
  }
  return type;
}

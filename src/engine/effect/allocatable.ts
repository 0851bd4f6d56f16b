// What Karpenter's AWS provider holds an instance type to hold for pods: its capacity less the
// kubelet's reservations and eviction threshold (karpenter-provider-aws pkg/providers/instancetype
// types.go NewInstanceType, v1.14.3 and v1.15.0 alike for static kubelet settings; the core's
// InstanceType.Allocatable subtracts the overhead's total). Scheduling keeps a type for a
// NodeClaim only if the pods' requests fit this figure, so with it "would the pods fit this type?"
// has Karpenter's answer. Pure arithmetic on what EC2 says of the type (DescribeInstanceTypes)
// and what the EC2NodeClass sets; v1.15.0's CEL expressions in the kubelet settings are not
// evaluated here (the caller abstains on them).
import { parseQuantity } from '../quantity.ts';

/** What DescribeInstanceTypes says of a type, as the provider reads it. */
export interface InstanceTypeInfo {
  readonly vcpus: number;
  readonly memoryMiB: number;
  /** ProcessorInfo.SupportedArchitectures[0]: Graviton types lose 64 MiB to CMA. */
  readonly arch: string;
  /** MaximumNetworkInterfaces of the default network card. */
  readonly maxENIs: number;
  readonly ipv4PerENI: number;
}

/** The EC2NodeClass's `spec.kubelet`, static values only. */
interface KubeletSettings {
  readonly maxPods?: number;
  readonly podsPerCore?: number;
  readonly kubeReserved?: Readonly<Record<string, string>>;
  readonly systemReserved?: Readonly<Record<string, string>>;
  readonly evictionHard?: Readonly<Record<string, string>>;
}

/** amifamily FeatureFlags: AL2, AL2023 and Custom share the default's; Bottlerocket and Windows differ. */
interface FamilyFlags {
  readonly usesENILimitedMemoryOverhead: boolean;
  readonly podsPerCoreEnabled: boolean;
  readonly supportsENILimitedPodDensity: boolean;
}

const DEFAULT_FLAGS: FamilyFlags = {
  usesENILimitedMemoryOverhead: true,
  podsPerCoreEnabled: true,
  supportsENILimitedPodDensity: true,
};
const FAMILY_FLAGS: Readonly<Record<string, FamilyFlags>> = {
  Bottlerocket: { usesENILimitedMemoryOverhead: false, podsPerCoreEnabled: false, supportsENILimitedPodDensity: true },
  Windows2019: { usesENILimitedMemoryOverhead: false, podsPerCoreEnabled: true, supportsENILimitedPodDensity: false },
  Windows2022: { usesENILimitedMemoryOverhead: false, podsPerCoreEnabled: true, supportsENILimitedPodDensity: false },
  Windows2025: { usesENILimitedMemoryOverhead: false, podsPerCoreEnabled: true, supportsENILimitedPodDensity: false },
};

/** Karpenter's own settings that the arithmetic reads (its --vm-memory-overhead-percent and --reserved-enis). */
export interface ProviderSettings {
  readonly vmMemoryOverheadPercent: number;
  readonly reservedENIs: number;
}

export const KARPENTER_DEFAULTS: ProviderSettings = { vmMemoryOverheadPercent: 0.075, reservedENIs: 0 };

/** CPU (millicores in awsAllocatable, cores in awsCapacity), memory in bytes, pods. */
interface Allocatable {
  readonly cpu: number;
  readonly memory: number;
  readonly pods: number;
}

const MI = 2 ** 20;

/** memory(): MiB (less 64 on arm64), less the VM's overhead rounded up to a MiB. */
function memoryCapacity(info: InstanceTypeInfo, settings: ProviderSettings): number {
  const mem = (info.memoryMiB - (info.arch === 'arm64' ? 64 : 0)) * MI;
  return mem - Math.ceil((mem * settings.vmMemoryOverheadPercent) / 1024 / 1024) * MI;
}

/** ENILimitedPods: (ENIs - reserved) x (IPv4 per ENI - 1) + 2, or 0 with no ENI left. */
function eniLimitedPods(info: InstanceTypeInfo, reservedENIs: number): number {
  const usable = Math.max(info.maxENIs - reservedENIs, 0);
  return usable === 0 ? 0 : usable * (info.ipv4PerENI - 1) + 2;
}

function pods(
  info: InstanceTypeInfo,
  kubelet: KubeletSettings,
  flags: FamilyFlags,
  settings: ProviderSettings,
): number {
  let count: number;
  if (kubelet.maxPods !== undefined) count = kubelet.maxPods;
  else if (flags.supportsENILimitedPodDensity) count = eniLimitedPods(info, settings.reservedENIs);
  else count = 110;
  if ((kubelet.podsPerCore ?? 0) > 0 && flags.podsPerCoreEnabled)
    count = Math.min(kubelet.podsPerCore! * info.vcpus, count);
  return count;
}

/** kubeReservedResources' CPU: 6% of the first core, 1% of the second, 0.5% of the next two, 0.25% of the rest, each truncated to a millicore. */
const CPU_RANGES = [
  { start: 0, end: 1000, percentage: 0.06 },
  { start: 1000, end: 2000, percentage: 0.01 },
  { start: 2000, end: 4000, percentage: 0.005 },
  { start: 4000, end: 2 ** 31, percentage: 0.0025 },
] as const;

function kubeReservedCpu(milli: number): number {
  let reserved = 0;
  for (const { start, end, percentage } of CPU_RANGES) {
    if (milli < start) continue;
    const r = milli < end ? milli - start : end - start;
    reserved += Math.trunc(r * percentage);
  }
  return reserved;
}

/** A setting's quantity in the unit asked (1000: millicores), or an error naming it. */
function quantity(value: string, unit: number, what: string): number {
  const parsed = parseQuantity(value);
  if (parsed === undefined) throw new RangeError(`${what}: ${JSON.stringify(value)} is not a quantity`);
  return Math.round(parsed * unit);
}

/** evictionThreshold's memory: 100Mi, or evictionHard's memory.available (a percentage of the capacity, rounded up). */
function evictionMemory(capacity: number, evictionHard: KubeletSettings['evictionHard']): number {
  const signal = evictionHard?.['memory.available'];
  if (signal === undefined) return 100 * MI;
  if (!signal.endsWith('%')) return quantity(signal, 1, 'evictionHard memory.available');
  const p = Number.parseFloat(signal.slice(0, -1));
  if (Number.isNaN(p))
    throw new RangeError(`evictionHard memory.available: ${JSON.stringify(signal)} is not a percentage`);
  // 100% disables the threshold (kubelet-config.v1beta1).
  return Math.ceil((capacity / 100) * (p === 100 ? 0 : p));
}

/**
 * The type's allocatable CPU, memory and pods for a NodeClass of `amiFamily` with these kubelet
 * settings. `discoveredMemory`: the memory capacity a registered node of the type reported, which
 * the provider uses in place of its formula once it has seen one (the eviction threshold still
 * reads the formula's figure).
 */
export function awsAllocatable(
  info: InstanceTypeInfo,
  kubelet: KubeletSettings,
  amiFamily: string | undefined,
  settings: ProviderSettings = KARPENTER_DEFAULTS,
  discoveredMemory?: number,
): Allocatable {
  const flags = FAMILY_FLAGS[amiFamily ?? ''] ?? DEFAULT_FLAGS;
  const cpu = info.vcpus * 1000;
  const formulaMemory = memoryCapacity(info, settings);
  const podCount = pods(info, kubelet, flags, settings);
  const overheadPods = flags.usesENILimitedMemoryOverhead ? eniLimitedPods(info, 0) : podCount;
  const reserved = (map: KubeletSettings['kubeReserved'], key: string, unit: number, what: string) => {
    const v = map?.[key];
    return v === undefined ? undefined : quantity(v, unit, `${what} ${key}`);
  };
  const kubeCpu = reserved(kubelet.kubeReserved, 'cpu', 1000, 'kubeReserved') ?? kubeReservedCpu(cpu);
  const kubeMemory = reserved(kubelet.kubeReserved, 'memory', 1, 'kubeReserved') ?? (11 * overheadPods + 255) * MI;
  const systemCpu = reserved(kubelet.systemReserved, 'cpu', 1000, 'systemReserved') ?? 0;
  const systemMemory = reserved(kubelet.systemReserved, 'memory', 1, 'systemReserved') ?? 0;
  const reservedPods =
    (reserved(kubelet.kubeReserved, 'pods', 1, 'kubeReserved') ?? 0) +
    (reserved(kubelet.systemReserved, 'pods', 1, 'systemReserved') ?? 0);
  return {
    cpu: cpu - kubeCpu - systemCpu,
    memory:
      (discoveredMemory ?? formulaMemory) -
      kubeMemory -
      systemMemory -
      evictionMemory(formulaMemory, kubelet.evictionHard),
    pods: podCount - reservedPods,
  };
}

/**
 * The type's capacity as the provider's NewInstanceType sets it (CPU in cores, memory in bytes by
 * the formula, pods): what a NodePool's limits are compared with (filterByRemainingResources).
 */
export function awsCapacity(
  info: InstanceTypeInfo,
  kubelet: KubeletSettings,
  amiFamily: string | undefined,
  settings: ProviderSettings = KARPENTER_DEFAULTS,
): Allocatable {
  const flags = FAMILY_FLAGS[amiFamily ?? ''] ?? DEFAULT_FLAGS;
  return { cpu: info.vcpus, memory: memoryCapacity(info, settings), pods: pods(info, kubelet, flags, settings) };
}

/** What an EC2NodeClass sets that the arithmetic reads. */
export interface NodeClassSizing {
  /** AMIFamily(): spec.amiFamily, else the family of the first amiSelectorTerms alias, else Custom; undefined: an alias of no family known. */
  readonly amiFamily: string | undefined;
  readonly kubelet: KubeletSettings;
  /** A kubelet value is a CEL expression (v1.15.0's NodeClassCEL), which the watcher does not evaluate. */
  readonly expressions: boolean;
}

export interface Ec2NodeClassSpec {
  amiFamily?: string | null;
  amiSelectorTerms?: readonly { alias?: string | null }[] | null;
  kubelet?: {
    maxPods?: number | string | null;
    podsPerCore?: number | null;
    kubeReserved?: Record<string, string> | null;
    systemReserved?: Record<string, string> | null;
    evictionHard?: Record<string, string> | null;
  } | null;
}

const ALIAS_FAMILIES = ['AL2', 'AL2023', 'Bottlerocket', 'Windows2019', 'Windows2022', 'Windows2025'];

/** An EC2NodeClass's spec as the provider's Resolve reads it (EC2NodeClass.AMIFamily, KubeletConfiguration). */
export function nodeClassSizing(spec: Ec2NodeClassSpec | undefined | null): NodeClassSizing {
  const alias = spec?.amiSelectorTerms?.find((t) => t.alias)?.alias ?? undefined;
  const aliasFamily = alias && ALIAS_FAMILIES.find((f) => f.toLowerCase() === alias.split('@')[0]);
  const amiFamily = spec?.amiFamily ?? (alias === undefined ? 'Custom' : aliasFamily);
  const k = spec?.kubelet ?? {};
  const isQuantity = (v: string) => parseQuantity(v) !== undefined;
  const maps = [k.kubeReserved, k.systemReserved].flatMap((m) => Object.values(m ?? {}));
  const kubelet: KubeletSettings = {
    ...(typeof k.maxPods === 'number' ? { maxPods: k.maxPods } : {}),
    ...(typeof k.podsPerCore === 'number' ? { podsPerCore: k.podsPerCore } : {}),
    ...(k.kubeReserved ? { kubeReserved: k.kubeReserved } : {}),
    ...(k.systemReserved ? { systemReserved: k.systemReserved } : {}),
    ...(k.evictionHard ? { evictionHard: k.evictionHard } : {}),
  };
  return { amiFamily, kubelet, expressions: typeof k.maxPods === 'string' || !maps.every(isQuantity) };
}

/** What the provider computes a type's allocatable from, besides the type: the NodeClass's settings and its own. */
export interface FitSizing {
  readonly nodeClass: NodeClassSizing;
  readonly settings: ProviderSettings;
  /**
   * The types a registered node was seen of: once one registered, the provider may hold the memory
   * that node reported (its discovered capacity) in place of its formula's figure.
   */
  readonly registered: ReadonlySet<string>;
}

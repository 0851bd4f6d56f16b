// A client for test/judges/oracle, the judge of the decision engine: Karpenter's own NodeOverlay
// controller (Reconcile: validation, conflicts, statuses) and instance-type store (ApplyAll: the
// price each NodePool's offerings get), built per Karpenter version from the Go module proxy by
// scripts/control-plane.sh and asked one JSON line at a time.
//
// consolidate() asks Karpenter's own consolidation code (computeConsolidation, via consolidate.go).
//
// judge() may be called many times without waiting: the answers come back in request order (the
// judge works on all cores), and at most MAX_IN_FLIGHT requests are written ahead of their answers.
import { spawn, type ChildProcessWithoutNullStreams } from 'node:child_process';
import { createInterface } from 'node:readline';
import { binary } from '../../kit/control-plane.ts';

export const JUDGE_VERSIONS = ['v1.14.3', 'v1.15.0'] as const;
export type JudgeVersion = (typeof JUDGE_VERSIONS)[number];

const BINARY = {
  'v1.14.3': 'karpenterOracleV1_14_3',
  'v1.15.0': 'karpenterOracleV1_15_0',
} as const satisfies Record<JudgeVersion, Parameters<typeof binary>[0]>;

const MAX_IN_FLIGHT = 64;
/** The judge's stderr kept for error messages: the last this many characters. */
const STDERR_KEPT = 64 * 1024;

/** A corev1.NodeSelectorRequirement (operators In, NotIn, Exists, DoesNotExist, Gt, Lt; Karpenter's Gte, Lte). */
export interface JudgeRequirement {
  key: string;
  operator: string;
  values?: string[];
}

/** A NodePool template requirement (`NodeSelectorRequirementWithMinValues`). */
export interface JudgeNodePoolRequirement extends JudgeRequirement {
  minValues?: number;
}

export interface JudgeOffering {
  /** Typically capacity type and zone (reserved offerings also their reservation id). */
  requirements: JudgeRequirement[];
  price: number;
  available: boolean;
}

/**
 * An instance type as the cloud provider returns it: its requirements are used as given (the
 * judge adds nothing), so they carry the instance type name, zones, capacity types, family, ...
 */
export interface JudgeInstanceType {
  name: string;
  requirements: JudgeRequirement[];
  offerings: JudgeOffering[];
  /** Resource quantities, e.g. `{cpu: '4', memory: '16Gi', pods: '58'}`. */
  capacity: Record<string, string>;
  /** The overhead's total (kubelet and system reservations, eviction threshold); none: allocatable is the capacity. */
  overhead?: Record<string, string>;
}

export interface JudgeNodePool {
  name: string;
  /** spec.template.metadata.labels */
  labels: Record<string, string>;
  /** spec.template.spec.requirements */
  requirements: JudgeNodePoolRequirement[];
}

export interface JudgeOverlay {
  name: string;
  /** Unset counts as 0. */
  weight?: number | null;
  /** metadata.generation; 1 when absent. */
  generation?: number;
  requirements: JudgeRequirement[];
  price?: string;
  priceAdjustment?: string;
  capacity?: Record<string, string>;
}

export interface JudgeLaunch {
  nodePool: string;
  instanceType: string;
  /** Index into that instance type's offerings. */
  offering: number;
}

/** An instance type as DescribeInstanceTypes describes it, with an EC2NodeClass's kubelet settings and Karpenter's options. */
export interface AllocatableCase {
  vcpus: number;
  memoryMiB: number;
  arch: string;
  maxENIs: number;
  ipv4PerENI: number;
  amiFamily: string;
  maxPods?: number;
  podsPerCore?: number;
  kubeReserved?: Record<string, string>;
  systemReserved?: Record<string, string>;
  evictionHard?: Record<string, string>;
  vmMemoryOverheadPercent: number;
  reservedENIs: number;
}

/** CPU in millicores, memory in bytes, pods; `parts`: capacity and each overhead's memory. */
export interface AllocatableAnswer {
  cpu: number;
  memory: number;
  pods: number;
  parts: Record<string, number>;
  /** Capacity (cpu, memory, pods) and the overhead's total (cpu, memory), as quantities. */
  capacity: Record<string, string>;
  overhead: Record<string, string>;
}

export interface JudgeCase {
  instanceTypes: JudgeInstanceType[];
  nodePools: JudgeNodePool[];
  overlays: JudgeOverlay[];
  launches: JudgeLaunch[];
}

/** A status condition exactly as Karpenter wrote it, read back from the fake client. */
export interface JudgeCondition {
  type: string;
  status: 'True' | 'False' | 'Unknown';
  reason: string;
  message: string;
  observedGeneration: number;
  /** RFC 3339; the judge's clock is fixed. */
  lastTransitionTime: string;
}

export interface JudgeAnswer {
  /** Per launch: the overlay whose price Karpenter's store applied to that offering, or null. */
  applied: (string | null)[];
  /** Every overlay's status. */
  statuses: Record<string, { conditions: JudgeCondition[] }>;
  /** Set only when Reconcile failed (or left a NodePool unevaluated); `applied` is then all null. */
  error?: string;
}

export interface JudgeTables {
  normalizedLabels: Record<string, string>;
  normalizedLabelValues: Record<string, Record<string, string>>;
}

/** Karpenter's global label sets as the judge sees them (with the AWS provider's init), sorted. */
export interface JudgeWellKnown {
  wellKnownLabels: string[];
  restrictedLabelDomains: string[];
}

/** A NodeClaim as the scheduler writes it: its requirements (the candidate types among them). */
export interface LaunchClaim {
  nodePool: string;
  requirements: JudgeNodePoolRequirement[];
}

/** The effect's judge: launches replayed by the AWS provider's own launch code, with and without the selected overlays. */
export interface LaunchRequest {
  instanceTypes: JudgeInstanceType[];
  nodePools: JudgeNodePool[];
  overlays: (JudgeOverlay & { selected: boolean })[];
  /** The EC2NodeClass's subnets, one per zone. */
  zones: string[];
  claims: LaunchClaim[];
  /** Catalog orders each launch is run in (Go's sort.Slice is not stable): a launch that changes with them is orderDependent. */
  orders: number;
}

/** One world's launch: the CreateFleet request Karpenter built and what EC2's documented rule launches. */
export interface WorldLaunchAnswer {
  /** karpenter.sh/price-overlay-applied, as the scheduler would set it in this world. */
  priceOverlayApplied: boolean;
  capacityType?: 'on-demand' | 'spot';
  strategy?: string;
  overrides?: { instanceType: string; zone: string; priority: number }[];
  /** On-demand: the types with the best priority (several: a tie EC2 breaks); spot: every type (EC2 picks the pool). */
  picks?: string[];
  orderDependent?: boolean;
  /** Karpenter's Create failed before CreateFleet. */
  error?: string;
}

export interface LaunchAnswer {
  /** Every overlay's status with all overlays, and with only those not selected. */
  statuses: Record<string, { conditions: JudgeCondition[] }>;
  statusesWithout: Record<string, { conditions: JudgeCondition[] }>;
  claims: { with: WorldLaunchAnswer; without: WorldLaunchAnswer }[];
  error?: string;
}

/**
 * A NodePool of the consolidation judge: the decision judge's, with its weight and disruption settings.
 * computeConsolidation itself reads neither setting (ShouldDisrupt does, which the judge does not apply).
 */
export interface ConsolidateNodePool extends JudgeNodePool {
  weight?: number;
  /** spec.disruption.consolidateAfter; "0s" when absent. */
  consolidateAfter?: string;
  /** spec.disruption.consolidationPolicy; WhenEmptyOrUnderutilized when absent. */
  consolidationPolicy?: 'WhenEmpty' | 'WhenEmptyOrUnderutilized' | 'Balanced';
  /** spec.limits, as quantities. */
  limits?: Record<string, string>;
}

/** A running, initialized node Karpenter launched (with its NodeClaim), and the pods bound to it (ReplicaSet-owned). */
export interface ConsolidateNode {
  name: string;
  nodePool: string;
  instanceType: string;
  zone: string;
  capacityType: 'on-demand' | 'spot' | 'reserved';
  /** `deletionCost`: the pod's controller.kubernetes.io/pod-deletion-cost, its eviction cost for Balanced consolidation. */
  pods: { cpu?: string; memory?: string; deletionCost?: string }[];
}

/** Karpenter's consolidation (computeConsolidation) on given candidate sets, with and without the selected overlays. */
export interface ConsolidateRequest {
  instanceTypes: JudgeInstanceType[];
  nodePools: ConsolidateNodePool[];
  overlays: (JudgeOverlay & { selected: boolean })[];
  nodes: ConsolidateNode[];
  /** Candidate sets, each evaluated exactly as given (node names). */
  commands: string[][];
  /** The SpotToSpotConsolidation feature gate. */
  spotToSpot: boolean;
  /** Each command (one node) as Drift.ComputeCommands computes it for a drifted node: no price test. */
  drift?: boolean;
}

/** The replacement NodeClaim of a consolidation command. */
export interface ConsolidationReplacement {
  nodePool: string;
  /** Its spec.requirements as ToNodeClaim writes them (instance types In, capacity type narrowed, minValues), sorted by key. */
  requirements: JudgeNodePoolRequirement[];
  /** Its spec.resources.requests: the pods' (and daemons') requests the scheduler packed into it. */
  requests?: Record<string, string>;
  /** Its instance-type options in Karpenter's order after the price filter, truncation and (several nodes) filterOutSameInstanceType. */
  instanceTypes: string[];
  /** Its karpenter.sh/price-overlay-applied: an overlay priced an offering of one of its types. */
  priceOverlayApplied: boolean;
}

/** One world's answer for one candidate set. */
export interface WorldCommand {
  decision: 'replace' | 'delete' | 'none';
  /** The summed candidate price Karpenter compared replacements with; 0 when it did not get that far. */
  candidatePrice: number;
  /** For none: the Unconsolidatable message Karpenter published (single-node sets only), "filterOutSameInstanceType: ..." (several), or "not a candidate: ...". */
  reason?: string;
  replacement?: ConsolidationReplacement;
  /**
   * A replacement of a Balanced NodePool's nodes: whether Balanced consolidation approves it, and
   * the ConsolidationApproved Event's message it publishes then, by NodePool.
   */
  balanced?: { approved: boolean; approvals?: Record<string, string> };
  /** computeConsolidation returned an error. */
  error?: string;
}

export interface ConsolidateAnswer {
  statuses: Record<string, { conditions: JudgeCondition[] }>;
  statusesWithout: Record<string, { conditions: JudgeCondition[] }>;
  commands: { with: WorldCommand; without: WorldCommand }[];
  /** Set only when the request could not be run (an overlay Reconcile failed, cluster state could not be built). */
  error?: string;
}

interface Waiting {
  resolve: (line: string) => void;
  reject: (e: Error) => void;
}

export class KarpenterJudge {
  readonly version: JudgeVersion;
  private readonly child: ChildProcessWithoutNullStreams;
  /** Written, awaiting their answers, in order. */
  private readonly inFlight: Waiting[] = [];
  /** Not yet written (more than MAX_IN_FLIGHT asked at once). */
  private readonly queued: { line: string; waiting: Waiting }[] = [];
  private stderr = '';
  private failure: Error | undefined;
  private closing = false;
  private readonly exited: Promise<void>;

  /**
   * `opts.kubeconfig`: the consolidation judge stores its worlds in that (admin) kube-apiserver
   * instead of its fake client, one world at a time (VENEER_JUDGE_KUBECONFIG, consolidate.go).
   */
  constructor(version: JudgeVersion, bin = binary(BINARY[version]), opts: { kubeconfig?: string } = {}) {
    this.version = version;
    // The judge's CPU is mostly Karpenter's allocations and Go's collection of them: with GOGC 400
    // the launch differential's judge spent 65 s of CPU instead of 83 (and held 1 GB instead of
    // 340 MB), and `npm test` is bound by its two cores.
    const env = {
      ...process.env,
      GOGC: '400',
      ...(opts.kubeconfig === undefined ? {} : { VENEER_JUDGE_KUBECONFIG: opts.kubeconfig }),
    };
    this.child = spawn(bin, [], { stdio: ['pipe', 'pipe', 'pipe'], env });
    this.child.stderr.on('data', (d: Buffer) => {
      this.stderr = (this.stderr + d.toString()).slice(-STDERR_KEPT);
    });
    // A write after the judge died fails with EPIPE; the exit handler reports why it died.
    this.child.stdin.on('error', () => {});
    createInterface({ input: this.child.stdout }).on('line', (line) => {
      this.inFlight.shift()?.resolve(line);
      this.pump();
    });
    this.exited = new Promise((resolve) => {
      const fail = (why: string) => {
        this.failure ??= new Error(`karpenter-oracle ${version} ${why}: ${this.stderr.trim()}`);
        for (const w of [...this.inFlight.splice(0), ...this.queued.splice(0).map((q) => q.waiting)])
          w.reject(this.failure);
        resolve();
      };
      this.child.on('error', (e) => fail(`failed to start (${e.message})`));
      this.child.on('close', (code, signal) => fail(`exited (${signal ?? code})`));
    });
  }

  private pump(): void {
    while (this.inFlight.length < MAX_IN_FLIGHT) {
      const next = this.queued.shift();
      if (next === undefined) break;
      this.inFlight.push(next.waiting);
      this.child.stdin.write(next.line);
    }
    if (this.closing && this.queued.length === 0) this.child.stdin.end();
  }

  private ask(request: unknown): Promise<string> {
    if (this.failure !== undefined) return Promise.reject(this.failure);
    if (this.closing) return Promise.reject(new Error(`karpenter-oracle ${this.version} is closed`));
    return new Promise((resolve, reject) => {
      this.queued.push({ line: `${JSON.stringify(request)}\n`, waiting: { resolve, reject } });
      this.pump();
    });
  }

  /** Karpenter's verdict on one case: whose price each launch got, and every overlay's status. */
  async judge(c: JudgeCase): Promise<JudgeAnswer> {
    return JSON.parse(await this.ask(c)) as JudgeAnswer;
  }

  /** What Karpenter's AWS provider launches for each NodeClaim, with and without the selected overlays (v1.14.3's judge only). */
  async launch(request: LaunchRequest): Promise<LaunchAnswer> {
    return JSON.parse(await this.ask({ launch: request })) as LaunchAnswer;
  }

  /** What Karpenter's AWS provider holds each instance type to hold for pods (v1.14.3's judge only). */
  async allocatable(cases: readonly AllocatableCase[]): Promise<AllocatableAnswer[]> {
    return (JSON.parse(await this.ask({ allocatable: { cases } })) as { allocatable: AllocatableAnswer[] }).allocatable;
  }

  /** What Karpenter's consolidation decides for each candidate set, with and without the selected overlays. */
  async consolidate(request: ConsolidateRequest): Promise<ConsolidateAnswer> {
    return JSON.parse(await this.ask({ consolidate: request })) as ConsolidateAnswer;
  }

  /** v1.NormalizedLabels and v1.NormalizedLabelValues. */
  async tables(): Promise<JudgeTables> {
    return JSON.parse(await this.ask({ tables: true })) as JudgeTables;
  }

  /** v1.WellKnownLabels and v1.RestrictedLabelDomains. */
  async wellKnown(): Promise<JudgeWellKnown> {
    return JSON.parse(await this.ask({ wellKnown: true })) as JudgeWellKnown;
  }

  /** Ends the judge once the requests already asked are answered; resolves when it has exited. */
  close(): Promise<void> {
    this.closing = true;
    this.pump();
    return this.exited;
  }
}

// The effect's vocabulary: what a record says the selected overlays changed about a launch, what
// a launch replay is given, and the bounded reasons an effect stays unknown (abstain.ts). The
// launch replay that fills it in is effect.ts; a launch of Karpenter's disruption is judged by
// ../disruption/, which adds its story.
import type { NodePoolView } from '../nodepool.ts';
import type { OverlayView } from '../overlay.ts';
import type { ProviderKeys } from '../providers.ts';
import type { Labels, Requirement } from '../requirements.ts';
import type { FitSizing } from './allocatable.ts';
import type { PriceBook } from './prices.ts';

export const EFFECTS = ['capacity-type', 'instance-type', 'replacement', 'none', 'unknown'] as const;
export type EffectVerdict = (typeof EFFECTS)[number];

/** Why an effect is unknown, as a bounded code (a metric's label) beside the reason in words. */
const UNKNOWN_REASONS = [
  'provider',
  'no-nodeclaim',
  'candidates-cut',
  'no-prices',
  'no-spot-prices',
  'zones',
  'attributes',
  'conflict',
  'fallback',
  'tie',
  'reserved',
  'exotic',
  'truncation',
  'no-offering',
  'replaced-set',
  'replaced-prices',
  'unseen-options',
  'min-values',
  'decision-moment',
  'balanced',
] as const;
export type UnknownReason = (typeof UNKNOWN_REASONS)[number];

/** What the AWS provider's launch reads of a NodeClaim besides its candidates (aws-launch.ts). */
export interface ClaimLaunchFacts {
  /** The NodeClaim's `karpenter.sh/capacity-type In` values. */
  readonly capacityTypes: ReadonlySet<string>;
  /** Its `topology.kubernetes.io/zone In` values, when it has that requirement. */
  readonly zones?: ReadonlySet<string>;
  /** A requirement with minValues: the exotic and spot filters stand aside. */
  readonly minValues: boolean;
}

/** `MaxInstanceTypes`: the scheduler cuts a NodeClaim's candidates to the 600 cheapest (by overlaid prices). */
export const MAX_CANDIDATES = 600;

/** The launch-relevant parts of a NodeClaim. */
export interface ClaimForEffect extends ClaimLaunchFacts {
  /** Its `node.kubernetes.io/instance-type In` values. */
  readonly candidates: readonly string[];
  /** Values every candidate shares: its requirements `In [one value]`. */
  readonly pinned: Labels;
  /** karpenter.sh/price-overlay-applied, as the scheduler set it. */
  readonly priceOverlayApplied: boolean;
  /**
   * Its other `In` requirements of several values (a NodePool's families, say), shared between
   * NodeClaims that have the same: which instance types could have been options at all.
   */
  readonly allowed?: ReadonlyMap<string, ReadonlySet<string>>;
  /** Its requirements' minValues by key (set when `minValues`): what consolidation's filters count. */
  readonly minValuesByKey?: ReadonlyMap<string, number>;
  /**
   * spec.resources.requests, cpu in cores and memory in bytes: what the scheduler packed into it,
   * its pods' and daemons' requests. A type with less capacity could not have been an option.
   */
  readonly requests?: {
    readonly cpu?: number;
    readonly memory?: number;
    readonly pods?: number;
    /** Resources besides CPU, memory and pods were requested: which types hold enough of them is not known. */
    readonly other?: boolean;
  };
  /**
   * Its requirements besides the instance types, combined per key as Karpenter holds them, one
   * shared array per distinct set: what a type that is no option had to meet to have been one.
   */
  readonly requirements?: readonly Requirement[];
}

/** The labels of a registered node per instance type: what a type's name does not tell of it. */
export type InstanceLabels = ReadonlyMap<string, Labels>;

export interface CountedOverlay {
  readonly overlay: OverlayView;
  /** Picked by the watcher's overlaySelector: left out of the world without them. */
  readonly selected: boolean;
  /**
   * Not selected, yet in one world only: Karpenter's validation without the selected overlays
   * (conflicts.ts) accepts one it refused as a Conflict (`without`), or refuses one it accepted (`with`).
   */
  readonly only?: 'with' | 'without';
}

export interface EffectInput {
  /** The keys of the provider that launched the node; undefined: unknown. */
  readonly provider: ProviderKeys | undefined;
  readonly launched: { readonly instanceType: string | undefined; readonly capacityType: string | undefined };
  readonly claim: ClaimForEffect | undefined;
  /** A NodeClaim was found, `claim` undefined all the same: it has no instance-type requirement to replay. */
  readonly nodeClaimFound?: boolean;
  readonly pool: NodePoolView | undefined;
  /** The overlays Karpenter applied at the launch (validated, not deleted), selected or not: one shared list per distinct set (moment.ts). */
  readonly counted: readonly CountedOverlay[];
  /** Overlays not selected whose verdict Karpenter could give differently without the selected ones (a Conflict at a selected overlay's weight): where one prices a candidate, the effect is unknown. */
  readonly conflicted: readonly OverlayView[];
  readonly prices: PriceBook | undefined;
  /** The zones the NodeClaim's NodeClass launches into (its subnets); undefined: not known. */
  readonly zones: ReadonlySet<string> | undefined;
  /**
   * The labels of a node of each instance type seen (every instance-type key it has): one
   * immutable map, a new one whenever a type is added, so that the replay's memos key on it.
   */
  readonly instanceLabels?: InstanceLabels | undefined;
  /**
   * What Karpenter's AWS provider computes a type's allocatable from besides the type (the
   * NodeClaim's NodeClass's settings, its own): with the price source's DescribeInstanceTypes,
   * whether the pods fit a type has Karpenter's answer. One object per NodeClass version.
   */
  readonly sizing?: FitSizing | undefined;
  /**
   * The instance types the NodeClaim would list without the selected overlays, where they differ
   * from its own (a replacement, whose options consolidation cut by overlaid prices): the launch
   * without them is replayed over these. One array per list, kept: the replay's memo keys on it.
   */
  readonly withoutCandidates?: readonly string[];
}

/** A launch as the replay predicts it in one world: what a record tells of each world. */
export interface LaunchStory {
  readonly capacityType: 'spot' | 'on-demand';
  readonly strategy: string;
  /**
   * The types EC2 may launch (several: a tie it breaks, or spot pools it picks among by capacity),
   * sorted; at most MAX_TYPES_SHOWN of them, `instanceTypeCount` says how many there are.
   */
  readonly instanceTypes: readonly string[];
  readonly instanceTypeCount: number;
  /** The on-demand list price of the type, when there is one type. */
  readonly listPrice?: number;
  /** Types priced alike straddle Karpenter's cut at 60: which of them were offered to EC2 was its sort's choice. */
  readonly atCut?: boolean;
}

/** Names shown of a world's launch: the record is an annotation on the node, and a tie can hold hundreds. */
export const MAX_TYPES_SHOWN = 8;

export interface Effect {
  readonly verdict: EffectVerdict;
  readonly reasonCode?: UnknownReason;
  readonly reason?: string;
  /** The launch in the world without the selected overlays. */
  readonly without?: LaunchStory;
  /** The launch as Karpenter's prices predict it, with the overlays. */
  readonly with?: LaunchStory;
  /** The launched offering's list price and the price Karpenter compared. */
  readonly launched?: { readonly listPrice: number; readonly price: number };
  /** Selected overlays that priced a candidate offering at the launch: those the effect is owed to. */
  readonly overlays?: readonly string[];
  readonly prices?: { readonly source: string; readonly asOf?: number };
  /** Set when Karpenter's disruption launched the node: what it replaced, and its price test in both worlds. */
  readonly disruption?: DisruptionStory;
}

/** A node Karpenter's disruption replaced by this one, with its offering and its price in both worlds. */
export interface ReplacedStory {
  readonly nodeClaim: string;
  readonly node?: string;
  readonly instanceType?: string;
  readonly capacityType?: string;
  readonly zone?: string;
  readonly nodePool?: string;
  /** The price Karpenter compared (its offering's, overlays applied) with the overlays and without the selected ones. */
  readonly price?: { readonly with: number; readonly without: number };
}

/**
 * Names shown of the selected overlays that priced a candidate: a cluster may hold hundreds, and
 * the story is an annotation in an object of at most 256 KiB, past which every write of the node
 * fails. The count says how many there were.
 */
export const MAX_OVERLAYS_SHOWN = 20;

/** Names shown of the nodes a replacement replaced: a multi-node consolidation can replace a hundred. */
export const MAX_REPLACED_SHOWN = 8;

export interface DisruptionStory {
  /** Karpenter's reason for the launch: Underutilized, Drifted, Unhealthy. */
  readonly reason: string;
  /** At most MAX_REPLACED_SHOWN of them; `replacedCount` says how many there are. */
  readonly replaced: readonly ReplacedStory[];
  readonly replacedCount: number;
  /** Why no replaced node is named: several drift commands' marks within seconds of its creation. */
  readonly replacedUnclear?: string;
  /** The replaced nodes' summed price, with the overlays and without the selected ones: what the replacement had to undercut. */
  readonly price?: { readonly with: number; readonly without: number };
  /** Karpenter's estimate with the overlays (EstimatedSavings): the replaced price less the cheapest option's cheapest offering. */
  readonly savings?: number;
  /** Of the replacement's instance types, how many undercut the replaced nodes without the selected overlays. */
  readonly cheaperWithout?: number;
  /**
   * Whether Karpenter's consolidation would have made this replacement without the selected
   * overlays (its price filter, minValues and, for several nodes, filterOutSameInstanceType);
   * undefined where the watcher cannot tell.
   */
  readonly replacedWithout?: boolean;
  /** Of the replaced nodes, the recorded ones whose overlay had changed or gone: the churn it caused. */
  readonly churn?: readonly ChurnStory[];
  /**
   * The overlays changed while Karpenter decided, and this many moments of its decision reproduce
   * the options it kept: each gives the verdict, and the figures told are the latest one's.
   */
  readonly moments?: number;
}

/** Recorded nodes a replacement replaced while the overlay their records name had changed or gone. */
export interface ChurnStory {
  readonly overlay: string;
  readonly state: 'changed' | 'gone';
  readonly nodes: number;
}

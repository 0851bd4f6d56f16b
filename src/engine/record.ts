// The record written on a node: label keys under the configured namespace, their values, and
// the annotation that tells the whole story.
import { basicTimestamp, rfc3339, toLabelValue } from './labels.ts';
import type { OverlayView } from './overlay.ts';
import type { ProviderChoice, ProviderFrom } from './provider-choice.ts';
import { EFFECTS, MAX_OVERLAYS_SHOWN, type Effect, type EffectVerdict } from './effect/types.ts';

/** The Veneer labels on an overlay that are copied onto the node (always `veneer.io/...` there). */
const COPIED_FROM_OVERLAY = ['capacity-type', 'instance-family', 'instance-type', 'region'] as const;

export interface RecordKeys {
  /** The label namespace: every label key under `<namespace>/` is the watcher's (but the opt-out). */
  namespace: string;
  /**
   * `<namespace>/opt-out: "true"` on a node, set by whoever launches it (a NodePool's template
   * labels, the kubelet's --node-labels): the node is left undecided, with no record.
   */
  optOut: string;
  influenced: string;
  /** What the selected overlays changed about the launch (EFFECTS). */
  effect: string;
  matchingOverlay: string;
  labeledAt: string;
  copied: Record<(typeof COPIED_FROM_OVERLAY)[number], string>;
  decisionAnnotation: string;
  /** Every label key the watcher may write: the ones it owns. */
  ownedLabels: readonly string[];
  ownedAnnotations: readonly string[];
}

export function recordKeys(ns: string): RecordKeys {
  const copied = Object.fromEntries(COPIED_FROM_OVERLAY.map((k) => [k, `${ns}/${k}`])) as RecordKeys['copied'];
  const influenced = `${ns}/overlay-influenced`;
  const matchingOverlay = `${ns}/matching-overlay`;
  const labeledAt = `${ns}/labeled-at`;
  const decisionAnnotation = `${ns}/overlay-decision`;
  const effect = `${ns}/overlay-effect`;
  return {
    namespace: ns,
    optOut: `${ns}/opt-out`,
    influenced,
    effect,
    matchingOverlay,
    labeledAt,
    copied,
    decisionAnnotation,
    ownedLabels: [influenced, matchingOverlay, ...Object.values(copied), effect, labeledAt],
    ownedAnnotations: [decisionAnnotation],
  };
}

export type DecidedBy = 'webhook' | 'reconciler' | 'cli';
export type Basis = 'exact' | 'approximate';

interface RecordInput {
  keys: RecordKeys;
  overlay: OverlayView | undefined;
  decidedBy: DecidedBy;
  basis: Basis;
  /** The launch decision time the overlays were evaluated at. */
  evaluatedAt: number;
  labeledAt: number;
  characteristicsFrom: 'node' | 'node+nodeclaim';
  nodeClaim?: string;
  /** The overlay, not one of the selector's, whose price Karpenter applied to the launched offering. */
  pricedBy?: string;
  provider?: ProviderChoice;
  /** What the selected overlays changed about the launch; absent from records made before the watcher knew. */
  effect?: Effect;
}

export interface NodeRecord {
  labels: Record<string, string>;
  annotations: Record<string, string>;
}

/** The effect a record's labels carry: a value outside EFFECTS (or none, an older record's) is unknown. */
export function recordedEffect(labels: Readonly<Record<string, string>>, keys: RecordKeys): EffectVerdict {
  const effect = labels[keys.effect];
  return effect !== undefined && (EFFECTS as readonly string[]).includes(effect)
    ? (effect as EffectVerdict)
    : 'unknown';
}

/** The story behind the labels, as stored (JSON) in the decision annotation. */
export interface DecisionStory {
  influenced: boolean;
  overlay: string | null;
  weight?: number;
  price?: string;
  priceAdjustment?: string;
  decidedBy: DecidedBy;
  evaluatedAt: string;
  labeledAt: string;
  basis: Basis;
  characteristicsFrom: 'node' | 'node+nodeclaim';
  nodeClaim?: string;
  /** The overlay, not one of the selector's, whose price Karpenter applied (the node is then not influenced). */
  pricedBy?: string;
  /** The cloud provider whose keys the launch was judged with (`aws`, `kwok`, `unknown`), and how it was known. */
  provider?: string;
  providerFrom?: ProviderFrom;
  /** Why those may not be the keys Karpenter compared (the basis is then approximate). */
  providerWarning?: string;
  effect?: EffectStory;
  labels: string[];
}

/**
 * What a cache keeps of a record's story for as long as the node exists: who decided it and on
 * what basis (the Event's sentence), and the overlay's terms at the launch (the churn).
 */
export type RecordTold = Pick<
  DecisionStory,
  'overlay' | 'weight' | 'price' | 'priceAdjustment' | 'decidedBy' | 'basis'
> & {
  /** Why the effect is unknown (its reasonCode), for effect_unknown_total. */
  effectReason?: string;
};

/** The effect as the annotation tells it: the verdict, and both worlds' launches. */
export interface EffectStory extends Omit<Effect, 'prices'> {
  prices?: { source: string; asOf?: string };
  /** How many selected overlays priced a candidate, when more than the MAX_OVERLAYS_SHOWN named. */
  overlaysCount?: number;
}

export function buildRecord(input: RecordInput): NodeRecord {
  const { keys, overlay } = input;
  const labels: Record<string, string> = { [keys.influenced]: overlay ? 'true' : 'false' };
  if (overlay) {
    labels[keys.matchingOverlay] = overlay.nameLabelValue;
    for (const [name, key] of Object.entries(keys.copied)) {
      const value = overlay.labels[`veneer.io/${name}`];
      if (value !== undefined && value !== '') labels[key] = toLabelValue(value);
    }
  }
  if (input.effect) labels[keys.effect] = input.effect.verdict;
  labels[keys.labeledAt] = basicTimestamp(input.labeledAt);
  const story: DecisionStory = {
    influenced: overlay !== undefined,
    overlay: overlay?.name ?? null,
    ...(overlay ? { weight: overlay.weight } : {}),
    ...(overlay?.price !== undefined ? { price: overlay.price } : {}),
    ...(overlay?.priceAdjustment !== undefined ? { priceAdjustment: overlay.priceAdjustment } : {}),
    decidedBy: input.decidedBy,
    evaluatedAt: rfc3339(input.evaluatedAt),
    labeledAt: rfc3339(input.labeledAt),
    basis: input.basis,
    characteristicsFrom: input.characteristicsFrom,
    ...(input.nodeClaim ? { nodeClaim: input.nodeClaim } : {}),
    ...(input.pricedBy !== undefined ? { pricedBy: input.pricedBy } : {}),
    ...(input.provider ? { provider: input.provider.name, providerFrom: input.provider.from } : {}),
    ...(input.provider?.warning !== undefined ? { providerWarning: input.provider.warning } : {}),
    ...(input.effect ? { effect: effectStory(input.effect) } : {}),
    labels: Object.keys(labels),
  };
  return { labels, annotations: { [keys.decisionAnnotation]: JSON.stringify(story) } };
}

function effectStory(e: Effect): EffectStory {
  const { prices, overlays, ...rest } = e;
  return {
    ...rest,
    ...(overlays ? { overlays: overlays.slice(0, MAX_OVERLAYS_SHOWN) } : {}),
    ...(overlays && overlays.length > MAX_OVERLAYS_SHOWN ? { overlaysCount: overlays.length } : {}),
    ...(prices
      ? { prices: { source: prices.source, ...(prices.asOf !== undefined ? { asOf: rfc3339(prices.asOf) } : {}) } }
      : {}),
  };
}

/** The story in a decision annotation, or undefined when it is missing or not ours to read. */
export function readStory(annotation: string | undefined): DecisionStory | undefined {
  if (annotation === undefined) return undefined;
  try {
    const story = JSON.parse(annotation) as DecisionStory | null;
    return story !== null && typeof story === 'object' && typeof story.influenced === 'boolean' ? story : undefined;
  } catch {
    return undefined;
  }
}

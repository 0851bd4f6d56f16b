// A NodeOverlay reduced to what a decision needs, and the rules for whether it counts.
import { combineRequirements, type Labels, type Requirement, type RequirementSpec } from './requirements.ts';
import type { LabelSelector } from './selector.ts';
import { toLabelValue } from './labels.ts';
import { createHash } from 'node:crypto';

type Timestamp = string | Date | undefined | null;

interface ConditionObject {
  type?: string;
  status?: string;
  reason?: string;
  message?: string;
  observedGeneration?: number;
  lastTransitionTime?: Timestamp;
}

/** A status condition as Karpenter wrote it. */
interface Condition {
  readonly status: string;
  readonly reason?: string;
  /** The generation Karpenter judged when it wrote the condition. */
  readonly observedGeneration?: number;
  readonly since?: number;
}

/** The NodeOverlay fields we read, as JSON or as @kubernetes/client-node objects carry them. */
export interface OverlayObject {
  metadata?: {
    name?: string;
    labels?: Record<string, string> | null;
    creationTimestamp?: Timestamp;
    deletionTimestamp?: Timestamp;
    generation?: number;
  };
  spec?: {
    requirements?: RequirementSpec[] | null;
    price?: string | null;
    priceAdjustment?: string | null;
    capacity?: Record<string, unknown> | null;
    weight?: number | null;
  };
  status?: { conditions?: ConditionObject[] | null };
}

export interface OverlayView {
  readonly name: string;
  /** The name as a label value (shortened with a hash when needed), computed once. */
  readonly nameLabelValue: string;
  readonly labels: Labels;
  /** Karpenter treats an unset weight as 0. */
  readonly weight: number;
  readonly price?: string;
  readonly priceAdjustment?: string;
  /** The resources `spec.capacity` sets, sorted: Karpenter's validation refuses two of one weight that set one on a type. */
  readonly capacity?: readonly string[];
  /** One combined requirement per normalized key, as Karpenter holds them. */
  readonly requirements: readonly Requirement[];
  readonly createdAt?: number;
  readonly deletingAt?: number;
  readonly generation?: number;
  readonly ready?: Condition;
  readonly validation?: Condition;
  /** Equal fingerprints mean no difference that can change a decision (a hash: requirement lists can be long). */
  readonly fingerprint: string;
}

export interface OverlayPolicy {
  selector: LabelSelector;
  requireOverlayReady: boolean;
}

export function toEpochMs(ts: Timestamp): number | undefined {
  if (ts === undefined || ts === null || ts === '') return undefined;
  const ms = ts instanceof Date ? ts.getTime() : Date.parse(ts);
  return Number.isNaN(ms) ? undefined : ms;
}

function condition(obj: OverlayObject, type: string): Condition | undefined {
  const c = obj.status?.conditions?.find((x) => x.type === type);
  if (!c) return undefined;
  const since = toEpochMs(c.lastTransitionTime);
  return {
    status: c.status ?? 'Unknown',
    ...(c.reason ? { reason: c.reason } : {}),
    ...(typeof c.observedGeneration === 'number' ? { observedGeneration: c.observedGeneration } : {}),
    ...(since !== undefined ? { since } : {}),
  };
}

export function toOverlayView(obj: OverlayObject): OverlayView {
  const spec = obj.spec ?? {};
  const requirementSpecs = spec.requirements ?? [];
  const name = obj.metadata?.name ?? '';
  const view = {
    name,
    nameLabelValue: toLabelValue(name),
    labels: { ...(obj.metadata?.labels ?? {}) },
    weight: spec.weight ?? 0,
    ...(spec.price != null ? { price: spec.price } : {}),
    ...(spec.priceAdjustment != null ? { priceAdjustment: spec.priceAdjustment } : {}),
    ...(spec.capacity != null && Object.keys(spec.capacity).length > 0
      ? { capacity: Object.freeze(Object.keys(spec.capacity).sort()) }
      : {}),
    requirements: combineRequirements(requirementSpecs),
    createdAt: toEpochMs(obj.metadata?.creationTimestamp),
    deletingAt: toEpochMs(obj.metadata?.deletionTimestamp),
    ...(typeof obj.metadata?.generation === 'number' ? { generation: obj.metadata.generation } : {}),
    ready: condition(obj, 'Ready'),
    validation: condition(obj, 'ValidationSucceeded'),
  };
  const fingerprint = createHash('sha256')
    .update(
      JSON.stringify([
        view.labels,
        view.weight,
        view.price,
        view.priceAdjustment,
        view.capacity,
        requirementSpecs,
        view.deletingAt,
        view.generation,
        view.ready?.status,
        view.ready?.observedGeneration,
        view.validation?.status,
        view.validation?.reason,
        view.validation?.observedGeneration,
      ]),
    )
    .digest('base64');
  return { ...view, fingerprint };
}

/** Why an overlay is not one of those the watcher records (the selector's), or does not count; undefined when it counts. */
export function ineligibility(view: OverlayView, policy: OverlayPolicy): string | undefined {
  return policy.selector.matches(view.labels) ? unapplied(view, policy) : `not selected by ${policy.selector.source}`;
}

/**
 * Why Karpenter does not apply an overlay's price, or undefined when it does: selected or not, an
 * overlay that counts prices the offerings it meets, and outranks or is outranked by the others.
 */
export function unapplied(view: OverlayView, policy: OverlayPolicy): string | undefined {
  if (view.price === undefined && view.priceAdjustment === undefined) return 'changes no price';
  if (view.validation?.status === 'False') {
    return `${REJECTED} (ValidationSucceeded=False${view.validation.reason ? `, ${view.validation.reason}` : ''})`;
  }
  if (view.ready?.status === 'False')
    return `${REJECTED} (Ready=False${view.ready.reason ? `, ${view.ready.reason}` : ''})`;
  if (policy.requireOverlayReady) {
    const pending = awaitingValidation(view);
    if (pending !== undefined) return pending;
  }
  const invalid = view.requirements.find((r) => r.invalid !== undefined);
  if (invalid) return `invalid requirement on ${invalid.key}: ${invalid.invalid}`;
  return undefined;
}

/**
 * Karpenter applies an overlay only after its controller validated it (statuses are written
 * first, then the store that prices offerings is swapped in), so one it has not validated in
 * its current generation counts for nothing yet.
 */
function awaitingValidation(view: OverlayView): string | undefined {
  const ready = view.ready;
  if (ready === undefined) return `${NOT_VALIDATED}: is its NodeOverlay feature gate on?`;
  if (ready.status !== 'True') return `${NOT_VALIDATED} yet (Ready=${ready.status})`;
  if (
    view.generation !== undefined &&
    ready.observedGeneration !== undefined &&
    ready.observedGeneration < view.generation
  ) {
    return `${NOT_VALIDATED} in generation ${view.generation} yet (it validated ${ready.observedGeneration})`;
  }
  return undefined;
}

/** The start of every reason given for an overlay Karpenter's validation failed. */
export const REJECTED = 'rejected by Karpenter';

/** The start of every reason `awaitingValidation` gives. */
export const NOT_VALIDATED = 'not validated by Karpenter';

/** Karpenter's verdict on an overlay, for counting overlays by state (never by name). */
export const OVERLAY_STATES = [
  'counted',
  'rejected_conflict',
  'rejected_validation',
  'unvalidated',
  'capacity_only',
  'deleting',
] as const;
type OverlayState = (typeof OVERLAY_STATES)[number];

/**
 * `counted`: Karpenter validated it and it prices offerings; the rest count for nothing:
 * refused as a Conflict or for any other reason, not validated in its current generation,
 * changing no price, being deleted.
 */
export function overlayState(view: OverlayView): OverlayState {
  if (view.deletingAt !== undefined) return 'deleting';
  if (view.validation?.status === 'False' || view.ready?.status === 'False') {
    return view.validation?.reason === 'Conflict' ? 'rejected_conflict' : 'rejected_validation';
  }
  if (awaitingValidation(view) !== undefined) return 'unvalidated';
  if (view.price === undefined && view.priceAdjustment === undefined) return 'capacity_only';
  return 'counted';
}

/** Karpenter's order: higher weight first; equal weight, the name that sorts later first. */
export function outranks(a: OverlayView, b: OverlayView): boolean {
  return a.weight !== b.weight ? a.weight > b.weight : a.name > b.name;
}

// A NodeOverlay reduced to what a decision needs, and the rules for whether it counts.
import { combineRequirements, type Labels, type Requirement, type RequirementSpec } from './requirements.ts';
import type { LabelSelector } from './selector.ts';
import { toLabelValue } from './labels.ts';
import { createHash } from 'node:crypto';

type Timestamp = string | Date | undefined | null;

export interface ConditionObject {
  type?: string;
  status?: string;
  reason?: string;
  message?: string;
}

/** The NodeOverlay fields we read, as JSON or as @kubernetes/client-node objects carry them. */
export interface OverlayObject {
  metadata?: {
    name?: string;
    labels?: Record<string, string> | null;
    creationTimestamp?: Timestamp;
    deletionTimestamp?: Timestamp;
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
  /** One combined requirement per normalized key, as Karpenter holds them. */
  readonly requirements: readonly Requirement[];
  readonly createdAt?: number;
  readonly deletingAt?: number;
  readonly ready?: ConditionObject;
  readonly validation?: ConditionObject;
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

function condition(obj: OverlayObject, type: string): ConditionObject | undefined {
  const c = obj.status?.conditions?.find((x) => x.type === type);
  return c ? { type, status: c.status ?? 'Unknown', ...(c.reason ? { reason: c.reason } : {}) } : undefined;
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
    requirements: combineRequirements(requirementSpecs),
    createdAt: toEpochMs(obj.metadata?.creationTimestamp),
    deletingAt: toEpochMs(obj.metadata?.deletionTimestamp),
    ready: condition(obj, 'Ready'),
    validation: condition(obj, 'ValidationSucceeded'),
  };
  const fingerprint = createHash('sha256').update(JSON.stringify([
    view.labels, view.weight, view.price, view.priceAdjustment, requirementSpecs,
    view.deletingAt, view.ready?.status, view.validation?.status,
  ])).digest('base64');
  return { ...view, fingerprint };
}

/** Why an overlay does not count, or undefined when it does. */
export function ineligibility(view: OverlayView, policy: OverlayPolicy): string | undefined {
  if (!policy.selector.matches(view.labels)) return `not selected by ${policy.selector.source}`;
  if (view.price === undefined && view.priceAdjustment === undefined) return 'changes no price';
  if (view.validation?.status === 'False') {
    return `rejected by Karpenter (ValidationSucceeded=False${view.validation.reason ? `, ${view.validation.reason}` : ''})`;
  }
  if (view.ready?.status === 'False') return `rejected by Karpenter (Ready=False${view.ready.reason ? `, ${view.ready.reason}` : ''})`;
  if (policy.requireOverlayReady && view.ready?.status !== 'True') return 'not Ready=True (requireOverlayReady)';
  const invalid = view.requirements.find((r) => r.invalid !== undefined);
  if (invalid) return `invalid requirement on ${invalid.key}: ${invalid.invalid}`;
  return undefined;
}

/** Karpenter's order: higher weight first; equal weight, the name that sorts later first. */
export function outranks(a: OverlayView, b: OverlayView): boolean {
  return a.weight !== b.weight ? a.weight > b.weight : a.name > b.name;
}

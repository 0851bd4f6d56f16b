// The decision engine's door: what the rest of src/ uses, and only that (tests, kit/ and bench/
// import what else they need from the engine's modules).
export { decide, decisionInput, type EngineSettings, type LaunchKnowledge } from './decide.ts';
export { needsRecord, OPTED_OUT, undecidedSelector } from './scope.ts';
export { restoreAtRegistration } from './registration.ts';
export { OverlayIndex } from './overlay-index.ts';
export { CAPACITY_TYPE, INSTANCE_TYPE, NODEPOOL_LABEL, REGION, REGISTERED_LABEL, ZONE } from './well-known.ts';
export {
  toOverlayView,
  overlayState,
  OVERLAY_STATES,
  type OverlayObject,
  type OverlayView,
  type OverlayPolicy,
} from './overlay.ts';
export { toNodePoolView, type NodePoolObject, type NodePoolView } from './nodepool.ts';
export { KNOWN_PROVIDERS, withExtraKeys } from './providers.ts';
export { UNKNOWN_PROVIDER } from './provider-choice.ts';
export { MAX_UNKNOWN_GROUPS, providerCensus, type ProviderCensus } from './provider-census.ts';
export {
  toNodeView,
  toNodeClaimView,
  nodeClaimFor,
  type NodeObject,
  type NodeView,
  type NodeClaimView,
  type Allocatable,
  type NodeClaimLookup,
} from './node.ts';
export { decidedNodeLabelKeys, toDecidedNodeView } from './decided-node.ts';
export { recordKeys, readStory, recordedEffect, type RecordKeys } from './record.ts';
export { jsonPatch, mergePatch } from './patch.ts';
export { parseSelector } from './selector.ts';
export { explainer, type Explanation, type ProviderExplanation } from './explain.ts';
export {
  type ApprovalSeen,
  type CandidateSeen,
  type DisruptionEvidence,
  type DisruptionMark,
  evidenceOfReading,
} from './disruption/evidence.ts';
export {
  type ApprovalFigures,
  type ConsolidationApproval,
  launchingReason,
  parseApproval,
} from './disruption/events.ts';
export type { PoolOffering } from './disruption/types.ts';
export { DISRUPTION_REASONS, reasonOf } from './disruption/reasons.ts';
export {
  OVERLAY_STATES_AT_DISRUPTION,
  overlayStateAtDisruption,
  type RecordAtMark,
  recordAtMark,
} from './disruption/churn.ts';
export { EFFECTS, type Effect, type InstanceLabels } from './effect/types.ts';
export { onDemandListPrice, type PriceBook } from './effect/prices.ts';
export type { PricesDue } from './effect/prices-due.ts';
export {
  type Ec2NodeClassSpec,
  type FitSizing,
  type InstanceTypeInfo,
  KARPENTER_DEFAULTS,
  type NodeClassSizing,
  nodeClassSizing,
  type ProviderSettings,
} from './effect/allocatable.ts';
export type { Labels } from './requirements.ts';
export { ReportBuilder, buildReport, type Report, type ProviderReport } from './report.ts';
export type { OverlayReport } from './report-rows.ts';
export { isValidDnsSubdomain, fromBasicTimestamp } from './labels.ts';

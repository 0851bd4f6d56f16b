// The decision engine's public surface: everything the webhook, the reconciler and the CLI use.
export {
  decide,
  decisionInput,
  launchTime,
  karpenterView,
  providerOf,
  type Decision,
  type DecisionKnowledge,
  type EngineSettings,
  type LaunchKnowledge,
} from './decide.ts';
export {
  scope,
  characteristics,
  needsRecord,
  undecidedSelector,
  mutatingMatchConditions,
  validatingMatchConditions,
  SCOPE,
  CAPACITY_TYPES,
  type Scope,
  type CapacityType,
  type MatchCondition,
} from './scope.ts';
export { OverlayIndex, type Match, type OverlayVersion } from './overlay-index.ts';
export { CAPACITY_TYPE, INSTANCE_TYPE, NODEPOOL_LABEL, REGION, REGISTERED_LABEL, ZONE } from './well-known.ts';
export {
  toOverlayView,
  ineligibility,
  awaitingValidation,
  overlayState,
  OVERLAY_STATES,
  NOT_VALIDATED,
  type OverlayState,
  type OverlayObject,
  type OverlayView,
  type OverlayPolicy,
} from './overlay.ts';
export { toNodePoolView, NodePoolHistory, type NodePoolObject, type NodePoolView } from './nodepool.ts';
export { KarpenterView, type KeyRole } from './karpenter-view.ts';
export { AWS_KEYS, KWOK_KEYS, PROVIDERS, KNOWN_PROVIDERS, withExtraKeys, type ProviderKeys } from './providers.ts';
export {
  UNKNOWN_PROVIDER,
  chooseProvider,
  mostCommonGroup,
  type ProviderChoice,
  type ProviderFrom,
  type ProviderSetting,
} from './provider-choice.ts';
export {
  MAX_UNKNOWN_GROUPS,
  providerCensus,
  countGroups,
  matchesSetting,
  type ProviderCensus,
  type ProviderCount,
} from './provider-census.ts';
export {
  toNodeView,
  toNodeClaimView,
  nodeClaimFor,
  type NodeObject,
  type NodeClaimObject,
  type NodeView,
  type NodeClaimView,
  type NodeClaimLookup,
} from './node.ts';
export {
  recordKeys,
  readStory,
  recordTally,
  recordedEffect,
  type RecordKeys,
  type RecordTally,
  type NodeRecord,
  type DecisionStory,
  type DecidedBy,
} from './record.ts';
export { jsonPatch, mergePatch, type JsonPatchOp } from './patch.ts';
export { parseSelector, type LabelSelector } from './selector.ts';
export {
  explainer,
  type Explanation,
  type OverlayExplanation,
  type ProviderExplanation,
  type RequirementExplanation,
} from './explain.ts';
export { launchEffect } from './effect/effect.ts';
export {
  type DisruptionEvidence,
  type DisruptionMark,
  type LaunchOrigin,
  LAUNCHING_EVENT_WAIT_MS,
  evidenceOfReading,
  launchingReason,
  launchOrigin,
  MARK_WINDOW_MS,
} from './launch-origin.ts';
export {
  type ApprovalFigures,
  type BalancedEvidence,
  type ConsolidationApproval,
  parseApproval,
} from './effect/balanced.ts';
export type { PoolOffering } from './effect/pool-cost.ts';
export {
  type ReplacedNode,
  type ReplacementInput,
  replacementEffect,
  SPOT_TO_SPOT_MIN_OPTIONS,
} from './effect/replacement.ts';
export {
  churnOf,
  DISRUPTION_REASONS,
  disruptionReasonLabel,
  OVERLAY_STATES_AT_DISRUPTION,
  overlayStateAtDisruption,
  type DisruptionReasonLabel,
  type OverlayStateAtDisruption,
  type OverlayTerms,
  type RecordAtMark,
  recordAtMark,
} from './disruption.ts';
export {
  EFFECTS,
  UNKNOWN_REASONS,
  MAX_CANDIDATES,
  type Effect,
  type EffectVerdict,
  type UnknownReason,
  type ChurnStory,
  type ClaimForEffect,
  type CountedOverlay,
  type WorldLaunch,
} from './effect/types.ts';
export { onDemandListPrice, type PriceBook } from './effect/prices.ts';
export type { PricesDue } from './effect/prices-due.ts';
export type { Labels } from './requirements.ts';
export { awsNameLabels } from './effect/candidates.ts';
export {
  buildReport,
  NO_OVERLAY,
  type Report,
  type OverlayReport,
  type ProviderReport,
  type ReportTotals,
  type Verdict,
} from './report.ts';
export { isValidDnsSubdomain, isValidLabelValue, toLabelValue, basicTimestamp, fromBasicTimestamp } from './labels.ts';
export type { RequirementSpec } from './requirements.ts';

// The decision engine's public surface: everything the webhook, the reconciler and the CLI use.
export { decide, scope, characteristics, launchTime, karpenterView, providerOf, type Decision, type EngineSettings } from './decide.ts';
export {
  undecidedSelector, mutatingMatchConditions, validatingMatchConditions, SCOPE, CAPACITY_TYPE_LABEL, CAPACITY_TYPES, type Scope, type CapacityType, type MatchCondition,
} from './scope.ts';
export { OverlayIndex, type Match, type OverlayVersion } from './overlay-index.ts';
export { toOverlayView, ineligibility, awaitingValidation, overlayState, OVERLAY_STATES, NOT_VALIDATED, type OverlayState, type OverlayObject, type OverlayView, type OverlayPolicy } from './overlay.ts';
export { toNodePoolView, NodePoolHistory, type NodePoolObject, type NodePoolView } from './nodepool.ts';
export { KarpenterView, type KeyRole } from './karpenter-view.ts';
export {
  AWS_KEYS, KWOK_KEYS, PROVIDERS, KNOWN_PROVIDERS, UNKNOWN_PROVIDER, MAX_UNKNOWN_GROUPS, withExtraKeys, chooseProvider, providerCensus, countGroups, matchesSetting, mostCommonGroup,
  type ProviderKeys, type ProviderChoice, type ProviderFrom, type ProviderSetting, type ProviderCensus, type ProviderCount,
} from './providers.ts';
export { toNodeView, toNodeClaimView, nodeClaimFor, type NodeObject, type NodeClaimObject, type NodeView, type NodeClaimView, type NodeClaimLookup } from './node.ts';
export { recordKeys, readStory, type RecordKeys, type NodeRecord, type DecisionStory, type DecidedBy } from './record.ts';
export { jsonPatch, mergePatch, type JsonPatchOp } from './patch.ts';
export { parseSelector, type LabelSelector } from './selector.ts';
export { explainer, type Explanation, type OverlayExplanation, type ProviderExplanation, type RequirementExplanation } from './explain.ts';
export { launchEffect, EFFECTS, UNKNOWN_REASONS, MAX_CANDIDATES, type Effect, type EffectVerdict, type UnknownReason, type ClaimForEffect, type CountedOverlay, type WorldLaunch } from './effect/effect.ts';
export type { PriceBook } from './effect/prices.ts';
export type { Labels } from './requirements.ts';
export { awsNameLabels } from './effect/candidates.ts';
export { buildReport, NO_OVERLAY, type Report, type OverlayReport, type ProviderReport, type ReportTotals, type Verdict } from './report.ts';

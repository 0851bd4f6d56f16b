// Why a node got (or would get) its record: the decision plus, for every overlay, whether it
// was active at the launch, whether it matched, and each requirement against the node's value.
import { characteristics } from './scope.ts';
import {
  decide,
  decisionInput,
  karpenterView,
  launchTime,
  providerOf,
  type DecisionInput,
  type EngineSettings,
  type LaunchKnowledge,
} from './decide.ts';
import type { Effect } from './effect/types.ts';
import type { KeyRole } from './karpenter-view.ts';
import type { NodePoolView } from './nodepool.ts';
import type { NodeClaimLookup, NodeView } from './node.ts';
import type { ProviderFrom } from './provider-choice.ts';
import { OverlayIndex } from './overlay-index.ts';
import { ineligibility, type OverlayPolicy, type OverlayView } from './overlay.ts';
import { rfc3339 } from './labels.ts';
import { combinedOperator, type CombinedOperator, type Requirement, type RequirementSpec } from './requirements.ts';
import { labelValue } from './normalize.ts';

/** One requirement as Karpenter compares it: combined per normalized key. */
interface RequirementExplanation {
  key: string;
  operator: CombinedOperator;
  values: string[];
  /** Inclusive integer bounds, as decimal strings. */
  gte?: string;
  lte?: string;
  /** The requirements as written that were combined into this one. */
  from: RequirementSpec[];
  /** The node's value under the normalized key (or a deprecated alias of it). */
  nodeValue: string | null;
  /** How Karpenter knows the key for this launch (`label`: the NodePool is unknown, the node's labels stand in). */
  comparedAs: KeyRole;
  /** Set when the node carries the key but Karpenter does not compare it. */
  note?: string;
  pass: boolean;
}

/** What explain says of a key the node carries but Karpenter leaves undefined. */
const NOT_COMPARED = 'not an instance-type, offering or NodePool template key: undefined for Karpenter';

interface OverlayExplanation {
  name: string;
  weight: number;
  active: boolean;
  /** Why it was not active, when it was not. */
  inactiveReason?: string;
  matched: boolean;
  winner: boolean;
  requirements: RequirementExplanation[];
}

export interface Explanation {
  node: string;
  outcome: 'influenced' | 'not-influenced' | 'undetermined' | 'out-of-scope';
  reason?: string;
  overlay: string | null;
  basis?: 'exact' | 'approximate';
  evaluatedAt: string;
  labels: Record<string, string>;
  annotations: Record<string, string>;
  /** The record the node already carries, when it has one. */
  existingRecord?: Record<string, string>;
  /** Whose keys Karpenter compared, as far as the watcher knows (absent when out of scope). */
  provider?: ProviderExplanation;
  /** What the selected overlays changed about the launch: both worlds' launches (absent when not decided); the record's, for a recorded node. */
  effect?: Effect;
  /** For a recorded node, the effect decided again from what is there now, where its verdict differs from the record's. */
  effectNow?: Effect;
  overlays: OverlayExplanation[];
}

export interface ProviderExplanation {
  name: string;
  from: ProviderFrom;
  /** The NodeClaim's spec.nodeClassRef.group. */
  group?: string;
  /** Why these may not be the keys Karpenter compared (the basis is approximate). */
  warning?: string;
}

/**
 * Explains nodes against overlays known only by their current state (files or a live read):
 * each overlay counts from its creationTimestamp, and decisions about launches before
 * `knownSince` are marked approximate, since earlier changes are unknown. The overlay index is
 * built once for every node explained.
 */
export function explainer(
  known: {
    overlays: readonly OverlayView[];
    nodePools: readonly NodePoolView[];
    nodeClaims: NodeClaimLookup;
    launch?: LaunchKnowledge;
  },
  time: { now: number; knownSince: number },
  settings: EngineSettings,
  policy: OverlayPolicy,
): (node: NodeView) => Explanation {
  const { overlays } = known;
  const index = OverlayIndex.ofCurrent(overlays, policy, time.knownSince, known.nodePools);
  const owned = new Set([...settings.keys.ownedLabels]);
  // What does not depend on the node is worked out once.
  const shown = overlays.map(
    (o): ShownOverlay => ({
      overlay: o,
      ineligible: ineligibility(o, policy),
      requirements: o.requirements.map((r) => ({
        requirement: r,
        fixed: {
          key: r.key,
          operator: combinedOperator(r),
          values: [...r.values].sort(),
          ...(r.gte !== undefined ? { gte: String(r.gte) } : {}),
          ...(r.lte !== undefined ? { lte: String(r.lte) } : {}),
          from: r.from.map((f) => ({ key: f.key, operator: f.operator, values: [...(f.values ?? [])] })),
        },
      })),
    }),
  );
  return (node) => explainOne(decisionInput(node, known, time.now, 'cli'), shown, index, owned, settings);
}

interface ShownOverlay {
  overlay: OverlayView;
  ineligible: string | undefined;
  requirements: {
    requirement: Requirement;
    fixed: Omit<RequirementExplanation, 'nodeValue' | 'comparedAs' | 'note' | 'pass'>;
  }[];
}

function explainOne(
  input: DecisionInput,
  shown: readonly ShownOverlay[],
  index: OverlayIndex,
  owned: ReadonlySet<string>,
  settings: EngineSettings,
): Explanation {
  const existing = Object.fromEntries(Object.entries(input.node.labels).filter(([k]) => owned.has(k)));
  // An existing record is shown as it is, and the decision is made as if it were not there.
  const bare: NodeView = {
    ...input.node,
    labels: Object.fromEntries(Object.entries(input.node.labels).filter(([k]) => !owned.has(k))),
  };
  const decision = decide({ ...input, node: bare }, index, settings);
  const at = launchTime(bare, input.nodeClaim, input.now);
  const provider =
    decision.outcome === 'out-of-scope' || decision.outcome === 'recorded'
      ? providerOf(bare, input.nodeClaim, settings, input.nodeClassGroups)
      : decision.provider;
  const view = karpenterView(characteristics(bare, input.nodeClaim), at, index, provider);
  const winner = decision.outcome === 'influenced' ? decision.overlay?.name : undefined;
  const overlays = shown.map(({ overlay: o, ineligible, requirements: reqs }): OverlayExplanation => {
    const inactive =
      ineligible ??
      (o.createdAt !== undefined && o.createdAt > at
        ? `created after the launch (${rfc3339(o.createdAt)})`
        : undefined) ??
      (o.deletingAt !== undefined && o.deletingAt <= at ? `being deleted since ${rfc3339(o.deletingAt)}` : undefined);
    const requirements = reqs.map(({ requirement, fixed }): RequirementExplanation => {
      const nodeValue = labelValue(view.labels, requirement.key);
      const comparedAs = view.role(requirement.key);
      return {
        ...fixed,
        nodeValue: nodeValue ?? null,
        comparedAs,
        ...(comparedAs === 'undefined' && nodeValue !== undefined ? { note: NOT_COMPARED } : {}),
        pass: view.passes(requirement),
      };
    });
    return {
      name: o.name,
      weight: o.weight,
      active: inactive === undefined,
      ...(inactive !== undefined ? { inactiveReason: inactive } : {}),
      matched: inactive === undefined && requirements.every((r) => r.pass),
      winner: o.name === winner,
      requirements,
    };
  });
  const rest = {
    evaluatedAt: rfc3339(at),
    ...(Object.keys(existing).length > 0 ? { existingRecord: existing } : {}),
    ...(decision.outcome === 'out-of-scope'
      ? {}
      : {
          provider: {
            name: provider.name,
            from: provider.from,
            ...(provider.group !== undefined ? { group: provider.group } : {}),
            ...(provider.warning !== undefined ? { warning: provider.warning } : {}),
          },
        }),
  };
  switch (decision.outcome) {
    case 'out-of-scope':
    case 'undetermined':
      return {
        node: input.node.name,
        outcome: decision.outcome,
        reason: decision.reason,
        overlay: null,
        ...rest,
        labels: {},
        annotations: {},
        overlays,
      };
    case 'recorded':
      throw new Error('unreachable: the record was removed before deciding');
    default:
      return {
        node: input.node.name,
        outcome: decision.outcome,
        overlay: decision.overlay?.name ?? null,
        basis: decision.basis,
        ...rest,
        effect: decision.effect,
        labels: decision.record.labels,
        annotations: decision.record.annotations,
        overlays,
      };
  }
}

// Which nodes get a record, said once. The apiserver filters nodes before the watcher sees them
// (the undecided-node watch's label selector, the webhooks' matchConditions), and a filter that
// disagreed with scope() would silently leave nodes unrecorded or call the webhook for nothing;
// so those filters are derived here from the same declaration scope() reads.
import { registrationRewritesRecordCel } from './registration.ts';
import { CAPACITY_TYPE, NODEPOOL_LABEL } from './well-known.ts';
import type { NodeClaimView, NodeView } from './node.ts';
import type { RecordKeys } from './record.ts';
import type { Labels } from './requirements.ts';

/** Every karpenter.sh/capacity-type value Karpenter launches with. */
export const CAPACITY_TYPES = ['on-demand', 'spot', 'reserved'] as const;
type CapacityType = (typeof CAPACITY_TYPES)[number];

/**
 * The rule: a node of a NodePool, launched at this capacity type (on the node, or on its
 * NodeClaim until registration copies it over), is the watcher's to record.
 */
export const SCOPE = {
  nodePoolLabel: NODEPOOL_LABEL,
  capacityTypeLabel: CAPACITY_TYPE,
  capacityType: 'on-demand',
} as const satisfies {
  nodePoolLabel: string;
  capacityTypeLabel: string;
  capacityType: CapacityType;
};

type Scope = { inScope: false; reason: string } | { inScope: true; recorded: boolean };

/** The opt-out label's value that leaves a node without a record. */
export const OPTED_OUT = 'true';

/**
 * Karpenter nodes that run on-demand are ours to decide, unless whoever launched them opted them
 * out; a record, once written, is final. `atCreate`: the node is being created, so record keys it
 * carries were not written by the watcher (a NodePool's template labels, a kubelet's
 * --node-labels): they are no record, and the decision replaces them.
 */
export function scope(node: NodeView, nodeClaim: NodeClaimView | undefined, keys: RecordKeys, atCreate = false): Scope {
  if (node.labels[keys.optOut] === OPTED_OUT)
    return { inScope: false, reason: `opted out (${keys.optOut}: "${OPTED_OUT}")` };
  const labels = characteristics(node, nodeClaim);
  if (labels[SCOPE.nodePoolLabel] === undefined)
    return { inScope: false, reason: `not a Karpenter node (no ${SCOPE.nodePoolLabel} label)` };
  const capacityType = labels[SCOPE.capacityTypeLabel];
  if (capacityType !== SCOPE.capacityType) {
    return {
      inScope: false,
      reason: `capacity type is ${capacityType === undefined ? 'unknown' : JSON.stringify(capacityType)}, not ${SCOPE.capacityType}`,
    };
  }
  return { inScope: true, recorded: !atCreate && node.labels[keys.influenced] !== undefined };
}

/** In scope and not recorded yet: what the reconciler queues and nodes_pending counts. */
export function needsRecord(node: NodeView, nodeClaim: NodeClaimView | undefined, keys: RecordKeys): boolean {
  const s = scope(node, nodeClaim, keys);
  return s.inScope && !s.recorded;
}

/** What Karpenter's registration puts on the node: its own labels with the NodeClaim's on top. */
export function characteristics(node: NodeView, nodeClaim: NodeClaimView | undefined): Labels {
  return nodeClaim ? { ...node.labels, ...nodeClaim.labels } : node.labels;
}

/**
 * The nodes that may still need a record, as a label selector on the node alone. It cannot say
 * "capacity type absent or on-demand" (the NodeClaim may still bring it), so it excludes the
 * other capacity types instead: a node with one Karpenter does not know passes, and scope()
 * turns it away.
 */
export function undecidedSelector(keys: Pick<RecordKeys, 'influenced' | 'optOut'>): string {
  const others = CAPACITY_TYPES.filter((c) => c !== SCOPE.capacityType);
  return `${SCOPE.nodePoolLabel},${SCOPE.capacityTypeLabel} notin (${others.join(',')}),!${keys.influenced},${keys.optOut}!=${OPTED_OUT}`;
}

/** A webhook matchCondition, in the shape admissionregistration.k8s.io/v1 takes. */
export interface MatchCondition {
  name: string;
  expression: string;
}

const quoted = (s: string) => `'${s}'`;

/**
 * The nodes the mutating webhook is called for: what scope() would take on the node's own
 * labels, a capacity type not yet there counting as the one in scope (its NodeClaim, which
 * the apiserver cannot see, will bring it); at CREATE whatever record keys it carries, which the
 * decision replaces.
 */
export function mutatingMatchConditions(
  keys: Pick<RecordKeys, 'influenced' | 'optOut' | 'namespace' | 'decisionAnnotation'>,
): MatchCondition[] {
  const labels = 'object.metadata.labels';
  const capacityType = quoted(SCOPE.capacityTypeLabel);
  const optOut = quoted(keys.optOut);
  return [
    { name: 'karpenter-node', expression: `has(${labels}) && ${quoted(SCOPE.nodePoolLabel)} in ${labels}` },
    {
      name: SCOPE.capacityType,
      expression: `!(${capacityType} in ${labels}) || ${labels}[${capacityType}] == ${quoted(SCOPE.capacityType)}`,
    },
    {
      name: 'not-opted-out',
      expression: `!(${optOut} in ${labels}) || ${labels}[${optOut}] != ${quoted(OPTED_OUT)}`,
    },
    {
      // Or Karpenter's registration rewriting the record with the NodeClaim's labels.
      name: 'no-record-yet-or-rewritten',
      expression: `request.operation == 'CREATE' || !(${quoted(keys.influenced)} in ${labels}) || (${registrationRewritesRecordCel(keys)})`,
    },
  ];
}

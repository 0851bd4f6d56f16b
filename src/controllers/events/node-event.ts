// The events.k8s.io/v1 Event that tells a node's record in `kubectl describe node`.
import { createHash } from 'node:crypto';
import type { NodeView, RecordKeys } from '../../engine/index.ts';
import { microTime } from '../../kube/time.ts';

/** Where Kubernetes keeps Events about cluster-scoped objects (the kubelet's node Events too). */
export const EVENT_NAMESPACE = 'default';
const REPORTING_CONTROLLER = 'veneer.io/node-watcher';

/**
 * One name per node object: a second post, by another replica or after a restart, is refused
 * with 409 by the apiserver instead of making a second Event. The node's uid makes a node that
 * is deleted and created again under its name a new one.
 */
export function eventName(node: NodeView): string {
  const hash = createHash('sha256')
    .update(`${node.uid ?? ''}/${node.name}`)
    .digest('hex')
    .slice(0, 16);
  // 253 is the limit of a name; the prefix keeps it readable, as the kubelet's `<node>.<hex>` names are.
  const prefix = node.name.slice(0, 253 - 17).replace(/[^a-z0-9]+$/, '');
  return `${prefix}.${hash}`;
}

/** The record's story in one sentence, from the decision annotation (or the labels alone when it is missing). */
function note(node: NodeView, keys: RecordKeys): string {
  const story = node.told;
  const by = story ? `; recorded by the ${story.decidedBy} (basis ${story.basis})` : '';
  if (node.labels[keys.influenced] !== 'true') return `No active NodeOverlay matched this node at its launch${by}`;
  const overlay = story?.overlay ?? node.labels[keys.matchingOverlay] ?? 'unknown';
  const weight = story?.weight !== undefined ? `weight ${story.weight}, ` : '';
  const capacityType = node.labels[keys.copied['capacity-type']] ?? 'none';
  return `Launched under NodeOverlay ${overlay} (${weight}capacity type ${capacityType})${by}`.slice(0, 1024);
}

export function nodeEvent(node: NodeView, keys: RecordKeys, instance: string, now: number): Record<string, unknown> {
  const influenced = node.labels[keys.influenced] === 'true';
  return {
    apiVersion: 'events.k8s.io/v1',
    kind: 'Event',
    metadata: { name: eventName(node), namespace: EVENT_NAMESPACE },
    eventTime: microTime(now),
    reportingController: REPORTING_CONTROLLER,
    reportingInstance: instance.slice(0, 128),
    action: 'Record',
    reason: influenced ? 'OverlayInfluenced' : 'NoOverlayMatched',
    note: note(node, keys),
    type: 'Normal',
    regarding: { apiVersion: 'v1', kind: 'Node', name: node.name, ...(node.uid ? { uid: node.uid } : {}) },
  };
}

/**
 * The Event on a NodeOverlay when a node whose record names it was disrupted after it changed or
 * went: the churn an overlay's change or deletion set off, told where `kubectl describe
 * nodeoverlay` shows it. One per node (its name fixed by the node, like the record's Event).
 */
export function overlayChurnEvent(
  node: NodeView,
  overlay: { name: string; uid?: string | undefined },
  state: 'changed' | 'gone',
  reason: string,
  instance: string,
  now: number,
): Record<string, unknown> {
  const after = state === 'gone' ? 'was deleted' : 'changed (its price, weight, or whether it counts)';
  return {
    apiVersion: 'events.k8s.io/v1',
    kind: 'Event',
    metadata: { name: `churn.${eventName(node)}`.slice(0, 253), namespace: EVENT_NAMESPACE },
    eventTime: microTime(now),
    reportingController: REPORTING_CONTROLLER,
    reportingInstance: instance.slice(0, 128),
    action: 'Disrupted',
    reason: state === 'gone' ? 'NodeDisruptedAfterDeletion' : 'NodeDisruptedAfterChange',
    note: `Node ${node.name}, launched under this overlay, was disrupted by Karpenter (${reason}) after the overlay ${after}`.slice(
      0,
      1024,
    ),
    type: 'Normal',
    regarding: {
      apiVersion: 'karpenter.sh/v1alpha1',
      kind: 'NodeOverlay',
      name: overlay.name,
      ...(overlay.uid ? { uid: overlay.uid } : {}),
    },
    related: { apiVersion: 'v1', kind: 'Node', name: node.name, ...(node.uid ? { uid: node.uid } : {}) },
  };
}

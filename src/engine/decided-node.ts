// A node as a cache keeps it for as long as it exists, once nothing about it can be decided any
// more (its record is written, or it is out of scope): what the gauges, the counters, the Events
// and the churn read of it, and nothing else. A cluster of 100,000 nodes keeps 100,000 of these,
// so a node's metadata (~7 KB as served, its story ~1.5 KB) is not what it keeps: the record's
// labels and a few well-known ones, the values shared between nodes, and of the story who decided,
// on what basis and the overlay's terms, one shared object for every node told alike.
import { Interned } from './interned.ts';
import type { NodeObject, NodeView } from './node.ts';
import { NORMALIZED_LABELS } from './normalize.ts';
import { toEpochMs } from './overlay.ts';
import { readStory, type RecordKeys, type RecordTold } from './record.ts';
import type { Labels } from './requirements.ts';
import { CAPACITY_TYPE, INSTANCE_TYPE, NODEPOOL_LABEL, REGION, REGISTERED_LABEL, ZONE } from './well-known.ts';

/**
 * The well-known keys a decided node's readers ask for: its NodePool and capacity type (the
 * scope), its instance type (the list price of the dollars gauge), whether Karpenter registered it
 * (the reconciler), its zone and region (the prices' region). Their deprecated aliases are kept
 * too: labelValue() reads a key under either name.
 */
const WELL_KNOWN_KEPT = [NODEPOOL_LABEL, CAPACITY_TYPE, INSTANCE_TYPE, REGISTERED_LABEL, ZONE, REGION];

/** The labels a decided node keeps, in the order its labels object is built (one shape for all). */
export function decidedNodeLabelKeys(keys: RecordKeys): readonly string[] {
  const aliases = [...NORMALIZED_LABELS]
    .filter(([, stable]) => WELL_KNOWN_KEPT.includes(stable))
    .map(([alias]) => alias);
  return [...new Set([...keys.ownedLabels, keys.optOut, ...WELL_KNOWN_KEPT, ...aliases])];
}

/** Label values and stories as one shared object each: thousands of nodes carry the same instance types, zones, NodePools and overlays. */
const SHARED_VALUES = new Interned<string>(20_000);
const SHARED_TOLD = new Interned<RecordTold>(20_000);

/** What the cache keeps of a decision annotation, shared between the nodes it tells alike. */
export function toldOf(annotation: string | undefined): RecordTold | undefined {
  const story = readStory(annotation);
  if (story === undefined) return undefined;
  const told: RecordTold = {
    overlay: story.overlay,
    decidedBy: story.decidedBy,
    basis: story.basis,
    ...(story.weight !== undefined ? { weight: story.weight } : {}),
    ...(story.price !== undefined ? { price: story.price } : {}),
    ...(story.priceAdjustment !== undefined ? { priceAdjustment: story.priceAdjustment } : {}),
    ...(story.effect?.reasonCode !== undefined ? { effectReason: story.effect.reasonCode } : {}),
  };
  return SHARED_TOLD.of(JSON.stringify(told), () => Object.freeze(told));
}

/**
 * `kept`: decidedNodeLabelKeys(keys), computed once by the caller. The labeled-at timestamp is
 * the one value not shared: it is a node's own to the second.
 */
export function toDecidedNodeView(obj: NodeObject, keys: RecordKeys, kept: readonly string[]): NodeView {
  const md = obj.metadata ?? {};
  const all = md.labels ?? {};
  const labels: Record<string, string> = {};
  for (const key of kept) {
    const value = Object.hasOwn(all, key) ? all[key] : undefined;
    if (value !== undefined) labels[key] = key === keys.labeledAt ? value : SHARED_VALUES.of(value, () => value);
  }
  const owner = md.ownerReferences?.find((r) => r.kind === 'NodeClaim' && r.apiVersion?.startsWith('karpenter.sh/'));
  const createdAt = toEpochMs(md.creationTimestamp);
  const told = toldOf(md.annotations?.[keys.decisionAnnotation]);
  return {
    name: md.name ?? '',
    ...(md.uid ? { uid: md.uid } : {}),
    labels: labels as Labels,
    ...(createdAt !== undefined ? { createdAt } : {}),
    ...(owner?.name ? { ownerNodeClaim: owner.name } : {}),
    ...(told !== undefined ? { told } : {}),
  };
}

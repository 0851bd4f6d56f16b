// The mutating webhook: writes the record inline, from the caches, or allows without a patch.
// It never denies and never calls the API.
import {
  decide,
  decisionInput,
  jsonPatch,
  restoreAtRegistration,
  toNodeView,
  type EngineSettings,
  type LaunchKnowledge,
  type NodeClaimLookup,
  type NodeObject,
  type NodeView,
  type OverlayIndex,
} from '../engine/index.ts';
import { allow, type AdmissionResponse, type AdmissionReview, isNodeReview } from './review.ts';

type MutateOutcome =
  | 'patched'
  | 'recorded'
  | 'out_of_scope'
  | 'undetermined'
  | 'not_synced'
  | 'held'
  | 'restored'
  | 'deadline'
  | 'exists'
  | 'ignored'
  | 'error';

export interface MutateDeps {
  index: OverlayIndex;
  nodeClaims: NodeClaimLookup;
  /** A node already stored in the cluster (a kubelet re-registration's CREATE gets no patch). */
  existingNode(name: string): NodeView | undefined;
  ready(): boolean;
  /** Records are held (records_held says why): the node is allowed as it is. */
  held(): boolean;
  settings: EngineSettings;
  /** Prices and what else the effect's replay reads, from the caches. */
  launch?: LaunchKnowledge;
  now(): number;
}

interface MutateResult {
  answer: AdmissionResponse;
  outcome: MutateOutcome;
  detail?: string;
}

/** `deadlineAt` guards queueing delay: the decision itself is synchronous and takes microseconds. */
export function mutate(review: AdmissionReview, deps: MutateDeps, deadlineAt: number): MutateResult {
  const req = review.request;
  const uid = req.uid;
  if (!isNodeReview(req) || (req.operation !== 'CREATE' && req.operation !== 'UPDATE') || !req.object) {
    return { answer: allow(uid), outcome: 'ignored' };
  }
  if (!deps.ready()) return { answer: allow(uid), outcome: 'not_synced' };
  // Whatever holds new records, the watcher's own record is put back where Karpenter's
  // registration would rewrite it (engine/registration.ts).
  if (req.operation === 'UPDATE') {
    const before = (req.oldObject as NodeObject | null | undefined)?.metadata ?? {};
    const restore = restoreAtRegistration(before, (req.object as NodeObject).metadata ?? {}, deps.settings.keys);
    if (restore.length > 0) return { answer: allow(uid, restore), outcome: 'restored' };
  }
  if (deps.held()) return { answer: allow(uid), outcome: 'held' };
  if (deps.now() > deadlineAt) return { answer: allow(uid), outcome: 'deadline' };
  const object = req.object as NodeObject;
  const node = toNodeView(object);
  if (req.operation === 'CREATE' && deps.existingNode(node.name)) return { answer: allow(uid), outcome: 'exists' };
  const atCreate = req.operation === 'CREATE';
  const decision = decide({ ...decisionInput(node, deps, deps.now(), 'webhook'), atCreate }, deps.index, deps.settings);
  switch (decision.outcome) {
    case 'out-of-scope':
      return { answer: allow(uid), outcome: 'out_of_scope' };
    case 'recorded':
      return { answer: allow(uid), outcome: 'recorded' };
    case 'undetermined':
      return { answer: allow(uid), outcome: 'undetermined', detail: decision.reason };
  }
  if (deps.now() > deadlineAt) return { answer: allow(uid), outcome: 'deadline' };
  const patch = jsonPatch(decision.record, object.metadata ?? {}, deps.settings.keys);
  return { answer: allow(uid, patch), outcome: 'patched' };
}

// The validating webhook: a record, once written, is not altered or removed by anyone but
// the watcher itself (or identities the operator allowed). Adding a record is always allowed.
import type { RecordKeys } from '../engine/index.ts';
import { allow, type AdmissionResponse, type AdmissionReview, deny, isNodeReview } from './review.ts';

type ValidateOutcome = 'allowed' | 'denied' | 'ignored' | 'error';

export interface ValidateDeps {
  keys: RecordKeys;
  /** The watcher's own username, learned at start-up (SelfSubjectReview). */
  selfUsername(): string | undefined;
  allowedUsers: readonly string[];
  allowedGroups: readonly string[];
}

type Meta =
  | { metadata?: { labels?: Record<string, string> | null; annotations?: Record<string, string> | null } }
  | null
  | undefined;

function changes(field: 'labels' | 'annotations', owned: readonly string[], before: Meta, after: Meta): string[] {
  const old = before?.metadata?.[field] ?? {};
  const now = after?.metadata?.[field] ?? {};
  const found: string[] = [];
  for (const key of owned) {
    if (!(key in old)) continue;
    if (!(key in now))
      found.push(
        `${field === 'labels' ? 'label' : 'annotation'} ${key} removed (was ${JSON.stringify(truncate(old[key]))})`,
      );
    else if (now[key] !== old[key])
      found.push(
        `${field === 'labels' ? 'label' : 'annotation'} ${key} changed from ${JSON.stringify(truncate(old[key]))} to ${JSON.stringify(truncate(now[key]))}`,
      );
  }
  return found;
}

function truncate(v: string | undefined): string {
  return v === undefined ? '' : v.length > 80 ? `${v.slice(0, 77)}...` : v;
}

export function validate(
  review: AdmissionReview,
  deps: ValidateDeps,
): { answer: AdmissionResponse; outcome: ValidateOutcome } {
  const req = review.request;
  if (!isNodeReview(req) || req.operation !== 'UPDATE') return { answer: allow(req.uid), outcome: 'ignored' };
  const found = [
    ...changes('labels', deps.keys.ownedLabels, req.oldObject as Meta, req.object as Meta),
    ...changes('annotations', deps.keys.ownedAnnotations, req.oldObject as Meta, req.object as Meta),
  ];
  if (found.length === 0) return { answer: allow(req.uid), outcome: 'allowed' };
  const user = req.userInfo?.username ?? '';
  const groups = req.userInfo?.groups ?? [];
  if (
    (user !== '' && (user === deps.selfUsername() || deps.allowedUsers.includes(user))) ||
    groups.some((g) => deps.allowedGroups.includes(g))
  ) {
    return { answer: allow(req.uid), outcome: 'allowed' };
  }
  const message = `veneer-node-watcher: ${found.join('; ')}: the ${deps.keys.influenced.split('/')[0]} overlay record describes the node at provisioning time and is owned by veneer-node-watcher; it cannot be changed or removed (allowed identities are set in nodeWatcher.webhook.allowedUsers/allowedGroups)`;
  return { answer: deny(req.uid, message), outcome: 'denied' };
}

// Karpenter's registration copies the NodeClaim's labels and annotations onto the node (its
// lifecycle controller's syncNode: the node's labels with the NodeClaim's assigned over them, in
// the update that adds karpenter.sh/registered). A NodePool whose template carries record keys
// would so rewrite, at registration, the record the webhook wrote at the kubelet's CREATE. The
// webhook puts the record back in that very update; and the guard lets that update through
// whatever it carries, should the webhook be down or miss it: a node's registration is never
// refused for the sake of a record.
import { isValidLabelValue } from './labels.ts';
import { jsonPatch } from './patch.ts';
import { readStory, type NodeRecord, type RecordKeys } from './record.ts';
import { REGISTERED_LABEL } from './well-known.ts';

type Labels = Readonly<Record<string, string>> | null | undefined;

interface Metadata {
  labels?: Labels;
  annotations?: Labels;
}

const registered = (labels: Labels) => labels?.[REGISTERED_LABEL] === 'true';

/** Whether an UPDATE from `before` to `after` is Karpenter's registration of the node. */
export function isRegistration(before: Labels, after: Labels): boolean {
  return !registered(before) && registered(after);
}

/** The same, in CEL over `oldObject` and `object`, for the webhook's matchConditions and the guard. */
export const REGISTRATION_CEL = [
  `has(object.metadata.labels) && '${REGISTERED_LABEL}' in object.metadata.labels`,
  `object.metadata.labels['${REGISTERED_LABEL}'] == 'true'`,
  `!(has(oldObject.metadata.labels) && '${REGISTERED_LABEL}' in oldObject.metadata.labels && oldObject.metadata.labels['${REGISTERED_LABEL}'] == 'true')`,
].join(' && ');

/**
 * A registration that rewrites the record, in CEL: the webhook is called for it, and for no other
 * registration (each would wait on the webhook for nothing, and on its timeout were it hung).
 */
export function registrationRewritesRecordCel(
  keys: Pick<RecordKeys, 'namespace' | 'optOut' | 'decisionAnnotation'>,
): string {
  const owned = `k.startsWith('${keys.namespace}/') && k != '${keys.optOut}'`;
  const story = (node: string) =>
    `(has(${node}.metadata.annotations) && '${keys.decisionAnnotation}' in ${node}.metadata.annotations ? ${node}.metadata.annotations['${keys.decisionAnnotation}'] : '')`;
  return [
    `(${REGISTRATION_CEL}) && (`,
    `(has(oldObject.metadata.labels) && oldObject.metadata.labels.exists(k, ${owned} && (!(k in object.metadata.labels) || object.metadata.labels[k] != oldObject.metadata.labels[k])))`,
    ` || object.metadata.labels.exists(k, ${owned} && !(has(oldObject.metadata.labels) && k in oldObject.metadata.labels))`,
    ` || ${story('oldObject')} != ${story('object')})`,
  ].join('');
}

/** A record's keys of a node's metadata: its labels of the namespace (the opt-out aside) and its story. */
function recordOf(md: Metadata, keys: Pick<RecordKeys, 'namespace' | 'optOut' | 'decisionAnnotation'>): NodeRecord {
  const labels = Object.fromEntries(
    Object.entries(md.labels ?? {}).filter(([k]) => k.startsWith(`${keys.namespace}/`) && k !== keys.optOut),
  );
  const story = md.annotations?.[keys.decisionAnnotation];
  return { labels, annotations: story === undefined ? {} : { [keys.decisionAnnotation]: story } };
}

const same = (a: Record<string, string>, b: Record<string, string>) =>
  Object.keys(a).length === Object.keys(b).length && Object.entries(a).every(([k, v]) => b[k] === v);

/**
 * The JSON Patch that puts back the watcher's record a registration update rewrote: empty when
 * the node carried none of the watcher's before (no story it can read) or the update left it as it
 * was.
 */
export function restoreAtRegistration(
  before: Metadata,
  after: Metadata,
  keys: Pick<RecordKeys, 'namespace' | 'optOut' | 'decisionAnnotation'>,
): ReturnType<typeof jsonPatch> {
  if (
    !isRegistration(before.labels, after.labels) ||
    readStory(before.annotations?.[keys.decisionAnnotation]) === undefined
  )
    return [];
  const record = recordOf(before, keys);
  // What the node stored is valid; a value that is not (a made-up review) is never written back,
  // since the apiserver would refuse the whole update with it.
  if (!Object.values(record.labels).every(isValidLabelValue)) return [];
  const now = recordOf(after, keys);
  if (same(record.labels, now.labels) && same(record.annotations, now.annotations)) return [];
  return jsonPatch(record, after, keys);
}

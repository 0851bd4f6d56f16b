// Patches that write a record and nothing else.
import { escapeJsonPointer } from './labels.ts';
import type { NodeRecord, RecordKeys } from './record.ts';

type JsonPatchOp = { op: 'add' | 'replace'; path: string; value: unknown } | { op: 'remove'; path: string };

interface ExistingMetadata {
  labels?: Record<string, string> | null;
  annotations?: Record<string, string> | null;
}

/**
 * RFC 6902 operations for the admission response: the record's labels and story added, and
 * whatever of the watcher's label namespace (its opt-out aside) and story the node already
 * carried, which only someone else can have put there, replaced or removed. A map the object
 * lacks is created whole, since adding a key under a missing parent is an error.
 */
export function jsonPatch(
  record: NodeRecord,
  existing: ExistingMetadata,
  keys: Pick<RecordKeys, 'namespace' | 'optOut' | 'decisionAnnotation'>,
): JsonPatchOp[] {
  const ops: JsonPatchOp[] = [];
  const owned = {
    labels: (key: string) => key.startsWith(`${keys.namespace}/`) && key !== keys.optOut,
    annotations: (key: string) => key === keys.decisionAnnotation,
  };
  for (const field of ['labels', 'annotations'] as const) {
    const entries = record[field];
    const present = existing[field];
    if (!present) {
      ops.push({ op: 'add', path: `/metadata/${field}`, value: { ...entries } });
      continue;
    }
    const path = (key: string) => `/metadata/${field}/${escapeJsonPointer(key)}`;
    for (const key of Object.keys(present))
      if (owned[field](key) && !Object.hasOwn(entries, key)) ops.push({ op: 'remove', path: path(key) });
    for (const [key, value] of Object.entries(entries))
      ops.push({ op: Object.hasOwn(present, key) ? 'replace' : 'add', path: path(key), value });
  }
  return ops;
}

/**
 * RFC 7386 merge patch for the reconciler; the resourceVersion makes the apiserver refuse it
 * (409) if the node changed since the decision was made.
 */
export function mergePatch(record: NodeRecord, resourceVersion: string | undefined): object {
  return {
    metadata: {
      labels: record.labels,
      annotations: record.annotations,
      ...(resourceVersion ? { resourceVersion } : {}),
    },
  };
}

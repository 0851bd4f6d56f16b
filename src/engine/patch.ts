// Patches that write a record and nothing else.
import { escapeJsonPointer } from './labels.ts';
import type { NodeRecord } from './record.ts';

interface JsonPatchOp {
  op: 'add';
  path: string;
  value: unknown;
}

interface ExistingMetadata {
  labels?: Record<string, string> | null;
  annotations?: Record<string, string> | null;
}

/**
 * RFC 6902 `add` operations for the admission response. A map the object lacks is created
 * whole, since adding a key under a missing parent is an error.
 */
export function jsonPatch(record: NodeRecord, existing: ExistingMetadata): JsonPatchOp[] {
  const ops: JsonPatchOp[] = [];
  for (const field of ['labels', 'annotations'] as const) {
    const entries = record[field];
    if (!existing[field]) {
      ops.push({ op: 'add', path: `/metadata/${field}`, value: { ...entries } });
      continue;
    }
    for (const [key, value] of Object.entries(entries)) {
      ops.push({ op: 'add', path: `/metadata/${field}/${escapeJsonPointer(key)}`, value });
    }
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

// The AdmissionReview envelope (admission.k8s.io/v1): checked with ajv before anything reads
// it, and the responses we send back.
import { Ajv } from 'ajv';

interface AdmissionRequest {
  uid: string;
  kind: { group: string; version: string; kind: string };
  resource?: { group: string; version: string; resource: string };
  subResource?: string;
  name?: string;
  operation: string;
  userInfo?: { username?: string; groups?: string[] };
  object: Record<string, unknown> | null;
  oldObject?: Record<string, unknown> | null;
  dryRun?: boolean;
}

export interface AdmissionReview {
  apiVersion: 'admission.k8s.io/v1';
  kind: 'AdmissionReview';
  request: AdmissionRequest;
}

const metadataSchema = {
  type: 'object',
  properties: {
    name: { type: 'string' },
    labels: { type: ['object', 'null'], additionalProperties: { type: 'string' } },
    annotations: { type: ['object', 'null'], additionalProperties: { type: 'string' } },
    resourceVersion: { type: 'string' },
    creationTimestamp: { type: ['string', 'null'] },
    ownerReferences: { type: ['array', 'null'], items: { type: 'object' } },
  },
};

const objectSchema = {
  type: ['object', 'null'],
  properties: { metadata: metadataSchema, spec: { type: ['object', 'null'] } },
};

const reviewSchema = {
  type: 'object',
  required: ['apiVersion', 'kind', 'request'],
  properties: {
    apiVersion: { const: 'admission.k8s.io/v1' },
    kind: { const: 'AdmissionReview' },
    request: {
      type: 'object',
      required: ['uid', 'kind', 'operation', 'object'],
      properties: {
        uid: { type: 'string', minLength: 1, maxLength: 256 },
        kind: {
          type: 'object',
          required: ['group', 'version', 'kind'],
          properties: { group: { type: 'string' }, version: { type: 'string' }, kind: { type: 'string' } },
        },
        operation: { type: 'string' },
        name: { type: 'string' },
        dryRun: { type: 'boolean' },
        userInfo: {
          type: 'object',
          properties: { username: { type: 'string' }, groups: { type: 'array', items: { type: 'string' } } },
        },
        object: objectSchema,
        oldObject: objectSchema,
      },
    },
  },
};

const ajv = new Ajv({ allErrors: false, strict: false, coerceTypes: false, removeAdditional: false });
const check = ajv.compile<AdmissionReview>(reviewSchema);

/** The review, or a message saying what is wrong with it. */
export function parseReview(body: unknown): { review: AdmissionReview } | { error: string } {
  if (check(body)) return { review: body };
  const e = check.errors?.[0];
  const where = e?.instancePath ? e.instancePath.replace(/^\//, '').replace(/\//g, '.') : 'body';
  const what =
    e?.keyword === 'required'
      ? `must have ${String(e.params.missingProperty)}`
      : e?.keyword === 'const'
        ? `must be ${JSON.stringify(e.params.allowedValue)}`
        : (e?.message ?? 'is invalid');
  return { error: `not an admission.k8s.io/v1 AdmissionReview: ${where} ${what}` };
}

export interface AdmissionResponse {
  apiVersion: 'admission.k8s.io/v1';
  kind: 'AdmissionReview';
  response: {
    uid: string;
    allowed: boolean;
    patchType?: 'JSONPatch';
    patch?: string;
    status?: { code: number; reason: string; message: string };
    warnings?: string[];
  };
}

export function allow(uid: string, patch?: unknown[]): AdmissionResponse {
  return {
    apiVersion: 'admission.k8s.io/v1',
    kind: 'AdmissionReview',
    response:
      patch && patch.length > 0
        ? { uid, allowed: true, patchType: 'JSONPatch', patch: Buffer.from(JSON.stringify(patch)).toString('base64') }
        : { uid, allowed: true },
  };
}

export function isNodeReview(req: AdmissionRequest): boolean {
  return req.kind.group === '' && req.kind.kind === 'Node' && (req.subResource ?? '') === '';
}

// Kubernetes label rules and the encodings that keep every value we write valid.
import { createHash } from 'node:crypto';

const MAX_LABEL_VALUE_LENGTH = 63;
const LABEL_VALUE = /^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$/;
const DNS_SUBDOMAIN = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/;

export function isValidLabelValue(value: string): boolean {
  return value.length <= MAX_LABEL_VALUE_LENGTH && LABEL_VALUE.test(value);
}

export function isValidDnsSubdomain(value: string, maxLength = 253): boolean {
  return value.length > 0 && value.length <= maxLength && DNS_SUBDOMAIN.test(value);
}

const HASH_CHARS = 10;
const PREFIX_CHARS = MAX_LABEL_VALUE_LENGTH - HASH_CHARS - 1;

/**
 * Returns `value` when it already is a valid label value; otherwise a readable prefix plus a
 * hash of the whole input, so distinct inputs stay distinct (40 bits of SHA-256 on top of a
 * shared 52-character prefix) and the same input always maps to the same value.
 */
export function toLabelValue(value: string): string {
  if (isValidLabelValue(value)) return value;
  const hash = createHash('sha256').update(value).digest('hex').slice(0, HASH_CHARS);
  const prefix = value
    .replace(/[^A-Za-z0-9_.-]/g, '-')
    .slice(0, PREFIX_CHARS)
    .replace(/^[^A-Za-z0-9]+|[^A-Za-z0-9]+$/g, '');
  return prefix ? `${prefix}-${hash}` : hash;
}

/**
 * A record's timestamps (launch and decision, often in different seconds) come from a memo of
 * the last two seconds formatted: formatting was a measurable share of a decision. The memo is
 * a value cache, not state: same input, same output.
 */
interface Formatted {
  second: number;
  rfc3339: string;
  basic: string;
}
let recent: [Formatted, Formatted] = [
  { second: Number.NaN, rfc3339: '', basic: '' },
  { second: Number.NaN, rfc3339: '', basic: '' },
];

function formatted(epochMs: number): Formatted {
  const second = Math.floor(epochMs / 1000);
  if (recent[0].second === second) return recent[0];
  if (recent[1].second === second) return recent[1];
  const rfc3339 = new Date(second * 1000).toISOString().replace(/\.\d{3}Z$/, 'Z');
  const entry = { second, rfc3339, basic: rfc3339.replace(/[-:]/g, '') };
  recent = [entry, recent[0]];
  return entry;
}

/** ISO 8601 basic form (20260112T153000Z): a timestamp that is a valid label value. */
export function basicTimestamp(epochMs: number): string {
  return formatted(epochMs).basic;
}

export function rfc3339(epochMs: number): string {
  return formatted(epochMs).rfc3339;
}

/** RFC 6901: a map key as one JSON Pointer segment. */
export function escapeJsonPointer(segment: string): string {
  return segment.replace(/~/g, '~0').replace(/\//g, '~1');
}

/** The inverse of basicTimestamp: epoch ms, or undefined for a value that is not one. */
export function fromBasicTimestamp(value: string | undefined): number | undefined {
  const m = /^(\d{4})(\d{2})(\d{2})T(\d{2})(\d{2})(\d{2})Z$/.exec(value ?? '');
  if (!m) return undefined;
  const ms = Date.parse(`${m[1]}-${m[2]}-${m[3]}T${m[4]}:${m[5]}:${m[6]}Z`);
  return Number.isNaN(ms) ? undefined : ms;
}

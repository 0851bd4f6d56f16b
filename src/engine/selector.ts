// Kubernetes label selector strings (the `kubectl -l` grammar): `a=b`, `a==b`, `a!=b`,
// `a in (x,y)`, `a notin (x,y)`, `a`, `!a`, joined by commas.
import { isValidLabelValue } from './labels.ts';
import type { Labels } from './requirements.ts';

type Clause = { key: string; op: 'in' | 'notin'; values: Set<string> } | { key: string; op: 'exists' | 'doesnotexist' };

export interface LabelSelector {
  readonly source: string;
  matches(labels: Labels): boolean;
}

const KEY = '[A-Za-z0-9][-A-Za-z0-9_./]*';
const VALUE = '[A-Za-z0-9_.-]*';
const CLAUSE = new RegExp(
  String.raw`^\s*(?:(!)\s*(${KEY})|(${KEY})\s*(?:(==|=|!=)\s*(${VALUE})|\s(in|notin)\s*\(([^)]*)\))?)\s*$`,
);

function splitClauses(source: string): string[] {
  const parts: string[] = [];
  let depth = 0;
  let current = '';
  for (const ch of source) {
    if (ch === '(') depth++;
    if (ch === ')') depth--;
    if (ch === ',' && depth === 0) {
      parts.push(current);
      current = '';
    } else current += ch;
  }
  parts.push(current);
  return parts;
}

export function parseSelector(source: string): LabelSelector {
  const clauses: Clause[] = [];
  if (source.trim() !== '') {
    for (const part of splitClauses(source)) {
      const m = CLAUSE.exec(part);
      if (!m)
        throw new Error(
          `invalid label selector ${JSON.stringify(source)}: cannot parse ${JSON.stringify(part.trim())}`,
        );
      const [, bang, notKey, key, eqOp, eqValue, setOp, setValues] = m;
      if (bang && notKey) clauses.push({ key: notKey, op: 'doesnotexist' });
      else if (key && eqOp) clauses.push({ key, op: eqOp === '!=' ? 'notin' : 'in', values: new Set([eqValue ?? '']) });
      else if (key && setOp) {
        const values = (setValues ?? '').split(',').map((v) => v.trim());
        // As the apiserver: a set needs at least one value, each a valid label value.
        if (values.some((v) => v === '' || !isValidLabelValue(v))) {
          throw new Error(
            `invalid label selector ${JSON.stringify(source)}: bad value set in ${JSON.stringify(part.trim())}`,
          );
        }
        clauses.push({ key, op: setOp as 'in' | 'notin', values: new Set(values) });
      } else if (key) clauses.push({ key, op: 'exists' });
    }
  }
  return {
    source,
    matches(labels: Labels): boolean {
      return clauses.every((c) => {
        const value = labels[c.key];
        if (!('values' in c)) return (value !== undefined) === (c.op === 'exists');
        // in: present and listed; notin: absent, or present and not listed.
        if (value === undefined) return c.op === 'notin';
        return c.values.has(value) === (c.op === 'in');
      });
    },
  };
}

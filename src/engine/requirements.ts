// Karpenter's requirement algebra (sigs.k8s.io/karpenter v1.14.1, pkg/scheduling/requirement.go
// and requirements.go), which decides whether an overlay applies to an instance type:
// - a requirement is a value set or its complement, plus inclusive integer bounds
//   (Gt N is stored as >= N+1, Lt N as <= N-1);
// - requirements sharing a (normalized) key are intersected into one (`Requirements.Add`),
//   and only that combined requirement is judged, its operator read back from its shape;
// - a key the node lacks passes only a combined NotIn or DoesNotExist (`Compatible`);
// - a value that is not an integer fails every bound (`withinBounds`, strconv.Atoi).
import { labelValue, normalizedKey, normalizedValue } from './normalize.ts';

const OPERATORS = ['In', 'NotIn', 'Exists', 'DoesNotExist', 'Gt', 'Lt', 'Gte', 'Lte'] as const;
type Operator = (typeof OPERATORS)[number];
/** What a combined requirement reads as (`Requirement.Operator()`); bounds ride along. */
export type CombinedOperator = 'In' | 'NotIn' | 'Exists' | 'DoesNotExist';

export interface RequirementSpec {
  key: string;
  operator: string;
  values?: string[];
}

export interface Requirement {
  /** Normalized. */
  readonly key: string;
  /** True: every value but `values`. False: exactly `values`. */
  readonly complement: boolean;
  readonly values: ReadonlySet<string>;
  /** Inclusive bounds; absent when unbounded. */
  readonly gte?: bigint;
  readonly lte?: bigint;
  /** The requirements as written that were combined into this one. */
  readonly from: readonly RequirementSpec[];
  /** Set when a spec is malformed (the CRD admits none such): it never passes. */
  readonly invalid?: string;
}

export type Labels = Readonly<Record<string, string>>;

const INT64_MIN = -(2n ** 63n);
const INT64_MAX = 2n ** 63n - 1n;
const GO_ATOI = /^[+-]?\d+$/;

/** strconv.Atoi: a decimal int64 with an optional sign, anything else is not an integer. */
export function parseInteger(value: string): bigint | undefined {
  if (!GO_ATOI.test(value)) return undefined;
  const n = BigInt(value);
  return n < INT64_MIN || n > INT64_MAX ? undefined : n;
}

function isOperator(op: string): op is Operator {
  return (OPERATORS as readonly string[]).includes(op);
}

const doesNotExist = (key: string, from: readonly RequirementSpec[]): Requirement => ({
  key,
  complement: false,
  values: new Set(),
  from,
});

/** One requirement as written (`NewRequirementWithFlexibility`). */
function fromSpec(spec: RequirementSpec): Requirement {
  const key = normalizedKey(spec.key);
  const values = (spec.values ?? []).map((v) => normalizedValue(key, v));
  const from = [spec];
  const invalid = (reason: string): Requirement => ({ ...doesNotExist(key, from), invalid: reason });
  if (!isOperator(spec.operator)) return invalid(`unsupported operator ${JSON.stringify(spec.operator)}`);
  switch (spec.operator) {
    case 'In':
    case 'NotIn':
      if (values.length === 0) return invalid(`${spec.operator} needs at least one value`);
      return { key, complement: spec.operator === 'NotIn', values: new Set(values), from };
    case 'Exists':
      return { key, complement: true, values: new Set(), from };
    case 'DoesNotExist':
      return doesNotExist(key, from);
    default: {
      const bound = values.length === 1 ? parseInteger(values[0] ?? '') : undefined;
      if (bound === undefined || bound < 0n)
        return invalid(`${spec.operator} needs exactly one non-negative integer value`);
      const any = { key, complement: true, values: new Set<string>(), from };
      switch (spec.operator) {
        // Nothing is greater than the largest int: Karpenter makes that DoesNotExist.
        case 'Gt':
          return bound === INT64_MAX ? doesNotExist(key, from) : { ...any, gte: bound + 1n };
        case 'Lt':
          return { ...any, lte: bound - 1n };
        case 'Gte':
          return { ...any, gte: bound };
        default:
          return { ...any, lte: bound };
      }
    }
  }
}

function withinBounds(value: string, gte: bigint | undefined, lte: bigint | undefined): boolean {
  if (gte === undefined && lte === undefined) return true;
  const n = parseInteger(value);
  if (n === undefined) return false;
  return (gte === undefined || n >= gte) && (lte === undefined || n <= lte);
}

const maxBound = (a?: bigint, b?: bigint) => (a === undefined ? b : b === undefined ? a : a > b ? a : b);
const minBound = (a?: bigint, b?: bigint) => (a === undefined ? b : b === undefined ? a : a < b ? a : b);

/** `Requirement.Intersection`. */
function intersect(a: Requirement, b: Requirement): Requirement {
  const from = [...a.from, ...b.from];
  const invalid = a.invalid ?? b.invalid;
  const gte = maxBound(a.gte, b.gte);
  const lte = minBound(a.lte, b.lte);
  if (gte !== undefined && lte !== undefined && gte > lte) {
    return { ...doesNotExist(a.key, from), ...(invalid !== undefined ? { invalid } : {}) };
  }
  const complement = a.complement && b.complement;
  let values: Set<string>;
  if (a.complement && b.complement) values = new Set([...a.values, ...b.values]);
  else if (a.complement) values = new Set([...b.values].filter((v) => !a.values.has(v)));
  else if (b.complement) values = new Set([...a.values].filter((v) => !b.values.has(v)));
  else values = new Set([...a.values].filter((v) => b.values.has(v)));
  for (const v of values) if (!withinBounds(v, gte, lte)) values.delete(v);
  return {
    key: a.key,
    complement,
    values,
    from,
    // A concrete set has had its bounds applied to its values.
    ...(complement && gte !== undefined ? { gte } : {}),
    ...(complement && lte !== undefined ? { lte } : {}),
    ...(invalid !== undefined ? { invalid } : {}),
  };
}

/** An overlay's requirements as Karpenter holds them: one per normalized key (`Requirements.Add`). */
export function combineRequirements(specs: readonly RequirementSpec[]): Requirement[] {
  const byKey = new Map<string, Requirement>();
  for (const spec of specs) {
    const next = fromSpec(spec);
    const existing = byKey.get(next.key);
    byKey.set(next.key, existing ? intersect(existing, next) : next);
  }
  return [...byKey.values()];
}

/** `Requirement.Operator()`: an empty value set is DoesNotExist, an empty complement Exists. */
export function combinedOperator(req: Requirement): CombinedOperator {
  if (req.complement) return req.values.size > 0 ? 'NotIn' : 'Exists';
  return req.values.size > 0 ? 'In' : 'DoesNotExist';
}

/**
 * Whether a node whose (normalized) value for the key is `value`, or that lacks the key,
 * satisfies the requirement: `Requirements.Compatible` of the node's labels (each an
 * `In [value]`) with the overlay's. The exception in `Intersects` for NotIn/DoesNotExist on
 * both sides never applies to a present value, whose side is always In.
 */
export function requirementPasses(req: Requirement, value: string | undefined): boolean {
  if (req.invalid !== undefined) return false;
  if (value === undefined) {
    const op = combinedOperator(req);
    return op === 'NotIn' || op === 'DoesNotExist';
  }
  return req.values.has(value) !== req.complement && withinBounds(value, req.gte, req.lte);
}

export function allPass(reqs: readonly Requirement[], labels: Labels): boolean {
  for (const req of reqs) {
    if (!requirementPasses(req, labelValue(labels, req.key))) return false;
  }
  return true;
}

// Karpenter's requirement semantics (sigs.k8s.io/karpenter pkg/scheduling/requirement.go):
// a key missing from the node passes only NotIn and DoesNotExist; Gt N is stored as >= N+1 and
// Lt N as <= N-1; a value that is not an integer fails every numeric bound.

export const OPERATORS = ['In', 'NotIn', 'Exists', 'DoesNotExist', 'Gt', 'Lt', 'Gte', 'Lte'] as const;
export type Operator = (typeof OPERATORS)[number];

export interface RequirementSpec {
  key: string;
  operator: string;
  values?: string[];
}

export interface Requirement {
  readonly key: string;
  readonly operator: Operator;
  readonly values: ReadonlySet<string>;
  /** Inclusive bounds after Karpenter's canonicalisation; absent when unbounded. */
  readonly gte?: bigint;
  readonly lte?: bigint;
  /** Set when the spec itself is malformed: such a requirement never passes. */
  readonly invalid?: string;
}

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

export function compileRequirement(spec: RequirementSpec): Requirement {
  const key = spec.key;
  const values = spec.values ?? [];
  if (!isOperator(spec.operator)) {
    return { key, operator: 'In', values: new Set(), invalid: `unsupported operator ${JSON.stringify(spec.operator)}` };
  }
  const operator = spec.operator;
  const base = { key, operator, values: new Set(values) };
  switch (operator) {
    case 'In':
    case 'NotIn':
      return values.length > 0 ? base : { ...base, invalid: `${operator} needs at least one value` };
    case 'Exists':
    case 'DoesNotExist':
      return base;
    default: {
      const bound = values.length === 1 ? parseInteger(values[0] ?? '') : undefined;
      if (bound === undefined || bound < 0n) {
        return { ...base, invalid: `${operator} needs exactly one non-negative integer value` };
      }
      if (operator === 'Gt') return { ...base, gte: bound + 1n };
      if (operator === 'Lt') return { ...base, lte: bound - 1n };
      if (operator === 'Gte') return { ...base, gte: bound };
      return { ...base, lte: bound };
    }
  }
}

export function requirementPasses(req: Requirement, value: string | undefined): boolean {
  if (req.invalid !== undefined) return false;
  if (value === undefined) return req.operator === 'NotIn' || req.operator === 'DoesNotExist';
  switch (req.operator) {
    case 'In':
      return req.values.has(value);
    case 'NotIn':
      return !req.values.has(value);
    case 'Exists':
      return true;
    case 'DoesNotExist':
      return false;
    default: {
      const n = parseInteger(value);
      if (n === undefined) return false;
      if (req.gte !== undefined && n < req.gte) return false;
      if (req.lte !== undefined && n > req.lte) return false;
      return true;
    }
  }
}

export type Labels = Readonly<Record<string, string>>;

export function allPass(reqs: readonly Requirement[], labels: Labels): boolean {
  for (const req of reqs) {
    if (!requirementPasses(req, labels[req.key])) return false;
  }
  return true;
}

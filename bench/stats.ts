export interface SuiteResult {
  /** The flat keys of bench/results.json. */
  keys: Record<string, number>;
  targets: Record<string, string>;
  table: Record<string, number | string>[];
  raw: Record<string, unknown>;
}

export function median(xs: readonly number[]): number {
  return quantile(xs, 0.5);
}

export function quantile(xs: readonly number[], q: number): number {
  if (xs.length === 0) return Number.NaN;
  const sorted = [...xs].sort((a, b) => a - b);
  const pos = (sorted.length - 1) * q;
  const lo = Math.floor(pos);
  const hi = Math.ceil(pos);
  return (sorted[lo] ?? 0) + ((sorted[hi] ?? 0) - (sorted[lo] ?? 0)) * (pos - lo);
}

/** One suite's result made of several runs' figures. */
export function mergeSuites(...parts: SuiteResult[]): SuiteResult {
  return {
    keys: Object.assign({}, ...parts.map((p) => p.keys)) as Record<string, number>,
    targets: Object.assign({}, ...parts.map((p) => p.targets)) as Record<string, string>,
    table: parts.flatMap((p) => p.table),
    raw: Object.assign({}, ...parts.map((p) => p.raw)) as Record<string, unknown>,
  };
}

// Loads the configuration: defaults < YAML file < VENEER_NODE_WATCHER_* variables < flags,
// validated by one ajv schema built from SETTINGS. Every error names the field, where the
// value came from, the value and the rule; all errors are reported at once.
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import type { Node as YamlNode } from 'yaml';
import { parseDuration } from './duration.ts';
import { envName, flagName, SETTINGS, type SettingPath, type SettingSchema } from './schema.ts';
import { configErrors, FORMAT_RULES } from './validator.ts';
import { type Effective, leaderElectionProblems, portProblems } from './cross-field.ts';

export type Source =
  | { kind: 'default' }
  | { kind: 'file'; file: string; line: number }
  | { kind: 'env'; name: string }
  | { kind: 'flag'; name: string };

export interface Config {
  enabled: boolean;
  mode: 'record' | 'observe';
  holdWhileNoOverlaySelected: boolean;
  labelNamespace: string;
  overlayCacheTTLMs: number;
  maxConcurrentReconciles: number;
  overlaySelector: string;
  requireOverlayReady: boolean;
  karpenterProvider: string;
  karpenterVMMemoryOverheadPercent: string;
  karpenterReservedENIs: number;
  instanceTypeKeys: string[];
  gracePeriodMs: number;
  historyRetentionMs: number;
  shutdownDelayMs: number;
  logLevel: string;
  webhook: {
    port: number;
    certFile: string;
    keyFile: string;
    deadlineMs: number;
  };
  metrics: { port: number; secure: boolean; authCacheTTLMs: number; maxOverlaySeries: number };
  events: { enabled: boolean; ratePerSecond: number };
  health: { port: number };
  leaderElection: {
    enabled: boolean;
    leaseName: string;
    leaseNamespace: string;
    leaseDurationMs: number;
    renewDeadlineMs: number;
    retryPeriodMs: number;
  };
  prices: { source: string; region: string; refreshIntervalMs: number; timeoutMs: number };
}

export interface LoadedConfig {
  config: Config;
  /** Where each effective value came from, for check-config. */
  sources: Record<SettingPath, Source>;
  values: Record<SettingPath, unknown>;
  /**
   * Keys the file holds that this version does not know, ignored: a config written for another
   * version (a rollout mixes both, and a pod of either may restart on the other's file).
   */
  warnings: string[];
}

export class ConfigError extends Error {
  readonly problems: string[];
  constructor(problems: string[]) {
    super(`invalid configuration:\n${problems.map((p) => `  - ${p}`).join('\n')}`);
    this.problems = problems;
  }
}

export interface LoadInput {
  file?: string | undefined;
  env?: Record<string, string | undefined>;
  /** Flags as `--name` -> raw value, already split from argv. */
  flags?: Record<string, string>;
}

const paths = Object.keys(SETTINGS) as SettingPath[];

function describeSource(s: Source): string {
  switch (s.kind) {
    case 'default':
      return 'default';
    case 'file':
      return `${s.file} line ${s.line}`;
    case 'env':
      return `environment variable ${s.name}`;
    case 'flag':
      return `flag ${s.name}`;
  }
}

/** A raw string from the environment or a flag, as the type the schema wants. */
function coerce(schema: SettingSchema, raw: string): unknown {
  switch (schema.type) {
    case 'boolean':
      return raw === 'true' ? true : raw === 'false' ? false : raw;
    case 'integer':
      return /^-?\d+$/.test(raw.trim()) ? Number(raw.trim()) : raw;
    case 'string-list':
      return raw
        .split(',')
        .map((s) => s.trim())
        .filter(Boolean);
    default:
      return raw;
  }
}

interface FileValues {
  values: Map<string, { value: unknown; line: number }>;
  problems: string[];
}

function readFile(file: string): FileValues {
  const out: FileValues = { values: new Map(), problems: [] };
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (err) {
    out.problems.push(`config file ${file}: cannot be read (${(err as Error).message})`);
    return out;
  }
  // yaml (about 25 ms to load) only when there is a file: explain and report usually have none.
  const { LineCounter, parseDocument, isMap, isScalar } = createRequire(import.meta.url)(
    'yaml',
  ) as typeof import('yaml');
  const lineCounter = new LineCounter();
  const doc = parseDocument(text, { lineCounter });
  if (doc.errors.length > 0) {
    for (const e of doc.errors) out.problems.push(`config file ${file}: ${e.message.split('\n')[0]}`);
    return out;
  }
  const lineOf = (n: YamlNode | null | undefined) => (n?.range ? lineCounter.linePos(n.range[0]).line : 0);
  const walk = (node: unknown, prefix: string) => {
    if (!isMap(node)) return;
    for (const pair of node.items) {
      const key = isScalar(pair.key) ? String(pair.key.value) : String(pair.key);
      const path = prefix ? `${prefix}.${key}` : key;
      if (isMap(pair.value)) walk(pair.value, path);
      else
        out.values.set(path, {
          value: (pair.value as YamlNode | null)?.toJSON?.() ?? (isScalar(pair.value) ? pair.value.value : null),
          line: lineOf(pair.value as YamlNode) || lineOf(pair.key as YamlNode),
        });
    }
  };
  walk(doc.contents, '');
  return out;
}

/** The configuration as given, before validation: nested objects of any shape. */
interface Tree {
  [key: string]: unknown;
}

/** A tree whose keys are only what was given: `__proto__` or `constructor` in a file is a key like any other. */
const tree = (): Tree => Object.create(null) as Tree;

/**
 * Sets `path` in the tree; where a section on the way was given as something else (a number, a
 * list), leaves it so: validation then says that section must be a map.
 */
function setPath(obj: Tree, path: string, value: unknown): void {
  const parts = path.split('.');
  let node = obj;
  for (const part of parts.slice(0, -1)) {
    node[part] ??= tree();
    const next = node[part];
    if (next === null || typeof next !== 'object' || Array.isArray(next)) return;
    node = next as Tree;
  }
  node[parts.at(-1)!] = value;
}

/** The value at a dotted path, or undefined where the path leaves the tree. */
function valueAt(doc: Tree, path: string): unknown {
  let node: unknown = doc;
  for (const part of path.split('.'))
    node = node !== null && typeof node === 'object' ? (node as Tree)[part] : undefined;
  return node;
}

export function loadConfig(input: LoadInput): LoadedConfig {
  const problems: string[] = [];
  const doc = tree();
  const sources = {} as Record<SettingPath, Source>;
  const values = {} as Record<SettingPath, unknown>;
  const origin = new Map<string, Source>();
  const warnings: string[] = [];

  if (input.file) {
    const f = readFile(input.file);
    problems.push(...f.problems);
    for (const [path, { value, line }] of f.values) {
      setPath(doc, path, value);
      origin.set(path, { kind: 'file', file: input.file, line });
    }
  }
  const knownFlags = new Set(paths.map(flagName));
  for (const name of Object.keys(input.flags ?? {})) {
    if (!knownFlags.has(name)) problems.push(`unknown flag ${name}`);
  }
  for (const path of paths) {
    const schema: SettingSchema = SETTINGS[path];
    const full = `nodeWatcher.${path}`;
    const env = input.env?.[envName(path)];
    const flag = input.flags?.[flagName(path)];
    if (flag !== undefined) {
      setPath(doc, full, coerce(schema, flag));
      origin.set(full, { kind: 'flag', name: flagName(path) });
    } else if (env !== undefined && env !== '') {
      setPath(doc, full, coerce(schema, env));
      origin.set(full, { kind: 'env', name: envName(path) });
    }
  }

  // Nothing given (no file, variable or flag) leaves the document empty, which the schema always
  // accepts (the defaults fill in after it): compiling it then would only cost the start-up time.
  if (origin.size > 0) {
    for (const e of configErrors(doc)) {
      const pointer = e.instancePath.slice(1).replace(/\//g, '.');
      const path =
        e.keyword === 'additionalProperties'
          ? `${pointer ? `${pointer}.` : ''}${String(e.params.additionalProperty)}`
          : pointer;
      const source = origin.get(path) ??
        [...origin.entries()].find(([p]) => p.startsWith(`${path}.`))?.[1] ?? { kind: 'default' };
      if (e.keyword === 'additionalProperties') {
        warnings.push(`${path} (from ${describeSource(source)}) is not a setting of this version: ignored`);
        continue;
      }
      const value = ` = ${JSON.stringify(valueAt(doc, path))}`;
      const rule =
        e.keyword === 'format'
          ? (FORMAT_RULES[String(e.params.format)] ?? e.message)
          : e.keyword === 'enum'
            ? `must be one of ${(e.params.allowedValues as unknown[]).join(', ')}`
            : (e.message ?? e.keyword);
      problems.push(`${path || '(top level)'}${value} (from ${describeSource(source)}): ${rule}`);
    }
  }
  if (problems.length === 0) {
    const get = effective(doc, origin);
    problems.push(...leaderElectionProblems(get), ...portProblems(get));
  }
  if (problems.length > 0) throw new ConfigError(problems);

  for (const path of paths) {
    const full = `nodeWatcher.${path}`;
    const given = valueAt(doc, full);
    values[path] = given ?? SETTINGS[path].default;
    sources[path] = origin.get(full) ?? { kind: 'default' };
  }
  return { config: toConfig(values), sources, values, warnings: warnings.sort() };
}

function effective(doc: Tree, origin: Map<string, Source>): Effective {
  return (p) => ({
    value: valueAt(doc, `nodeWatcher.${p}`) ?? SETTINGS[p].default,
    from: describeSource(origin.get(`nodeWatcher.${p}`) ?? { kind: 'default' }),
  });
}

function toConfig(v: Record<SettingPath, unknown>): Config {
  const ms = (p: SettingPath) => parseDuration(String(v[p])) ?? 0;
  return {
    enabled: v.enabled as boolean,
    mode: v.mode as Config['mode'],
    holdWhileNoOverlaySelected: v.holdWhileNoOverlaySelected as boolean,
    labelNamespace: v.labelNamespace as string,
    overlayCacheTTLMs: ms('overlayCacheTTL'),
    maxConcurrentReconciles: v.maxConcurrentReconciles as number,
    overlaySelector: v.overlaySelector as string,
    requireOverlayReady: v.requireOverlayReady as boolean,
    karpenterProvider: v.karpenterProvider as string,
    karpenterVMMemoryOverheadPercent: v.karpenterVMMemoryOverheadPercent as string,
    karpenterReservedENIs: v.karpenterReservedENIs as number,
    instanceTypeKeys: v.instanceTypeKeys as string[],
    gracePeriodMs: ms('gracePeriod'),
    historyRetentionMs: ms('historyRetention'),
    shutdownDelayMs: ms('shutdownDelay'),
    logLevel: v.logLevel as string,
    webhook: {
      port: v['webhook.port'] as number,
      certFile: v['webhook.certFile'] as string,
      keyFile: v['webhook.keyFile'] as string,
      deadlineMs: ms('webhook.deadline'),
    },
    metrics: {
      port: v['metrics.port'] as number,
      secure: v['metrics.secure'] as boolean,
      authCacheTTLMs: ms('metrics.authCacheTTL'),
      maxOverlaySeries: v['metrics.maxOverlaySeries'] as number,
    },
    events: { enabled: v['events.enabled'] as boolean, ratePerSecond: v['events.ratePerSecond'] as number },
    health: { port: v['health.port'] as number },
    leaderElection: {
      enabled: v['leaderElection.enabled'] as boolean,
      leaseName: v['leaderElection.leaseName'] as string,
      leaseNamespace: v['leaderElection.leaseNamespace'] as string,
      leaseDurationMs: ms('leaderElection.leaseDuration'),
      renewDeadlineMs: ms('leaderElection.renewDeadline'),
      retryPeriodMs: ms('leaderElection.retryPeriod'),
    },
    prices: {
      source: v['prices.source'] as string,
      region: v['prices.region'] as string,
      refreshIntervalMs: ms('prices.refreshInterval'),
      timeoutMs: ms('prices.timeout'),
    },
  };
}

export { describeSource };

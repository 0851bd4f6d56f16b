// The one JSON schema of the config file, built from SETTINGS, and the ajv validator that
// checks it: formats for DNS subdomains and label selectors, and a keyword for bounded
// durations, so that each error can name the rule in words.
import { createRequire } from 'node:module';
import type { ErrorObject, ValidateFunction } from 'ajv';
import { isValidDnsSubdomain, parseSelector } from '../engine/index.ts';
import { formatDuration, parseDuration } from './duration.ts';
import { SETTINGS, type SettingPath, type SettingSchema } from './schema.ts';

const paths = Object.keys(SETTINGS) as SettingPath[];

function jsonSchemaFor(s: SettingSchema): object {
  switch (s.type) {
    case 'boolean':
      return { type: 'boolean' };
    case 'integer':
      return { type: 'integer', minimum: s.minimum, maximum: s.maximum };
    case 'string-list':
      return { type: 'array', items: { type: 'string', minLength: 1 } };
    case 'duration':
      return {
        type: 'string',
        durationMs: { minimum: s.minimumMs ?? 0, maximum: s.maximumMs ?? Number.MAX_SAFE_INTEGER },
      };
    case 'string':
      return {
        type: 'string',
        minLength: 1,
        ...(s.maxLength ? { maxLength: s.maxLength } : {}),
        ...(s.enum ? { enum: s.enum } : {}),
        ...(s.format ? { format: s.format } : {}),
        ...(s.pattern ? { pattern: s.pattern } : {}),
      };
  }
}

/** An object level of the schema, its settings or groups below it. */
interface JsonObjectSchema {
  type: 'object';
  additionalProperties: false;
  properties: Record<string, JsonObjectSchema | object>;
}

/** The ajv schema of the whole file: `nodeWatcher:` with nested groups, no unknown fields. */
function configJsonSchema(): object {
  const root: JsonObjectSchema = { type: 'object', additionalProperties: false, properties: {} };
  for (const path of paths) {
    const parts = path.split('.');
    let node = root;
    for (const part of parts.slice(0, -1)) {
      node.properties[part] ??= { type: 'object', additionalProperties: false, properties: {} };
      // A group: the paths never make a setting and a group of one name.
      node = node.properties[part] as JsonObjectSchema;
    }
    node.properties[parts.at(-1)!] = jsonSchemaFor(SETTINGS[path]);
  }
  return { type: 'object', additionalProperties: false, properties: { nodeWatcher: root } };
}

export const FORMAT_RULES: Record<string, string> = {
  'dns-subdomain':
    'must be a DNS subdomain (lowercase letters, digits, "-" and "."; starting and ending with a letter or digit)',
  'label-selector': 'must be a label selector such as "app.kubernetes.io/managed-by=veneer" or "tier in (a,b)"',
};

/**
 * The validator, made on first use with ajv loaded then (required: loading and compiling take
 * about 45 ms, a tenth of an offline explain of 200 nodes, and a configuration with nothing set,
 * explain's and report's usual case, never needs them).
 */
function compile(): ValidateFunction {
  const { Ajv } = createRequire(import.meta.url)('ajv') as typeof import('ajv');
  const ajv = new Ajv({ allErrors: true, strict: true, coerceTypes: false, useDefaults: false });
  ajv.addFormat('dns-subdomain', { type: 'string', validate: (v: string) => isValidDnsSubdomain(v) });
  ajv.addFormat('label-selector', {
    type: 'string',
    validate: (v: string) => {
      try {
        parseSelector(v);
        return true;
      } catch {
        return false;
      }
    },
  });
  ajv.addKeyword({
    keyword: 'durationMs',
    type: 'string',
    errors: true,
    validate: function durationMs(bounds: { minimum: number; maximum: number }, value: string) {
      const ms = parseDuration(value);
      const self = durationMs as unknown as { errors: Partial<ErrorObject>[] };
      if (ms === undefined) {
        self.errors = [
          { keyword: 'durationMs', message: 'must be a duration such as 500ms, 60s, 5m or 1h', params: {} },
        ];
        return false;
      }
      if (ms < bounds.minimum || ms > bounds.maximum) {
        self.errors = [
          {
            keyword: 'durationMs',
            message: `must be between ${formatDuration(bounds.minimum)} and ${formatDuration(bounds.maximum)}`,
            params: {},
          },
        ];
        return false;
      }
      return true;
    },
  });
  return ajv.compile(configJsonSchema());
}

let compiled: ValidateFunction | undefined;

/** The schema's errors in `doc`, none when it is valid. */
export function configErrors(doc: unknown): ErrorObject[] {
  compiled ??= compile();
  return compiled(doc) ? [] : (compiled.errors ?? []);
}

// `veneer-node-watcher check-config`: the configuration is valid (loading it said so, or stopped
// with the field, the value and the rule), and each value with where it came from.
import { describeSource, type LoadedConfig } from '../config/load.ts';
import { SETTINGS, type SettingPath } from '../config/schema.ts';

export function checkConfig(loaded: LoadedConfig): string {
  const rows = (Object.keys(SETTINGS) as SettingPath[]).map((p) => [
    `nodeWatcher.${p}`,
    JSON.stringify(loaded.values[p]),
    describeSource(loaded.sources[p]),
  ]);
  const width = [0, 1].map((c) => Math.max(...rows.map((r) => (r[c] ?? '').length)));
  const lines = ['configuration is valid', ...loaded.warnings.map((w) => `warning: ${w}`)];
  for (const [name, value, source] of rows)
    lines.push(`${(name ?? '').padEnd(width[0] ?? 0)}  ${(value ?? '').padEnd(width[1] ?? 0)}  ${source}`);
  return lines.join('\n');
}

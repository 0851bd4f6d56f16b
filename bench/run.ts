// `npm run bench [-- suite ...]`: runs the suites, prints a table, and writes
// bench/results.json (flat keys + raw figures + machine) and bench/results.md.
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { cpus, totalmem } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { runAdmissionSuite } from './admission.ts';
import { runClusterSuite } from './cluster.ts';
import { runDecisionSuite } from './decision.ts';
import type { SuiteResult } from './stats.ts';

const suites: Record<string, (progress: (msg: string) => void) => Promise<SuiteResult>> = {
  decision: runDecisionSuite,
  cluster: runClusterSuite,
  admission: runAdmissionSuite,
};

const here = dirname(fileURLToPath(import.meta.url));
const requested = process.argv.slice(2);
for (const name of requested) {
  if (!(name in suites)) {
    console.error(`unknown suite ${JSON.stringify(name)}; suites: ${Object.keys(suites).join(', ')}`);
    process.exit(2);
  }
}
const selected = requested.length > 0 ? requested : Object.keys(suites);
const progress = (msg: string) => console.error(`[bench ${new Date().toISOString().slice(11, 19)}] ${msg}`);

const resultsPath = join(here, 'results.json');
// Suites run one at a time keep the figures of the others from the previous full run.
const previous = existsSync(resultsPath) ? (JSON.parse(readFileSync(resultsPath, 'utf8')) as { suites?: Record<string, SuiteResult> }) : {};
const results: Record<string, SuiteResult> = { ...previous.suites };
for (const name of selected) {
  progress(`suite ${name}`);
  const r = await suites[name]!(progress);
  results[name] = r;
  console.log(`\n## ${name}`);
  console.table(r.table);
  for (const [k, v] of Object.entries(r.keys)) console.log(`${k} = ${v} (target ${r.targets[k] ?? 'reported'})`);
}

const flat = Object.assign({}, ...Object.values(results).map((r) => r.keys)) as Record<string, number>;
const machine = { node: process.version, cpus: cpus().length, cpu_model: cpus()[0]?.model ?? 'unknown', memory_gb: Math.round(totalmem() / 2 ** 30), date: new Date().toISOString() };
writeFileSync(resultsPath, JSON.stringify({ ...flat, machine, suites: results }, null, 2) + '\n');

const md = [
  '# Benchmark results',
  '',
  `Machine: ${machine.cpus} x ${machine.cpu_model}, ${machine.memory_gb} GB, Node ${machine.node}; ${machine.date}.`,
  'Regenerate with `npm run bench` (or `npm run bench -- <suite>`).',
  '',
  '| key | value | target |',
  '|---|---|---|',
  ...Object.values(results).flatMap((r) => Object.entries(r.keys).map(([k, v]) => `| \`${k}\` | ${v} | ${r.targets[k] ?? 'reported'} |`)),
  '',
  ...Object.entries(results).flatMap(([name, r]) => {
    const cols = Object.keys(r.table[0] ?? {});
    return [`## ${name}`, '', `| ${cols.join(' | ')} |`, `|${cols.map(() => '---').join('|')}|`, ...r.table.map((row) => `| ${cols.map((c) => row[c]).join(' | ')} |`), ''];
  }),
];
writeFileSync(join(here, 'results.md'), md.join('\n'));
progress(`wrote ${resultsPath} and results.md`);

// `npm run bench [-- suite ...]`: runs the suites, prints a table, and writes
// bench/results.json (flat keys + raw figures + machine) and bench/results.md.
// `npm run bench -- --ab <rev> [--rounds N] suite ...`: an A/B of this tree against <rev> in one
// run (bench/ab.ts); written under `ab` beside the suites, whose figures it leaves as they were.
import { execFileSync } from 'node:child_process';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { cpus, totalmem } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { runNodeCreateSuite, runWebhookServerSuite } from './admission.ts';
import { runAwsSuite } from './aws.ts';
import { runClusterSuite } from './cluster.ts';
import { compareEvents } from './events.ts';
import { runDecisionSuite } from './decision.ts';
import { runKarpenterSuite } from './karpenter.ts';
import { runReportSuite } from './report.ts';
import { runScaleSuite } from './scale.ts';
import { runScale100kSuite } from './scale-100k.ts';
import { mergeSuites, type SuiteResult } from './stats.ts';
import { cdfSvg } from './plot.ts';
import { AB_SUITES, type AbSuite, abSection, runAb } from './ab.ts';

const suites: Record<string, (progress: (msg: string) => void) => Promise<SuiteResult>> = {
  decision: runDecisionSuite,
  'node-create': runNodeCreateSuite,
  'webhook-server': runWebhookServerSuite,
  // What the node Events add is measured with the rest of the cluster figures.
  cluster: async (progress) => mergeSuites(await runClusterSuite(progress), await compareEvents(progress)),
  scale: runScaleSuite,
  // Only when named: an hour or more, and most of this machine's memory.
  'scale-100k': runScale100kSuite,
  report: runReportSuite,
  // Real Karpenter (KWOK provider) launching nodes for bursts of pending pods, the watcher beside it.
  karpenter: runKarpenterSuite,
  // Real Karpenter with its AWS provider launching instances in a local EC2 (moto), inside a
  // network namespace with only loopback.
  aws: runAwsSuite,
};
/** The names for figures that come out of a shared run. */
const aliases: Record<string, string[]> = {
  'webhook-share': ['node-create'],
  reconciler: ['cluster'],
  'api-calls': ['cluster'],
  memory: ['cluster'],
  events: ['cluster'],
  admission: ['node-create', 'webhook-server'],
};

const here = dirname(fileURLToPath(import.meta.url));
const args = process.argv.slice(2);
const option = (name: string): string | undefined => {
  const i = args.indexOf(name);
  return i === -1 ? undefined : args.splice(i, 2)[1];
};
const abRev = option('--ab');
const abRounds = Number(option('--rounds') ?? 3);
const requested = args;
if (abRev !== undefined) {
  const wrong = requested.filter((n) => !(AB_SUITES as readonly string[]).includes(n));
  if (requested.length === 0 || wrong.length > 0 || !(abRounds >= 1)) {
    console.error(`--ab <rev> [--rounds N] takes one or more of: ${AB_SUITES.join(', ')}`);
    process.exit(2);
  }
}
for (const name of abRev === undefined ? requested : []) {
  if (!(name in suites) && !(name in aliases)) {
    console.error(
      `unknown suite ${JSON.stringify(name)}; suites: ${[...Object.keys(suites), ...Object.keys(aliases)].join(', ')}`,
    );
    process.exit(2);
  }
}
const ON_REQUEST = ['scale-100k'];
const selected =
  requested.length > 0
    ? [...new Set(requested.flatMap((n) => aliases[n] ?? [n]))]
    : Object.keys(suites).filter((n) => !ON_REQUEST.includes(n));
const progress = (msg: string) => console.error(`[bench ${new Date().toISOString().slice(11, 19)}] ${msg}`);

const resultsPath = join(here, 'results.json');
// Suites run one at a time keep the figures of the others from the previous full run.
const previous = existsSync(resultsPath)
  ? (JSON.parse(readFileSync(resultsPath, 'utf8')) as {
      suites?: Record<string, SuiteResult>;
      ab?: Record<string, SuiteResult>;
      machine?: Record<string, string | number>;
    })
  : {};
// The last A/B of each suite, kept across runs like the suites' figures.
const abResults: Record<string, SuiteResult> = { ...previous.ab };
const results: Record<string, SuiteResult> = Object.fromEntries(
  Object.entries(previous.suites ?? {}).filter(([name]) => name in suites),
);
// Every suite measures what the image runs: the compiled CLI (kit/fleet.ts, COMPILED_CLI).
progress('npm run build');
execFileSync('npm', ['run', '-s', 'build'], { cwd: join(here, '..'), stdio: 'inherit' });
if (abRev !== undefined) {
  const section = abSection(await runAb(abRev, requested as AbSuite[], abRounds, progress));
  abResults[requested.join(' ')] = section;
  console.table(section.table);
  for (const n of (section.raw as { notes: string[] }).notes) console.log(`note: ${n}`);
}
for (const name of abRev === undefined ? selected : []) {
  progress(`suite ${name}`);
  const r = await suites[name]!(progress);
  results[name] = r;
  console.log(`\n## ${name}`);
  console.table(r.table);
  for (const [k, v] of Object.entries(r.keys)) console.log(`${k} = ${v} (target ${r.targets[k] ?? 'reported'})`);
  for (const n of (r.raw as { notes?: string[] }).notes ?? []) console.log(`note: ${n}`);
}

const flat = Object.assign({}, ...Object.values(results).map((r) => r.keys)) as Record<string, number>;
// An A/B alone leaves the suites' figures, and so the machine and date they were measured on.
const machine = (abRev !== undefined ? previous.machine : undefined) ?? {
  node: process.version,
  cpus: cpus().length,
  cpu_model: cpus()[0]?.model ?? 'unknown',
  memory_gb: Math.round(totalmem() / 2 ** 30),
  date: new Date().toISOString(),
};
writeFileSync(resultsPath, `${JSON.stringify({ ...flat, machine, suites: results, ab: abResults }, null, 2)}\n`);

const md = [
  '# Benchmark results',
  '',
  `Machine: ${machine.cpus} x ${machine.cpu_model}, ${machine.memory_gb} GB, Node ${machine.node}; ${machine.date}.`,
  'Regenerate with `npm run bench` (or `npm run bench -- <suite>`). Latency distributions: [label-latency.svg](label-latency.svg).',
  'This shared 2-core machine moves single figures by 2x from one hour to the next: a change is judged by an A/B in one run,',
  '`npm run bench -- --ab <rev> [--rounds N] explain decision scale` (bench/ab.ts; the sections at the end).',
  '',
  '| key | value | target |',
  '|---|---|---|',
  ...Object.values(results).flatMap((r) =>
    Object.entries(r.keys).map(([k, v]) => `| \`${k}\` | ${v} | ${r.targets[k] ?? 'reported'} |`),
  ),
  '',
  ...Object.entries(results).flatMap(([name, r]) => {
    const cols = Object.keys(r.table[0] ?? {});
    const notes = (r.raw as { notes?: string[] }).notes ?? [];
    return [
      `## ${name}`,
      '',
      `| ${cols.join(' | ')} |`,
      `|${cols.map(() => '---').join('|')}|`,
      ...r.table.map((row) => `| ${cols.map((c) => row[c]).join(' | ')} |`),
      '',
      ...notes.flatMap((n) => [n, '']),
    ];
  }),
  ...Object.values(abResults).flatMap((r) => {
    const cols = Object.keys(r.table[0] ?? {});
    const notes = (r.raw as { notes?: string[] }).notes ?? [];
    return [
      `## A/B: ${(r.raw as { suites?: string[] }).suites?.join(', ') ?? ''}`,
      '',
      ...notes.flatMap((n) => [n, '']),
      `| ${cols.join(' | ')} |`,
      `|${cols.map(() => '---').join('|')}|`,
      ...r.table.map((row) => `| ${cols.map((c) => row[c]).join(' | ')} |`),
      '',
    ];
  }),
];
writeFileSync(join(here, 'results.md'), md.join('\n'));

const panels = [];
const cluster = results.cluster?.raw as { latency_ms_100?: number[]; latency_ms_1000?: number[] } | undefined;
if (cluster?.latency_ms_100) {
  panels.push({
    title: 'Reconciler: node created to record (no webhook)',
    series: [
      { name: '100-node bursts', valuesMs: cluster.latency_ms_100 },
      { name: '1,000-node bursts', valuesMs: cluster.latency_ms_1000 ?? [] },
    ],
  });
}
const create = (results['node-create']?.raw as { create_latency_ms?: Record<string, number[]> } | undefined)
  ?.create_latency_ms;
if (create) {
  panels.push({
    title: 'Kubelet CREATE latency (record inline for ours)',
    series: Object.entries(create).map(([arm, valuesMs]) => ({ name: `${arm} webhook`, valuesMs })),
  });
}
if (panels.length > 0) writeFileSync(join(here, 'label-latency.svg'), cdfSvg(panels));
progress(`wrote ${resultsPath}, results.md and label-latency.svg`);

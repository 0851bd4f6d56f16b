// `npm run bench -- --ab <rev> [--rounds N] <suite>...`: this tree against another commit, in one
// run, on this tree's benchmark input. A figure written down on another day, or on another load
// of this shared 2-core machine, says nothing about the code: explain_200_ms read 461 and then
// 1040 ms on two runs with the same explain code. Interleaved in one run, the machine weighs on
// both arms alike, and the ratio is what tells the code.
//
// The other commit is checked out as a git worktree in ~/ab-<sha> (VENEER_AB_DIR to choose),
// node_modules linked from this tree, and built with its own `npm run build`. Each arm runs this
// tree's benchmark code and input (kit/, bench/); only what is measured comes from the arm:
// - explain: both trees' compiled CLIs on the same 200 nodes and overlays, alternating, in one process;
// - decision: both trees' engines imported into one process, batches at 1,000 overlays alternating;
// - scale: the whole scale suite once per arm and round (the references, the apiserver and the
//   load are this tree's), arms alternating, so a round's two figures share the machine's hour.
// --rounds N (default 3): N rounds of scale (about 4 minutes an arm), 3N pairs of explain and 5N
// of decision (a second or two a pair).
import { execFileSync } from 'node:child_process';
import { existsSync, symlinkSync } from 'node:fs';
import { homedir } from 'node:os';
import { join } from 'node:path';
import { decisionsPerBatch, type DecisionEngine, effectPerNode } from './decision.ts';
import { type ReplacementPath, replacementPerNode } from './replacement.ts';
import { explainInput, runScaleSuite, spread, timeCommand } from './scale.ts';
import { median, type SuiteResult } from './stats.ts';

const ROOT = join(import.meta.dirname, '..');
export const AB_SUITES = ['explain', 'decision', 'scale'] as const;
export type AbSuite = (typeof AB_SUITES)[number];

/** One A/B: per figure, each arm's value in each round, and the ratio B/A per round. */
export interface AbResult {
  rev: string;
  sha: string;
  head: string;
  date: string;
  rounds: number;
  suites: AbSuite[];
  /** Files of the benchmark's input that differ between the arms' trees (none: the same input either way). */
  benchDiff: string[];
  figures: Record<string, { base: number[]; head: number[] }>;
}

const git = (args: string[], cwd = ROOT) => execFileSync('git', args, { cwd, encoding: 'utf8' }).trim();

/** A worktree of `rev`, built; reused when it is already there at that commit. */
export function worktreeOf(rev: string, progress: (msg: string) => void): { dir: string; sha: string } {
  const sha = git(['rev-parse', '--short=7', `${rev}^{commit}`]);
  const dir = process.env.VENEER_AB_DIR ?? join(homedir(), `ab-${sha}`);
  if (!existsSync(join(dir, '.git'))) {
    progress(`ab: git worktree add ${dir} ${sha}`);
    git(['worktree', 'add', '--detach', dir, sha]);
  } else if (git(['rev-parse', '--short=7', 'HEAD'], dir) !== sha) {
    throw new Error(
      `${dir} is a worktree of another commit than ${sha}: remove it (git worktree remove) or set VENEER_AB_DIR`,
    );
  }
  if (!existsSync(join(dir, 'node_modules'))) symlinkSync(join(ROOT, 'node_modules'), join(dir, 'node_modules'));
  progress(`ab: npm run build in ${dir}`);
  execFileSync('npm', ['run', '-s', 'build'], { cwd: dir, stdio: 'inherit' });
  return { dir, sha };
}

/** Runs the A/B; `base` is the other commit, `head` this tree (built by run.ts before). */
export async function runAb(
  rev: string,
  suites: AbSuite[],
  rounds: number,
  progress: (msg: string) => void,
): Promise<AbResult> {
  const { dir, sha } = worktreeOf(rev, progress);
  const trees = { base: dir, head: ROOT };
  const figures: AbResult['figures'] = {};
  const add = (key: string, arm: 'base' | 'head', value: number) => {
    figures[key] ??= { base: [], head: [] };
    figures[key][arm].push(value);
  };
  // Rounds alternate which arm goes first, so neither always runs on a warmer or a quieter machine.
  const order = (r: number) => (r % 2 === 0 ? (['base', 'head'] as const) : (['head', 'base'] as const));
  if (suites.includes('explain')) {
    const input = explainInput();
    try {
      for (const arm of ['base', 'head'] as const) timeCommand(['--help'], 1, join(trees[arm], 'dist', 'cli.js'));
      for (let r = 0; r < rounds * 3; r++) {
        for (const arm of order(r)) {
          add('explain_200_ms', arm, Math.round(timeCommand(input.explain, 1, join(trees[arm], 'dist', 'cli.js'))[0]!));
        }
      }
      progress(`ab explain: ${summary(figures.explain_200_ms!)}`);
    } finally {
      input.remove();
    }
  }
  if (suites.includes('decision')) {
    const engineOf = async (tree: string): Promise<DecisionEngine> => ({
      ...(await import(join(tree, 'src', 'engine', 'index.ts'))),
      AWS_KEYS: (await import(join(tree, 'src', 'engine', 'providers.ts'))).AWS_KEYS,
    });
    const engines = { base: await engineOf(trees.base), head: await engineOf(trees.head) };
    for (const arm of ['base', 'head'] as const) decisionsPerBatch(1000, 20, 500, 0, engines[arm]); // JIT warm-up
    for (let r = 0; r < rounds * 5; r++) {
      for (const arm of order(r)) {
        add('decision_p50_us_1000', arm, round(median(decisionsPerBatch(1000, 20, 1000, 0, engines[arm])), 3));
      }
    }
    progress(`ab decision: ${summary(figures.decision_p50_us_1000!)}`);
    // The effect's replays: a burst from one NodeClaim, NodeClaims each their own, and each path of
    // a consolidation's replacement; a round's types are its own, so no arm finds the other
    // rounds' work kept.
    const p99 = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length * 0.99)] ?? Number.NaN;
    const PATHS: ReplacementPath[] = ['anyway', 'caused', 'multi', 'balanced'];
    for (const arm of ['base', 'head'] as const) {
      effectPerNode(599, 100, 300, 'distinct', `w${arm}`, engines[arm]);
      for (const path of PATHS) replacementPerNode(599, 100, 100, path, engines[arm], `w${arm}`);
    }
    for (let r = 0; r < rounds; r++) {
      for (const arm of order(r)) {
        const shared = effectPerNode(599, 100, 3000, 'shared', `s${r}${arm}`, engines[arm]);
        add('effect_p50_us_599_candidates_100_overlays', arm, round(median(shared), 3));
        add('effect_p99_us_599_candidates_100_overlays', arm, round(p99(shared), 3));
        const distinct = effectPerNode(599, 100, 600, 'distinct', `d${r}${arm}`, engines[arm]);
        add('effect_distinct_claims_p50_us', arm, round(median(distinct), 3));
        for (const path of PATHS) {
          const times = replacementPerNode(599, 100, 1000, path, engines[arm], `${r}${arm}`);
          add(`replacement_effect_p50_us_${path}`, arm, round(median(times), 3));
          add(`replacement_effect_p99_us_${path}`, arm, round(p99(times), 3));
        }
      }
    }
    progress(`ab decision: effect ${summary(figures.effect_p99_us_599_candidates_100_overlays!)}`);
  }
  if (suites.includes('scale')) {
    for (let r = 0; r < rounds; r++) {
      for (const arm of order(r)) {
        progress(`ab scale: round ${r + 1} of ${rounds}, ${arm === 'base' ? sha : 'this tree'}`);
        const { keys } = await runScaleSuite(progress, join(trees[arm], 'dist', 'cli.js'));
        for (const k of [
          'terminated_watchers_real',
          'terminated_watchers_floor',
          'terminated_watchers_field',
          'churn_cpu_over_floor',
          'rss_mb_5000_real_nodes',
          'explain_200_ms',
        ])
          add(`scale.${k}`, arm, keys[k] ?? Number.NaN);
        add(
          'scale.terminated_over_floor',
          arm,
          (keys.terminated_watchers_real ?? 0) - (keys.terminated_watchers_floor ?? 0),
        );
      }
    }
  }
  // Results and figures are outputs, not input.
  const benchDiff = git(['diff', '--name-only', sha, '--', 'bench/*.ts', 'kit']).split('\n').filter(Boolean);
  return {
    rev,
    sha,
    head: `${git(['rev-parse', '--short=7', 'HEAD'])}${git(['status', '--porcelain', '--', 'src']) ? ' + uncommitted src' : ''}`,
    date: new Date().toISOString(),
    rounds,
    suites,
    benchDiff,
    figures,
  };
}

const round = (x: number, digits = 1) => Math.round(x * 10 ** digits) / 10 ** digits;

function summary(f: { base: number[]; head: number[] }): string {
  return `base median ${round(median(f.base), 3)} (${spread(f.base, 2)}), this tree ${round(median(f.head), 3)} (${spread(f.head, 2)}), head/base per pair ${ratios(f)}`;
}

/** The median and range of head/base over the pairs measured side by side. */
function ratios(f: { base: number[]; head: number[] }): string {
  const r = f.head.map((h, i) => h / f.base[i]!).filter(Number.isFinite);
  return r.length === 0 ? '-' : `${round(median(r), 2)} (${spread(r, 2)})`;
}

/**
 * What the pairs say: a difference only when every pair agrees on its sign. Pairs that disagree
 * mean the machine moved the figure more than the code did.
 */
function reading(f: { base: number[]; head: number[] }): string {
  const d = f.head.map((h, i) => h - f.base[i]!).filter(Number.isFinite);
  if (d.length === 0) return '-';
  if (d.every((x) => x < 0)) return 'this tree lower in every pair';
  if (d.every((x) => x > 0)) return 'this tree higher in every pair';
  return 'no difference beyond the machine (pairs disagree)';
}

/** The A/B as a SuiteResult for results.json and a section of results.md. */
export function abSection(ab: AbResult): SuiteResult {
  return {
    keys: {},
    targets: {},
    table: Object.entries(ab.figures).map(([figure, f]) => ({
      figure,
      [`base ${ab.sha} median`]: round(median(f.base), 3),
      [`base ${ab.sha} spread`]: spread(f.base, 2),
      [`${ab.head} median`]: round(median(f.head), 3),
      [`${ab.head} spread`]: spread(f.head, 2),
      'this/base per pair': ratios(f),
      reading: reading(f),
    })),
    raw: {
      ...ab,
      notes: [
        `A/B against ${ab.rev} (${ab.sha}) on ${ab.date.slice(0, 16)}Z, ${ab.rounds} round(s), arms alternating; rerun with \`npm run bench -- --ab ${ab.rev} --rounds ${ab.rounds} ${ab.suites.join(' ')}\` (bench/ab.ts).`,
        ab.benchDiff.length === 0
          ? 'The two trees have the same bench/ and kit/: the same input either way.'
          : `Both arms ran this tree's bench/ and kit/ (${ab.benchDiff.length} of their files differ in the base tree${ab.benchDiff.length > 6 ? `, among them ${ab.benchDiff.slice(0, 6).join(', ')}` : `: ${ab.benchDiff.join(', ')}`}).`,
      ],
    },
  };
}

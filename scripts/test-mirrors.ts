// `node scripts/test-mirrors.ts [ROOT]`: every .ts file of ROOT/src has a test where one would look
// for it, src/<path>.ts → test/<path>.test.ts, or a line in test/COVERAGE.md naming the test that
// covers it. Prints one line per violation and exits 1; or one OK line and exits 0. Part of
// `npm run lint`, beside scripts/rooms.ts.
//
// The table's lines are `| \`src/<path>.ts\` | \`test/<path>.test.ts\` | why there |`. A line fails
// when its src file is gone, when its test does not exist or does not load the src file (the claim
// checked: the file is among those the test imports, or they import), when the src file has a
// mirrored test after all (the line is then one to delete), or when the src file has two lines. A
// mirrored test must load its src file too. A test loads what it runs as a process from source too
// (the CLI: `join(import.meta.dirname, ..., 'src', 'cli.ts')`).
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { importsOf } from './imports-of.ts';

export const TABLE = 'test/COVERAGE.md';

export interface MirrorReport {
  /** `file: rule`, sorted. */
  violations: string[];
  /** The .ts files of src/. */
  files: number;
  /** Of them, with a test at the mirrored path. */
  mirrored: number;
  /** Lines of the table. */
  lines: number;
}

/** Where the test of a src file is looked for: src/a/b.ts → test/a/b.test.ts. */
export function mirrorOf(srcFile: string): string {
  return `test/${srcFile.slice('src/'.length).replace(/\.ts$/, '.test.ts')}`;
}

/** The table's lines: src file → the test that covers it. */
export function parseTable(text: string): { src: string; test: string }[] {
  const out: { src: string; test: string }[] = [];
  for (const line of text.split('\n')) {
    const m = /^\|\s*`(src\/[^`]+)`\s*\|\s*`(test\/[^`]+)`\s*\|/.exec(line);
    if (m) out.push({ src: m[1]!, test: m[2]! });
  }
  return out;
}

function tsFilesUnder(root: string, dir: string): string[] {
  const out: string[] = [];
  for (const e of readdirSync(join(root, dir), { withFileTypes: true })) {
    const p = `${dir}/${e.name}`;
    if (e.isDirectory()) out.push(...tsFilesUnder(root, p));
    else if (e.isFile() && e.name.endsWith('.ts')) out.push(p);
  }
  return out.sort();
}

/**
 * The programs a file runs from source: `join(import.meta.dirname, '..', 'src', 'cli.ts')`, the
 * idiom every test that starts the CLI as a process uses.
 */
function programsOf(file: string, source: string): string[] {
  const out: string[] = [];
  for (const m of source.matchAll(/join\(import\.meta\.dirname((?:,\s*'[^']*')+)\)/g)) {
    const parts = [...m[1]!.matchAll(/'([^']*)'/g)].map((p) => p[1]!);
    if (parts.at(-1)?.endsWith('.ts')) out.push(resolve(dirname(file), ...parts));
  }
  return out;
}

/**
 * Whether the test loads the src file: it is among the files the test imports or runs as a
 * program, or they do, and so on (relative imports only, each file read once per check).
 */
function imports(root: string, test: string, src: string, read: Map<string, string[]>): boolean {
  const target = join(root, src);
  const seen = new Set<string>();
  const queue = [join(root, test)];
  for (let i = 0; i < queue.length; i++) {
    const file = queue[i]!;
    if (file === target) return true;
    let next = read.get(file);
    if (next === undefined) {
      const source = existsSync(file) ? readFileSync(file, 'utf8') : '';
      next = [
        ...importsOf(source)
          .filter((specifier) => specifier.startsWith('.'))
          .map((specifier) => resolve(dirname(file), specifier)),
        ...programsOf(file, source),
      ];
      read.set(file, next);
    }
    for (const f of next)
      if (!seen.has(f)) {
        seen.add(f);
        queue.push(f);
      }
  }
  return false;
}

/** Checks ROOT/src against its tests and ROOT/test/COVERAGE.md. */
export function checkMirrors(root: string): MirrorReport {
  const srcFiles = tsFilesUnder(root, 'src');
  const tablePath = join(root, TABLE);
  const table = existsSync(tablePath) ? parseTable(readFileSync(tablePath, 'utf8')) : [];
  const violations: string[] = [];
  const listed = new Map<string, string>();
  const read = new Map<string, string[]>();
  for (const { src, test } of table) {
    if (listed.has(src)) violations.push(`${TABLE}: ${src} has two lines`);
    listed.set(src, test);
    if (!existsSync(join(root, src))) violations.push(`${TABLE}: ${src} does not exist`);
    else if (existsSync(join(root, mirrorOf(src))))
      violations.push(`${TABLE}: ${src} has its mirrored test ${mirrorOf(src)}; delete its line`);
    if (!existsSync(join(root, test))) violations.push(`${TABLE}: ${src} → ${test}, which does not exist`);
    else if (existsSync(join(root, src)) && !imports(root, test, src, read))
      violations.push(`${TABLE}: ${src} → ${test}, which does not load it`);
  }
  let mirrored = 0;
  for (const src of srcFiles) {
    if (existsSync(join(root, mirrorOf(src)))) {
      mirrored++;
      if (!imports(root, mirrorOf(src), src, read)) violations.push(`${mirrorOf(src)}: does not load ${src}`);
    } else if (!listed.has(src))
      violations.push(`${src}: no test at ${mirrorOf(src)} and no line in ${TABLE} naming the test that covers it`);
  }
  return { violations: violations.sort(), files: srcFiles.length, mirrored, lines: table.length };
}

if (import.meta.main) {
  const root = resolve(process.argv[2] ?? join(import.meta.dirname, '..'));
  const report = checkMirrors(root);
  for (const v of report.violations) console.log(v);
  const where = relative(process.cwd(), join(root, TABLE)) || TABLE;
  if (report.violations.length > 0) {
    console.log(`test-mirrors: ${report.violations.length} violations`);
    process.exit(1);
  }
  console.log(
    `test-mirrors: OK, ${report.files} files of src/: ${report.mirrored} with a mirrored test, ${report.lines} in ${where}`,
  );
}

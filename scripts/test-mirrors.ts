// `node scripts/test-mirrors.ts [ROOT]`: every .ts file of ROOT/src has a test where one would look
// for it, src/<path>.ts → test/<path>.test.ts, or a line in test/COVERAGE.md naming the test that
// covers it. Prints one line per violation and exits 1; or one OK line and exits 0. Part of
// `npm run lint`, beside scripts/rooms.ts.
//
// The table's lines are `| \`src/<path>.ts\` | \`test/<path>.test.ts\` | why there |`. A line fails
// when its src file is gone, when its test does not exist, when the src file has a mirrored test
// after all (the line is then one to delete), or when the src file has two lines.
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join, relative, resolve } from 'node:path';

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

/** Checks ROOT/src against its tests and ROOT/test/COVERAGE.md. */
export function checkMirrors(root: string): MirrorReport {
  const srcFiles = tsFilesUnder(root, 'src');
  const tablePath = join(root, TABLE);
  const table = existsSync(tablePath) ? parseTable(readFileSync(tablePath, 'utf8')) : [];
  const violations: string[] = [];
  const listed = new Map<string, string>();
  for (const { src, test } of table) {
    if (listed.has(src)) violations.push(`${TABLE}: ${src} has two lines`);
    listed.set(src, test);
    if (!existsSync(join(root, src))) violations.push(`${TABLE}: ${src} does not exist`);
    else if (existsSync(join(root, mirrorOf(src))))
      violations.push(`${TABLE}: ${src} has its mirrored test ${mirrorOf(src)}; delete its line`);
    if (!existsSync(join(root, test))) violations.push(`${TABLE}: ${src} → ${test}, which does not exist`);
  }
  let mirrored = 0;
  for (const src of srcFiles) {
    if (existsSync(join(root, mirrorOf(src)))) mirrored++;
    else if (!listed.has(src))
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

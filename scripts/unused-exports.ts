// `node scripts/unused-exports.ts [ROOT]`: every name a file of ROOT/src exports is taken by some
// other file (of src/, test/, kit/, bench/ or scripts/: an import, a re-export, a namespace import
// or an `import()`, which take every name), or it should not be exported. Prints one line per
// name nothing takes and exits 1; or one OK line and exits 0. Part of `npm run lint`. The files
// are read by the same tokenizer as the rooms' (scripts/imports-of.ts), not by TypeScript.
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, join, relative, resolve, sep } from 'node:path';
import { bindingsOf } from './imports-of.ts';

/** The trees whose files may take a name of src/. */
export const READERS = ['src', 'test', 'kit', 'bench', 'scripts'];

export interface ExportsReport {
  /** `src/file.ts: exports name, which nothing takes`, sorted. */
  violations: string[];
  /** Names exported by files of src/. */
  exports: number;
}

function filesUnder(dir: string): string[] {
  if (!existsSync(dir)) return [];
  const out: string[] = [];
  for (const e of readdirSync(dir, { withFileTypes: true })) {
    const p = join(dir, e.name);
    if (e.isDirectory() && e.name !== 'node_modules') out.push(...filesUnder(p));
    else if (e.isFile() && /\.(ts|mjs)$/.test(e.name) && !e.name.endsWith('.d.ts')) out.push(p);
  }
  return out;
}

function resolveRelative(from: string, specifier: string): string | undefined {
  const target = resolve(dirname(from), specifier);
  const candidates = [target, target.replace(/\.js$/, '.ts'), `${target}.ts`, join(target, 'index.ts')];
  return candidates.find((c) => existsSync(c) && statSync(c).isFile());
}

export function checkExports(root: string): ExportsReport {
  const taken = new Map<string, Set<string> | 'all'>();
  const exported = new Map<string, string[]>();
  const src = join(root, 'src');
  for (const file of READERS.flatMap((tree) => filesUnder(join(root, tree)))) {
    const b = bindingsOf(readFileSync(file, 'utf8'));
    if (file.startsWith(src + sep) && file.endsWith('.ts')) exported.set(file, [...b.exports, ...b.reexports]);
    for (const { specifier, names } of b.takes) {
      if (!specifier.startsWith('.')) continue;
      const target = resolveRelative(file, specifier);
      if (target === undefined || target === file) continue;
      const known = taken.get(target);
      if (names === '*' || known === 'all') taken.set(target, 'all');
      else taken.set(target, new Set([...(known ?? []), ...names]));
    }
  }
  const violations: string[] = [];
  let count = 0;
  for (const [file, names] of exported) {
    const by = taken.get(file);
    for (const name of new Set(names)) {
      count++;
      if (by !== 'all' && !by?.has(name))
        violations.push(`${relative(root, file).split(sep).join('/')}: exports ${name}, which nothing takes`);
    }
  }
  return { violations: violations.sort(), exports: count };
}

if (import.meta.main) {
  const root = resolve(process.argv[2] ?? join(import.meta.dirname, '..'));
  const report = checkExports(root);
  for (const v of report.violations) console.log(v);
  if (report.violations.length > 0) {
    console.log(`unused-exports: ${report.violations.length} of ${report.exports} exported names nothing takes`);
    process.exit(1);
  }
  console.log(`unused-exports: OK, ${report.exports} names exported by src/, each taken by another file`);
}

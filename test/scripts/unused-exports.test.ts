// scripts/unused-exports.ts: a name a file of src/ exports must be taken by another file (an
// import, a re-export, a namespace import or an import()), else it should not be exported.
import { execFile } from 'node:child_process';
import { join } from 'node:path';
import { promisify } from 'node:util';
import t from 'tap';
import { bindingsOf } from '../../scripts/imports-of.ts';
import { checkExports } from '../../scripts/unused-exports.ts';

const SCRIPT = join(import.meta.dirname, '..', '..', 'scripts', 'unused-exports.ts');

t.test('what a file exports and takes, by name', async (t) => {
  const b = bindingsOf(
    [
      "import a, { b, type c as d } from './a.ts';",
      "import type * as ns from './ns.ts';",
      "export { e as f } from './e.ts';",
      "export * from './all.ts';",
      'export async function fn() {}',
      'export const k = 1, m = { x: [1, 2] }, n = 3;',
      'export interface I {}',
      'export type U = string;',
      'const local = 1;',
      'export { local as renamed };',
      "const lazy = await import('./lazy.ts');",
    ].join('\n'),
  );
  t.same(b.exports, ['fn', 'k', 'm', 'n', 'I', 'U', 'renamed']);
  t.same(b.reexports, ['f']);
  t.same(b.takes, [
    { specifier: './a.ts', names: ['default', 'b', 'c'] },
    { specifier: './ns.ts', names: '*' },
    { specifier: './e.ts', names: ['e'] },
    { specifier: './all.ts', names: '*' },
    { specifier: './lazy.ts', names: '*' },
  ]);
});

t.test('a name nothing takes is reported; one taken anywhere, or through a door, is not', async (t) => {
  const root = t.testdir({
    src: {
      'a.ts':
        'export const used = 1;\nexport const unused = 2;\nexport type Seen = number;\nexport type Unseen = string;\n',
      'door.ts': "export { used as viaDoor, unused as neverTaken } from './a.ts';\n",
      'all.ts': 'export const x = 1;\nexport function y() {}\n',
      'lazy.ts': 'export const z = 1;\n',
      'self.ts': 'export const onlyHere = 1;\nconsole.log(onlyHere);\n',
      'main.ts':
        "import { viaDoor } from './door.ts';\nimport type { Seen } from './a.ts';\nimport * as all from './all.ts';\nawait import('./lazy.ts');\nexport const v: Seen = viaDoor + all.x;\n",
    },
    test: { 'main.test.ts': "import { v } from '../src/main.ts';\nconsole.log(v);\n" },
  });
  const report = checkExports(root);
  t.same(report.violations, [
    'src/a.ts: exports Unseen, which nothing takes',
    'src/door.ts: exports neverTaken, which nothing takes',
    'src/self.ts: exports onlyHere, which nothing takes',
  ]);
  t.equal(report.exports, 11);
  const failed = await promisify(execFile)(process.execPath, [SCRIPT, root]).catch((err) => err);
  t.equal(failed.code, 1);
  t.match(failed.stdout, /unused-exports: 3 of 11 exported names nothing takes/);
});

t.test('this repository keeps the rule', async (t) => {
  const { stdout } = await promisify(execFile)(process.execPath, [SCRIPT]);
  t.match(stdout, /^unused-exports: OK, \d+ names exported by src\/, each taken by another file$/m);
});

import { execFile } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { promisify } from 'node:util';
import t from 'tap';
import { importsOf } from '../../scripts/imports-of.ts';
import { checkRooms, cycles, ROOMS } from '../../scripts/rooms.ts';

const SCRIPT = join(import.meta.dirname, '..', '..', 'scripts', 'rooms.ts');

/** A src/ tree where every rule of scripts/rooms.ts is broken once. */
const broken = {
  src: {
    'cli.ts': "import { serve } from './commands/serve.ts';\nserve();\n",
    'log.ts': 'export const log = console.log;\n',
    'metrics.ts': 'export const metrics = {};\n',
    'extra.ts': 'export const extra = 1;\n',
    'more.ts': 'export const more = 2;\n',
    commands: {
      'serve.ts':
        "export async function serve() {\n  const k8s = await import('@kubernetes/client-node');\n  return k8s;\n}\n",
    },
    engine: {
      'index.ts': "export { decide } from './decide.ts';\n",
      'decide.ts':
        "import YAML from 'yaml';\nimport { readFileSync } from 'node:fs';\nexport const decide = () => YAML.parse(String(readFileSync('x')));\n",
      // A folder and a loose file that import each other through different files: no file cycle, a folder one.
      'node.ts': "import type { B } from './effect/b.ts';\nexport type N = B;\n",
      effect: {
        'a.ts': "import type { N } from '../node.ts';\nexport type A = N;\n",
        'b.ts': 'export type B = number;\n',
        'c.ts': "import type { D } from '../disruption/d.ts';\nexport type C = D;\n",
      },
      disruption: { 'd.ts': 'export type D = string;\n' },
    },
    kube: {
      'client.ts':
        "import * as k8s from '@kubernetes/client-node';\nimport { decide } from '../engine/index.ts';\nexport const client = [k8s, decide];\n",
    },
    state: {
      'a.ts': "import type { B } from './b.ts';\nexport type A = { b?: B };\n",
      'b.ts': "import { c } from './c.ts';\nexport type B = typeof c;\n",
      'c.ts': "import type { A } from './a.ts';\nexport const c: A[] = [];\n",
      'door.ts': "import { decide } from '../engine/decide.ts';\nexport const d = decide;\n",
      'big.ts': 'export const x = 1;\n'.repeat(351),
      'upward.ts': "import { serve } from '../commands/serve.ts';\nexport const s = serve;\n",
      'lost.ts': "import './gone.ts';\nimport '../../kit/helper.ts';\n",
    },
  },
  kit: { 'helper.ts': '' },
};

t.test('each broken rule is reported on its own line', async (t) => {
  const { violations, files, rooms } = checkRooms(t.testdir(broken));
  t.equal(files, 21);
  t.equal(rooms, 10);
  const expected = [
    'src: 5 loose .ts files (cli.ts, extra.ts, log.ts, metrics.ts, more.ts), at most 4',
    'src/extra.ts: in no room (the rooms are in scripts/rooms.ts)',
    'src/more.ts: in no room (the rooms are in scripts/rooms.ts)',
    'src/state/a.ts -> src/state/b.ts: import cycle src/state/a.ts -> src/state/b.ts -> src/state/c.ts -> src/state/a.ts',
    'src/engine/decide.ts -> yaml: engine may import only engine and node:',
    'src/kube/client.ts -> src/engine/index.ts: kube may import only kube, npm and node:',
    'src/state/door.ts -> src/engine/decide.ts: engine is entered only by src/engine/index.ts or src/engine/providers.ts',
    'src/state/big.ts: 351 lines, over 350',
    'src/state/upward.ts -> src/commands/serve.ts: state may import only state, engine, kube, npm and node:',
    'src/commands/serve.ts -> @kubernetes/client-node: imported by 2 files of src/, at most one',
    'src/kube/client.ts -> @kubernetes/client-node: imported by 2 files of src/, at most one',
    'src/state/lost.ts -> ./gone.ts: resolves to no file',
    'src/state/lost.ts -> kit/helper.ts: src/ imports nothing outside src/',
    'src/engine/effect/c.ts -> src/engine/disruption/d.ts: engine/effect/ never imports engine/disruption/',
    'src/engine/effect/: import cycle between the folders and files of src/engine/: engine/effect/, engine/node.ts',
  ];
  for (const line of expected) t.ok(violations.includes(line), line);
  t.equal(violations.length, expected.length, 'nothing else', { violations });
});

t.test('the command prints the violations and exits 1', async (t) => {
  const bad = await promisify(execFile)(process.execPath, [SCRIPT, t.testdir(broken)]).catch((err) => err);
  t.equal(bad.code, 1);
  t.match(bad.stdout, /^src\/engine\/decide\.ts -> yaml: engine may import only engine and node:$/m);
  t.match(bad.stdout, /^rooms: 15 violations in 21 files of src\/$/m);
});

t.test('the command prints one OK line and exits 0 on a clean tree (ROOMS_ROOT names the tree)', async (t) => {
  const clean = await promisify(execFile)(process.execPath, [SCRIPT], {
    env: {
      ...process.env,
      ROOMS_ROOT: t.testdir({ src: { 'cli.ts': "import './engine/index.ts';\n", engine: { 'index.ts': '' } } }),
    },
  });
  t.equal(clean.stdout, 'rooms: OK, 2 files of src/ in 10 rooms\n');
});

t.test('imports of every kind are read; comments, strings and regular expressions are not imports', async (t) => {
  // biome-ignore-start lint/suspicious/noTemplateCurlyInString: the lines are TypeScript source, as data
  const source = [
    "import a, { b, type c } from './a.ts';",
    "import type * as d from './d.ts';",
    "import './side-effect.ts';",
    "export { e } from './e.ts';",
    "export type { F } from './f.ts';",
    "export * from './g.ts';",
    "import data from './h.json' with { type: 'json' };",
    "type K = typeof import('./k.ts');",
    'const m = await import(`./m.ts`);',
    'const n = await import(`./${name}.ts`);',
    "// import x from './comment.ts';",
    "/* export * from './block.ts'; */",
    'const s = "import y from \'./string.ts\'";',
    "const t = `import z from './template.ts' ${`${import.meta.url}`}`;",
    "const re = /import w from '.\\/regex.ts'/;",
    "const half = 1 / 2; const q = 'it\\'s';",
    'const u = `a \\` b`;',
    'export const from = 1;',
    "export { from } from './from.ts';",
  ].join('\n');
  // biome-ignore-end lint/suspicious/noTemplateCurlyInString: the lines are TypeScript source, as data
  t.same(importsOf(source), [
    './a.ts',
    './d.ts',
    './side-effect.ts',
    './e.ts',
    './f.ts',
    './g.ts',
    './h.json',
    './k.ts',
    './m.ts',
    './from.ts',
  ]);
});

t.test('cycles: a file importing itself is one, a chain is none', async (t) => {
  t.same(cycles(new Map([['a', ['a']]])), [['a']]);
  t.same(
    cycles(
      new Map([
        ['a', ['b']],
        ['b', ['c']],
        ['c', []],
      ]),
    ),
    [],
  );
  t.same(
    cycles(
      new Map([
        ['a', ['b']],
        ['b', ['a', 'c']],
        ['c', ['d']],
        ['d', ['c']],
      ]),
    ),
    [
      ['c', 'd'],
      ['a', 'b'],
    ],
  );
});

t.test('docs/development.md quotes the table of rooms as it is', async (t) => {
  const script = readFileSync(SCRIPT, 'utf8');
  const start = script.indexOf('export const ROOMS');
  const table = script.slice(start, script.indexOf('];\n', start) + 2);
  t.ok(start > 0 && table.split('\n').length === ROOMS.length + 2, 'the table is one room a line');
  t.ok(readFileSync(join(import.meta.dirname, '..', '..', 'docs', 'development.md'), 'utf8').includes(table));
});

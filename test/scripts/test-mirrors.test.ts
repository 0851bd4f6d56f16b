// scripts/test-mirrors.ts: a src file needs its mirrored test or a line in test/COVERAGE.md, and
// every line of that table must name a test that exists and loads the src file (imports it, or
// runs it as a program), for a src file without its mirror.
import { execFile } from 'node:child_process';
import { join } from 'node:path';
import { promisify } from 'node:util';
import t from 'tap';
import { checkMirrors, mirrorOf, parseTable } from '../../scripts/test-mirrors.ts';

const SCRIPT = join(import.meta.dirname, '..', '..', 'scripts', 'test-mirrors.ts');

t.test('the mirrored path', async (t) => {
  t.equal(mirrorOf('src/engine/effect/verdict.ts'), 'test/engine/effect/verdict.test.ts');
  t.equal(mirrorOf('src/cli.ts'), 'test/cli.test.ts');
});

t.test("the table's lines", async (t) => {
  t.same(
    parseTable('# x\n| src | covered by |\n| --- | --- |\n| `src/a.ts` | `test/b/a.test.ts` | why |\nnot a line\n'),
    [{ src: 'src/a.ts', test: 'test/b/a.test.ts' }],
  );
});

t.test('every rule broken once, and a tree that keeps them', async (t) => {
  const table = [
    '| `src/listed.ts` | `test/apiserver/listed.test.ts` | on a real apiserver |',
    '| `src/mirrored.ts` | `test/apiserver/listed.test.ts` | a line no longer needed |',
    '| `src/gone.ts` | `test/apiserver/listed.test.ts` | its file is gone |',
    '| `src/stale.ts` | `test/apiserver/stale.test.ts` | its test is gone |',
    '| `src/listed.ts` | `test/apiserver/listed.test.ts` | twice |',
    '| `src/unloaded.ts` | `test/apiserver/listed.test.ts` | a test that does not load it |',
    '| `src/run.ts` | `test/apiserver/runs.test.ts` | loaded by the program the test runs |',
    '| `src/cli.ts` | `test/apiserver/runs.test.ts` | the program the test runs |',
  ].join('\n');
  const root = t.testdir({
    src: {
      'listed.ts': '',
      'mirrored.ts': '',
      'stale.ts': '',
      'bare.ts': '',
      'unloaded.ts': '',
      'misnamed.ts': '',
      'cli.ts': "import './run.ts';\n",
      'run.ts': '',
      room: { 'deep.ts': '' },
    },
    test: {
      'COVERAGE.md': table,
      'mirrored.test.ts': "import '../src/mirrored.ts';\n",
      'misnamed.test.ts': "import '../src/listed.ts';\n",
      room: {
        'deep.test.ts': "import { x } from './helper.ts';\n",
        'helper.ts': "export * from '../../src/room/deep.ts';\n",
      },
      apiserver: {
        'listed.test.ts': "import '../../src/listed.ts';\nimport '../../src/mirrored.ts';\n",
        'runs.test.ts': "const cli = join(import.meta.dirname, '..', '..', 'src', 'cli.ts');\n",
      },
    },
  });
  const report = checkMirrors(root);
  t.same(report.violations, [
    'src/bare.ts: no test at test/bare.test.ts and no line in test/COVERAGE.md naming the test that covers it',
    'test/COVERAGE.md: src/gone.ts does not exist',
    'test/COVERAGE.md: src/listed.ts has two lines',
    'test/COVERAGE.md: src/mirrored.ts has its mirrored test test/mirrored.test.ts; delete its line',
    'test/COVERAGE.md: src/stale.ts → test/apiserver/stale.test.ts, which does not exist',
    'test/COVERAGE.md: src/unloaded.ts → test/apiserver/listed.test.ts, which does not load it',
    'test/misnamed.test.ts: does not load src/misnamed.ts',
  ]);
  t.match(report, { files: 9, mirrored: 3, lines: 8 });
  const failed = await promisify(execFile)(process.execPath, [SCRIPT, root]).catch((err) => err);
  t.equal(failed.code, 1, 'the script exits 1');
  t.match(failed.stdout, /test-mirrors: 7 violations/);
});

t.test('this repository keeps them', async (t) => {
  const { stdout } = await promisify(execFile)(process.execPath, [SCRIPT]);
  t.match(stdout, /^test-mirrors: OK, \d+ files of src\/: \d+ with a mirrored test, \d+ in test\/COVERAGE.md$/m);
});

import t from 'tap';
import { parseSelector } from '../../src/engine/selector.ts';

t.test('label selector grammar', async (t) => {
  const labels = { 'app.kubernetes.io/managed-by': 'veneer', tier: 'a' };
  const table: [string, boolean][] = [
    ['', true],
    ['app.kubernetes.io/managed-by=veneer', true],
    ['app.kubernetes.io/managed-by==veneer', true],
    ['app.kubernetes.io/managed-by!=veneer', false],
    ['app.kubernetes.io/managed-by=other', false],
    ['tier in (a, b)', true],
    ['tier notin (a,b)', false],
    ['tier', true],
    ['!tier', false],
    ['!missing', true],
    ['missing', false],
    ['missing!=x', true],
    ['tier in (a,b),app.kubernetes.io/managed-by=veneer', true],
    ['tier in (b),app.kubernetes.io/managed-by=veneer', false],
  ];
  for (const [source, expected] of table) t.equal(parseSelector(source).matches(labels), expected, source);
});

t.test('a malformed selector is an error that names it', async (t) => {
  t.throws(() => parseSelector('a=b,=c'), /invalid label selector "a=b,=c": cannot parse "=c"/);
  t.throws(() => parseSelector('a in b'), /cannot parse/);
});

t.test('value sets are checked as the apiserver checks them', async (t) => {
  t.throws(() => parseSelector('tier in ()'), /bad value set/);
  t.throws(() => parseSelector('tier in (a b)'), /bad value set/);
  t.throws(() => parseSelector('tier notin (a,)'), /bad value set/);
});

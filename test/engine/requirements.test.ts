import t from 'tap';
import { compileRequirement, parseInteger, requirementPasses } from '../../src/engine/requirements.ts';

const pass = (operator: string, values: string[] | undefined, nodeValue: string | undefined) =>
  requirementPasses(compileRequirement({ key: 'k', operator, ...(values ? { values } : {}) }), nodeValue);

t.test('every operator against a present value, a different value and a missing key', async (t) => {
  // [operator, values, node value, expected]
  const table: [string, string[] | undefined, string | undefined, boolean][] = [
    ['In', ['a', 'b'], 'a', true],
    ['In', ['a', 'b'], 'c', false],
    ['In', ['a'], undefined, false],
    ['NotIn', ['a'], 'a', false],
    ['NotIn', ['a'], 'b', true],
    ['NotIn', ['a'], undefined, true],
    ['Exists', undefined, 'x', true],
    ['Exists', undefined, '', true],
    ['Exists', undefined, undefined, false],
    ['DoesNotExist', undefined, 'x', false],
    ['DoesNotExist', undefined, undefined, true],
    ['Gt', ['4'], undefined, false],
    ['Lt', ['4'], undefined, false],
    ['Gte', ['4'], undefined, false],
    ['Lte', ['4'], undefined, false],
  ];
  for (const [op, values, value, expected] of table) {
    t.equal(pass(op, values, value), expected, `${op} ${JSON.stringify(values)} vs ${JSON.stringify(value)}`);
  }
});

t.test('integer bounds: Gt N means >= N+1, Lt N means <= N-1, Gte/Lte inclusive', async (t) => {
  const table: [string, string, string, boolean][] = [
    ['Gt', '4', '4', false],
    ['Gt', '4', '5', true],
    ['Gt', '0', '0', false],
    ['Gt', '0', '1', true],
    ['Lt', '4', '4', false],
    ['Lt', '4', '3', true],
    ['Lt', '0', '0', false],
    ['Lt', '0', '-1', true],
    ['Gte', '4', '4', true],
    ['Gte', '4', '3', false],
    ['Lte', '4', '4', true],
    ['Lte', '4', '5', false],
    ['Gt', '9223372036854775806', '9223372036854775807', true],
    ['Gt', '9223372036854775807', '9223372036854775807', false],
  ];
  for (const [op, bound, value, expected] of table) t.equal(pass(op, [bound], value), expected, `${op} ${bound} vs ${value}`);
});

t.test('a value that is not an integer fails every numeric bound (strconv.Atoi rules)', async (t) => {
  for (const op of ['Gt', 'Lt', 'Gte', 'Lte']) {
    for (const value of ['4.0', 'four', '', ' 4', '0x10', '1e3', '9223372036854775808']) {
      t.equal(pass(op, ['0'], value), false, `${op} 0 vs ${JSON.stringify(value)}`);
    }
  }
  t.equal(pass('Gte', ['4'], '+5'), true, 'a leading + is an integer to Go');
  t.equal(pass('Lte', ['4'], '-5'), true, 'negative values compare numerically');
  t.equal(parseInteger('007'), 7n);
});

t.test('malformed requirements never pass', async (t) => {
  t.equal(pass('Gt', ['1', '2'], '5'), false, 'two values');
  t.equal(pass('Gt', [], '5'), false, 'no value');
  t.equal(pass('Gt', ['-1'], '5'), false, 'negative bound');
  t.equal(pass('Lt', ['x'], '5'), false, 'non-integer bound');
  t.equal(pass('In', [], 'a'), false, 'In without values');
  t.equal(pass('NotIn', [], undefined), false, 'NotIn without values');
  t.equal(pass('Like', ['a'], 'a'), false, 'unknown operator');
  t.match(compileRequirement({ key: 'k', operator: 'Like' }).invalid, /unsupported operator/);
});

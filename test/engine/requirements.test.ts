import t from 'tap';
import {
  allPass,
  combineRequirements,
  combinedOperator,
  parseInteger,
  requirementPasses,
  type RequirementSpec,
} from '../../src/engine/requirements.ts';

const one = (operator: string, values?: string[]) => {
  const [req] = combineRequirements([{ key: 'k', operator, ...(values ? { values } : {}) }]);
  if (!req) throw new Error('no requirement');
  return req;
};
const pass = (operator: string, values: string[] | undefined, nodeValue: string | undefined) =>
  requirementPasses(one(operator, values), nodeValue);

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
  for (const [op, bound, value, expected] of table)
    t.equal(pass(op, [bound], value), expected, `${op} ${bound} vs ${value}`);
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
  t.match(one('Like').invalid, /unsupported operator/);
  t.match(
    combineRequirements([
      { key: 'k', operator: 'Exists' },
      { key: 'k', operator: 'Gt', values: ['x'] },
    ])[0]?.invalid,
    /non-negative integer/,
    'a malformed part spoils the combination',
  );
});

// Requirements.Add (pkg/scheduling/requirements.go) intersects requirements that share a key
// with Requirement.Intersection; Requirement.Operator reads the result back; Compatible lets a
// missing key pass only a combined NotIn or DoesNotExist; HasIntersection judges a present value.
t.test(
  'requirements sharing a key are one requirement (Requirements.Add, Requirement.Intersection and Operator)',
  async (t) => {
    const r = (key: string, operator: string, ...values: string[]): RequirementSpec => ({ key, operator, values });
    // [written, combined operator, combined values, gte, lte]
    const table: [RequirementSpec[], string, string[], string | undefined, string | undefined][] = [
      [[r('k', 'In', 'a'), r('k', 'NotIn', 'a')], 'DoesNotExist', [], undefined, undefined],
      [[r('k', 'In', 'a', 'b'), r('k', 'NotIn', 'a')], 'In', ['b'], undefined, undefined],
      [[r('k', 'In', 'a', 'b'), r('k', 'In', 'b', 'c')], 'In', ['b'], undefined, undefined],
      [[r('k', 'NotIn', 'a'), r('k', 'NotIn', 'b')], 'NotIn', ['a', 'b'], undefined, undefined],
      [[r('k', 'Gte', '4096'), r('k', 'DoesNotExist')], 'DoesNotExist', [], undefined, undefined],
      [[r('k', 'Exists'), r('k', 'NotIn', 'a')], 'NotIn', ['a'], undefined, undefined],
      [[r('k', 'Gt', '4'), r('k', 'Lt', '10')], 'Exists', [], '5', '9'],
      [[r('k', 'Gte', '10'), r('k', 'Lte', '4')], 'DoesNotExist', [], undefined, undefined],
      [[r('k', 'Gte', '5'), r('k', 'Lte', '5')], 'Exists', [], '5', '5'],
      [[r('k', 'In', '3', '5', '7', 'x'), r('k', 'Gt', '4')], 'In', ['5', '7'], undefined, undefined],
      [[r('k', 'NotIn', '7', 'x'), r('k', 'Gt', '4')], 'NotIn', ['7'], '5', undefined],
      [[r('k', 'NotIn', 'x'), r('k', 'Gt', '4')], 'Exists', [], '5', undefined],
      [[r('k', 'Gt', '9223372036854775807')], 'DoesNotExist', [], undefined, undefined],
      [[r('k', 'Lt', '0')], 'Exists', [], undefined, '-1'],
    ];
    for (const [written, op, values, gte, lte] of table) {
      const combined = combineRequirements(written);
      const label = written.map((w) => `${w.operator} ${JSON.stringify(w.values)}`).join(' + ');
      t.equal(combined.length, 1, `${label}: one requirement`);
      const [c] = combined;
      if (!c) continue;
      t.same(
        { op: combinedOperator(c), values: [...c.values].sort(), gte: c.gte?.toString(), lte: c.lte?.toString() },
        { op, values, gte, lte },
        label,
      );
      t.same(c.from, written, `${label}: remembers what was written`);
    }
  },
);

t.test(
  'a combined requirement judges missing keys by its operator and present values by its sets and bounds (Compatible, HasIntersection)',
  async (t) => {
    const r = (operator: string, ...values: string[]): RequirementSpec => ({ key: 'k', operator, values });
    // [written, node value, pass]
    const table: [RequirementSpec[], string | undefined, boolean][] = [
      [[r('In', 'a'), r('NotIn', 'a')], undefined, true],
      [[r('In', 'a'), r('NotIn', 'a')], 'a', false],
      [[r('Gte', '4096'), r('DoesNotExist')], undefined, true],
      [[r('Gte', '4096')], undefined, false],
      [[r('NotIn', '7', 'x'), r('Gt', '4')], undefined, true],
      [[r('NotIn', 'x'), r('Gt', '4')], undefined, false],
      [[r('NotIn', 'x'), r('Gt', '4')], '5', true],
      [[r('NotIn', '7'), r('Gt', '4')], '7', false],
      [[r('Gt', '4'), r('Lt', '10')], '9', true],
      [[r('Gt', '4'), r('Lt', '10')], '10', false],
      [[r('Gt', '4'), r('Lt', '10')], '07', true],
      [[r('In', '007', '7'), r('Gte', '7')], '007', true],
      [[r('In', '007', '7'), r('Gte', '7')], '07', false],
      [[r('Exists'), r('NotIn', 'a')], 'b', true],
      [[r('Exists'), r('NotIn', 'a')], undefined, true],
    ];
    for (const [written, value, expected] of table) {
      t.equal(
        allPass(combineRequirements(written), value === undefined ? {} : { k: value }),
        expected,
        `${written.map((w) => `${w.operator} ${JSON.stringify(w.values)}`).join(' + ')} vs ${JSON.stringify(value)}`,
      );
    }
  },
);

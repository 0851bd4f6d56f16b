import fc from 'fast-check';
import t from 'tap';
import {
  basicTimestamp,
  escapeJsonPointer,
  isValidLabelValue,
  rfc3339,
  toLabelValue,
} from '../../src/engine/labels.ts';

t.test('valid label values pass through unchanged', async (t) => {
  for (const v of ['cost-aware-compute-sp-global', 'cost-aware-ri-m5.xlarge-us-west-2', 'a', 'A_b.c-1', '']) {
    t.equal(toLabelValue(v), v);
  }
});

t.test('long or invalid names are shortened to a readable prefix plus a hash', async (t) => {
  const long = `cost-aware-ri-${'x'.repeat(300)}`;
  const v = toLabelValue(long);
  t.equal(v.length, 63);
  t.ok(v.startsWith('cost-aware-ri-xxx'));
  t.ok(isValidLabelValue(v));
  t.equal(toLabelValue(long), v, 'deterministic');
  t.ok(isValidLabelValue(toLabelValue('2026-01-12T15:30:00Z')), 'colons are replaced');
  t.ok(isValidLabelValue(toLabelValue('---')), 'nothing readable left: hash only');
});

t.test('property: any name up to 253 characters becomes a valid label value', async (t) => {
  const dnsName = fc.stringMatching(/^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$/);
  fc.assert(
    fc.property(
      fc.oneof(dnsName, fc.string({ maxLength: 253 }), fc.string({ unit: 'grapheme', maxLength: 253 })),
      (name) => {
        const v = toLabelValue(name);
        return isValidLabelValue(v) && v.length <= 63;
      },
    ),
    { numRuns: 5000 },
  );
  t.pass('5000 names checked');
});

t.test('property: distinct long names never collide', async (t) => {
  const prefix = 'cost-aware-ec2-sp-'.padEnd(60, 'z');
  fc.assert(
    fc.property(fc.uniqueArray(fc.stringMatching(/^[a-z0-9]{1,40}$/), { minLength: 2, maxLength: 200 }), (suffixes) => {
      const values = new Set(suffixes.map((s) => toLabelValue(prefix + s)));
      return values.size === suffixes.length;
    }),
    { numRuns: 200 },
  );
  t.pass('no collisions');
});

t.test('timestamps', async (t) => {
  const ms = Date.UTC(2026, 0, 12, 15, 30, 0, 123);
  t.equal(basicTimestamp(ms), '20260112T153000Z');
  t.ok(isValidLabelValue(basicTimestamp(ms)));
  t.equal(rfc3339(ms), '2026-01-12T15:30:00Z');
});

t.test('JSON Pointer escaping (RFC 6901)', async (t) => {
  t.equal(escapeJsonPointer('veneer.io/overlay-influenced'), 'veneer.io~1overlay-influenced');
  t.equal(escapeJsonPointer('a~b/c'), 'a~0b~1c');
});

// v1.NormalizedLabels (pkg/apis/v1/labels.go) as NewRequirementWithFlexibility and
// NewLabelRequirements apply it: deprecated keys are compared under their stable names, on the
// overlay's side and on the node's. (The differential test checks the table itself against
// Karpenter's.)
import t from 'tap';
import { labelValue, NORMALIZED_LABELS, normalizedKey } from '../../src/engine/normalize.ts';
import { allPass, combineRequirements } from '../../src/engine/requirements.ts';

t.test('every deprecated key reads as its stable key, on both sides', async (t) => {
  for (const [deprecated, stable] of NORMALIZED_LABELS) {
    t.equal(normalizedKey(deprecated), stable);
    t.equal(labelValue({ [deprecated]: 'v' }, stable), 'v', `a node with only ${deprecated}`);
    const [req] = combineRequirements([{ key: deprecated, operator: 'In', values: ['v'] }]);
    t.equal(req?.key, stable, `an overlay written with ${deprecated}`);
    t.ok(allPass(combineRequirements([{ key: deprecated, operator: 'In', values: ['v'] }]), { [stable]: 'v' }));
  }
  t.equal(normalizedKey('node.kubernetes.io/instance-type'), 'node.kubernetes.io/instance-type');
});

t.test(
  'a node with both keys: the same value is that value, different values are no value (NewLabelRequirements intersects them)',
  async (t) => {
    const both = (a: string, b: string) => ({
      'node.kubernetes.io/instance-type': a,
      'beta.kubernetes.io/instance-type': b,
    });
    t.equal(labelValue(both('m5.xlarge', 'm5.xlarge'), 'node.kubernetes.io/instance-type'), 'm5.xlarge');
    t.equal(labelValue(both('m5.xlarge', 'c5.large'), 'node.kubernetes.io/instance-type'), undefined);
    const reqs = (operator: string, values?: string[]) =>
      combineRequirements([{ key: 'beta.kubernetes.io/instance-type', operator, ...(values ? { values } : {}) }]);
    t.notOk(allPass(reqs('In', ['m5.xlarge']), both('m5.xlarge', 'c5.large')), 'In fails an empty intersection');
    t.notOk(allPass(reqs('Exists'), both('m5.xlarge', 'c5.large')), 'so does Exists');
    t.ok(allPass(reqs('NotIn', ['m5.xlarge']), both('m5.xlarge', 'c5.large')), 'NotIn passes it, as a missing key');
    t.ok(allPass(reqs('DoesNotExist'), both('m5.xlarge', 'c5.large')), 'DoesNotExist passes it');
  },
);

t.test('labels named like Object.prototype members are labels like any other', async (t) => {
  const [req] = combineRequirements([{ key: 'constructor', operator: 'Exists' }]);
  t.ok(req);
  if (!req) return;
  t.notOk(allPass([req], {}), 'a node without the label lacks it');
  t.ok(allPass([req], { constructor: 'x' }));
  t.equal(labelValue({}, 'toString'), undefined);
});

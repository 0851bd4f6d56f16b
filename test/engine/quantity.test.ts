// Resource quantities as Kubernetes writes them (k8s.io/apimachinery resource.Quantity).
import t from 'tap';
import { parseQuantity } from '../../src/engine/quantity.ts';

t.test('suffixes, exponents and plain numbers', async (t) => {
  t.equal(parseQuantity('1500m'), 1.5);
  t.equal(parseQuantity('2'), 2);
  t.equal(parseQuantity('512Mi'), 512 * 2 ** 20);
  t.equal(parseQuantity('1Gi'), 2 ** 30);
  t.equal(parseQuantity('1G'), 1e9);
  t.equal(parseQuantity('1e3'), 1000);
  t.equal(parseQuantity('.5'), 0.5);
  t.equal(parseQuantity(3), 3);
});

t.test('what is not a quantity is undefined', async (t) => {
  t.equal(parseQuantity(undefined), undefined);
  t.equal(parseQuantity(''), undefined);
  t.equal(parseQuantity('1Xi'), undefined);
  t.equal(parseQuantity('abc'), undefined);
});

// One shared object per equal value, bounded; and the NodeClaim views that rely on it.
import t from 'tap';
import { Interned } from '../../src/engine/interned.ts';
import { toNodeClaimView } from '../../src/engine/node.ts';
import { realNodeClaim } from '../../kit/real-node.ts';

t.test('an equal key gets the object made first; past its bound the table starts again', async (t) => {
  const table = new Interned<{ v: number }>(2);
  let made = 0;
  const of = (key: string) => table.of(key, () => ({ v: ++made }));
  const a = of('a');
  t.equal(of('a'), a, 'the same object for the same key');
  t.equal(made, 1, 'made once');
  of('b');
  const a2 = of('c') && of('a');
  t.not(a2, a, 'the table was emptied when a third key came: a is made again');
  t.equal(made, 4);
});

t.test('NodeClaims of one launch share their launch and labels; a different request does not', async (t) => {
  const shape = (i: number, cpu?: string) => {
    const claim = realNodeClaim({ name: `n-${i}`, index: i, instanceType: 'm5.large', claimName: `c-${i}` });
    if (cpu) (claim.spec.resources as { requests: Record<string, string> }).requests.cpu = cpu;
    return toNodeClaimView(JSON.parse(JSON.stringify(claim)));
  };
  const [one, two, other] = [shape(1), shape(2), shape(3, '3')];
  t.ok(one.launch, 'the launch is read');
  t.equal(two.launch, one.launch, 'one launch object for both');
  t.equal(two.labels, one.labels, 'one labels object for both');
  t.not(other.launch, one.launch, 'another request is another launch');
  t.same(other.launch?.requests?.cpu, 3, 'with its own request');
  t.equal(other.launch?.candidates, one.launch?.candidates, 'still sharing the candidate list');
  t.equal(one.providerID === two.providerID, false, 'what is a NodeClaim’s own stays its own');
  t.throws(() => {
    (one.labels as Record<string, string>).x = 'y';
  }, 'shared labels cannot be changed by a reader');
});

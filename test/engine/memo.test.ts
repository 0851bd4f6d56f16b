// The replay's one memo (src/engine/memo.ts): its key is every field of its input, objects by
// identity, so no field its work reads can be left out of it; functions are refused; each anchor
// keeps a bounded number of entries and takes them with it when it goes.
import t from 'tap';
import { idOf, keyOf, Memo, UNANCHORED } from '../../src/engine/memo.ts';

t.test('a key is every field present: primitives by value, sets by members, objects by identity', async (t) => {
  const a = { x: 1 };
  t.equal(keyOf({ n: 1, s: 'a', b: true }), 'n=1;s="a";b=true;');
  t.not(keyOf({ n: 1 }), keyOf({ n: '1' }), 'a number and a string that reads alike differ');
  t.equal(keyOf({ o: a }), `o=#${idOf(a)};`);
  t.not(keyOf({ o: a }), keyOf({ o: { x: 1 } }), 'an equal object made apart is another');
  t.equal(keyOf({ z: new Set(['a', 'b']) }), keyOf({ z: new Set(['a', 'b']) }), 'sets made apart, same members');
  t.equal(keyOf({ u: undefined, n: 1 }), keyOf({ n: 1 }), 'a field left undefined is a field absent');
  t.not(keyOf({ a: 1, b: 2 }), keyOf({ a: 12 }), 'fields are told apart by name');
  t.equal(idOf(a), idOf(a), 'one number per object');
});

t.test('a function in the input is refused: the memo is handed data, not a way to read it', async (t) => {
  t.throws(() => keyOf({ read: () => 1 }), /hand it the data its work reads/);
});

t.test('work is done once per anchor and key, again for a new key or another anchor', async (t) => {
  let calls = 0;
  const memo = new Memo<object, { n: number }, string>((anchor, { n }) => {
    calls++;
    return `${idOf(anchor)}:${n}`;
  }, 2);
  const a = {};
  const b = {};
  t.equal(memo.of(a, { n: 1 }), `${idOf(a)}:1`);
  t.equal(memo.of(a, { n: 1 }), `${idOf(a)}:1`);
  t.equal(calls, 1, 'found again');
  memo.of(a, { n: 2 });
  memo.of(b, { n: 1 });
  t.equal(calls, 3, 'another key, another anchor');
  const over = memo.over({ n: 1 });
  t.equal(over(a), `${idOf(a)}:1`);
  t.equal(over(b), `${idOf(b)}:1`);
  t.equal(calls, 3, 'a key made once for many anchors finds the same entries');
  memo.of(a, { n: 3 });
  t.equal(calls, 4, 'past its bound an anchor starts again');
  memo.of(a, { n: 1 });
  t.equal(calls, 5, 'what it held before is gone');
  t.equal(memo.of(UNANCHORED, { n: 9 }), `${idOf(UNANCHORED)}:9`, 'a memo of no anchor in particular');
});

t.test('an undefined result is kept like any other', async (t) => {
  let calls = 0;
  const memo = new Memo<object, object, undefined>(() => {
    calls++;
    return undefined;
  }, 1);
  memo.of(UNANCHORED, {});
  memo.of(UNANCHORED, {});
  t.equal(calls, 1);
});

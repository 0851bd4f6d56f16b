// The churn an overlay caused: a recorded node Karpenter's disruption removed, told by what has
// become of the overlay its record names (src/engine/disruption/churn.ts), as the counter labels it
// (test/controllers/disruptions/counter.test.ts) and a replacement's record keeps it.
import t from 'tap';
import { OverlayIndex, overlayStateAtDisruption, parseSelector, recordAtMark } from '../../../src/engine/index.ts';
import { toldOf } from '../../../src/engine/decided-node.ts';
import { churnOf } from '../../../src/engine/disruption/churn.ts';
import { keys, overlay, RI, story } from './recorded.ts';

const readStory = (s: string) => JSON.parse(s);

t.test('the overlay a record names: counting, changed or gone', async (t) => {
  const same = overlay({ price: '0.00' });
  t.equal(overlayStateAtDisruption(same, true, readStory(story())), 'counting', 'same terms, still counts');
  t.equal(overlayStateAtDisruption(same, true, undefined), 'counting', 'no story: it exists and counts');
  t.equal(overlayStateAtDisruption(undefined, false, readStory(story())), 'gone', 'deleted');
  t.equal(
    overlayStateAtDisruption(overlay({ price: '0.00', deleting: true }), true, undefined),
    'gone',
    'being deleted',
  );
  t.equal(
    overlayStateAtDisruption(same, false, readStory(story())),
    'changed',
    'no longer counts (unselected, invalid)',
  );
  t.equal(overlayStateAtDisruption(overlay({ price: '0.01' }), true, readStory(story())), 'changed', 'another price');
  t.equal(
    overlayStateAtDisruption(overlay({ price: '0.00', weight: 5 }), true, readStory(story())),
    'changed',
    'another weight',
  );
  t.equal(
    overlayStateAtDisruption(
      overlay({ priceAdjustment: '-10%' }),
      true,
      readStory(story({ priceAdjustment: '-10%', price: undefined })),
    ),
    'changed',
    'a price adjustment where the story had a price: other terms',
  );
  const adjusted = JSON.parse(story({ priceAdjustment: '-10%' }));
  delete adjusted.price;
  t.equal(
    overlayStateAtDisruption(overlay({ priceAdjustment: '-10%' }), true, adjusted),
    'counting',
    'the same adjustment',
  );
  t.equal(
    overlayStateAtDisruption(overlay({ price: '0.01' }), true, readStory(story({ overlay: 'another-overlay' }))),
    'counting',
    'a story about another overlay (a label-value collision) is not compared',
  );
});

t.test("the churn a replacement's record keeps: its replaced nodes' records, by overlay and state", async (t) => {
  const at = Date.parse('2026-12-03T11:00:00Z');
  const policy = { selector: parseSelector(''), requireOverlayReady: false };
  // As a mark keeps a node's record (recordAtMark): an influenced node's overlay label and story terms.
  const recorded = (o: { overlay?: string; influenced?: boolean; price?: string } = {}) =>
    recordAtMark(
      { [keys.influenced]: o.influenced === false ? 'false' : 'true', [keys.matchingOverlay]: o.overlay ?? RI },
      toldOf(
        story({ ...(o.price !== undefined ? { price: o.price } : {}), ...(o.overlay ? { overlay: o.overlay } : {}) }),
      ),
      keys,
    );
  const none = OverlayIndex.ofCurrent([], policy, at - 60_000);
  t.same(
    churnOf([recorded(), recorded(), undefined, recorded({ influenced: false })], none, at),
    [{ overlay: RI, state: 'gone', nodes: 2 }],
    'the overlay deleted: two recorded nodes; an unknown node and one not influenced are not churn',
  );
  const same = OverlayIndex.ofCurrent([overlay({ price: '0.00' })], policy, at - 60_000);
  t.same(churnOf([recorded()], same, at), [], 'on the same terms: no churn');
  t.same(
    churnOf([recorded({ price: '0.01' }), recorded()], same, at),
    [{ overlay: RI, state: 'changed', nodes: 1 }],
    'the record priced at 0.01 and the overlay now at 0.00: changed',
  );
  const unselected = OverlayIndex.ofCurrent(
    [overlay({ price: '0.00' })],
    { selector: parseSelector('app.kubernetes.io/managed-by=veneer'), requireOverlayReady: false },
    at - 60_000,
  );
  t.same(
    churnOf([recorded()], unselected, at),
    [{ overlay: RI, state: 'changed', nodes: 1 }],
    'no longer selected: changed',
  );
  t.same(
    churnOf([recorded({ overlay: 'other' }), recorded()], none, at),
    [
      { overlay: 'other', state: 'gone', nodes: 1 },
      { overlay: RI, state: 'gone', nodes: 1 },
    ],
    'one entry per overlay',
  );
});

// The end of a streaming list's initial events, and how an apiserver says it serves none.
import t from 'tap';
import { ApiError } from '../../src/kube/client.ts';
import { InitialEvents, StreamingListRefused, streamingListRefused } from '../../src/kube/initial-events.ts';

const bookmark = (annotations?: Record<string, string>) => ({
  kind: 'PartialObjectMetadata',
  metadata: { resourceVersion: '42', ...(annotations ? { annotations } : {}) },
});

t.test('the annotated bookmark closes the list once; a plain bookmark first is no streaming list', async (t) => {
  const initial = new InitialEvents();
  t.equal(initial.bookmark(bookmark({ 'k8s.io/initial-events-end': 'true' })), true, 'the list is complete');
  t.equal(initial.done, true);
  t.equal(initial.bookmark(bookmark()), false, 'later bookmarks are only bookmarks');
  for (const first of [bookmark(), undefined]) {
    const refusal = (() => {
      try {
        new InitialEvents().bookmark(first);
      } catch (err) {
        return err;
      }
    })();
    t.type(refusal, StreamingListRefused, 'a bookmark before any end of the list: refused');
  }
});

t.test(
  'refusals: 422 (the WatchList gate off), 400, or a plain watch; not a 403, a 410 or a dropped connection',
  async (t) => {
    const status = (code: number) => new ApiError(code, JSON.stringify({ message: 'x' }));
    t.ok(streamingListRefused(status(422)));
    t.ok(streamingListRefused(status(400)));
    t.ok(streamingListRefused(new StreamingListRefused('plain watch')));
    t.notOk(streamingListRefused(status(403)));
    t.notOk(streamingListRefused(status(410)));
    t.notOk(streamingListRefused(new Error('socket hang up')));
  },
);

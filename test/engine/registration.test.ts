// Karpenter's registration copies the NodeClaim's labels onto the node; where a NodePool template
// carried record keys, the record the webhook wrote is put back in that same update, and only then.
import t from 'tap';
import { recordKeys } from '../../src/engine/index.ts';
import { isRegistration, restoreAtRegistration } from '../../src/engine/registration.ts';

const keys = recordKeys('veneer.io');
const STORY = JSON.stringify({ influenced: true, overlay: 'ri', decidedBy: 'webhook', basis: 'exact' });
const recorded = {
  labels: {
    'karpenter.sh/nodepool': 'default',
    'veneer.io/overlay-influenced': 'true',
    'veneer.io/matching-overlay': 'ri',
    'veneer.io/opt-out': 'false',
  },
  annotations: { 'veneer.io/overlay-decision': STORY, 'example.com/other': 'x' },
};
const registering = (labels: Record<string, string>) => ({
  labels: { ...recorded.labels, 'karpenter.sh/registered': 'true', ...labels },
  annotations: recorded.annotations,
});

/** RFC 6902, as far as the webhook's patches go: add, replace and remove in the metadata maps. */
function apply(
  md: { labels: Record<string, string>; annotations: Record<string, string> },
  ops: ReturnType<typeof restoreAtRegistration>,
) {
  const out = { labels: { ...md.labels }, annotations: { ...md.annotations } } as Record<
    string,
    Record<string, string>
  >;
  for (const op of ops) {
    const [, , field, key] = op.path.split('/') as [string, string, string, string | undefined];
    const k = key?.replaceAll('~1', '/').replaceAll('~0', '~');
    if (k === undefined) out[field] = op.op === 'remove' ? {} : (op.value as Record<string, string>);
    else if (op.op === 'remove') delete out[field]![k];
    else out[field]![k] = op.value as string;
  }
  return out;
}

t.test('the registration update: the node becomes registered', async (t) => {
  t.ok(isRegistration({}, { 'karpenter.sh/registered': 'true' }));
  t.ok(isRegistration(undefined, { 'karpenter.sh/registered': 'true' }));
  t.notOk(
    isRegistration({ 'karpenter.sh/registered': 'true' }, { 'karpenter.sh/registered': 'true' }),
    'registered before',
  );
  t.notOk(isRegistration({}, {}), 'not registered after');
  t.notOk(isRegistration({}, { 'karpenter.sh/registered': 'false' }));
});

t.test(
  "a template's record keys copied over the watcher's record are put back, and its foreign keys removed",
  async (t) => {
    const after = registering({ 'veneer.io/overlay-influenced': 'false', 'veneer.io/team': 'payments' });
    const ops = restoreAtRegistration(recorded, after, keys);
    const restored = apply(after, ops);
    t.match(restored.labels, { 'veneer.io/overlay-influenced': 'true', 'veneer.io/matching-overlay': 'ri' });
    t.notOk('veneer.io/team' in restored.labels!, 'a key of the namespace the watcher did not write: gone');
    t.equal(restored.labels!['karpenter.sh/registered'], 'true', "the registration's own change stays");
    t.equal(restored.labels!['veneer.io/opt-out'], 'false', "the opt-out is the launcher's: untouched");
    t.equal(restored.annotations!['veneer.io/overlay-decision'], STORY);
    const storyRewritten = { ...registering({}), annotations: { 'veneer.io/overlay-decision': '{"forged":true}' } };
    t.equal(
      apply(storyRewritten, restoreAtRegistration(recorded, storyRewritten, keys)).annotations![
        'veneer.io/overlay-decision'
      ],
      STORY,
      'the story too',
    );
  },
);

t.test('nothing to put back', async (t) => {
  t.same(restoreAtRegistration(recorded, registering({}), keys), [], 'the record unchanged by the registration');
  const later = { ...registering({ 'veneer.io/overlay-influenced': 'false' }) };
  t.same(
    restoreAtRegistration(
      { ...recorded, labels: { ...recorded.labels, 'karpenter.sh/registered': 'true' } },
      later,
      keys,
    ),
    [],
    'not the registration: the guard decides',
  );
  const notOurs = { labels: { 'veneer.io/overlay-influenced': 'false' }, annotations: {} };
  t.same(
    restoreAtRegistration(notOurs, registering({ 'veneer.io/overlay-influenced': 'true' }), keys),
    [],
    "no story the watcher can read before: no record of the watcher's to put back",
  );
});

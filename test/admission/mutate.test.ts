// The mutating adapter's answers without a patch: each reason, counted apart.
import t from 'tap';
import { recordKeys } from '../../src/engine/index.ts';
import { AWS_KEYS } from '../../src/engine/providers.ts';
import { mutate, type MutateDeps } from '../../src/admission/mutate.ts';
import type { AdmissionReview } from '../../src/admission/review.ts';
import { karpenterNode, reservedInstance } from '../../kit/veneer.ts';
import { indexWith, T0 } from '../engine/fixtures.ts';

const review = (object: object, operation = 'CREATE'): AdmissionReview => ({
  apiVersion: 'admission.k8s.io/v1',
  kind: 'AdmissionReview',
  request: {
    uid: 'u1',
    kind: { group: '', version: 'v1', kind: 'Node' },
    operation,
    object: object as Record<string, unknown>,
  },
});
const deps = (over: Partial<MutateDeps> = {}): MutateDeps => ({
  index: indexWith([]),
  nodeClaims: { byName: () => undefined, byProviderID: () => undefined },
  existingNode: () => undefined,
  ready: () => true,
  held: () => false,
  settings: { keys: recordKeys('veneer.io'), gracePeriodMs: 60_000, provider: AWS_KEYS },
  now: () => T0,
  ...over,
});
const registered = karpenterNode({ name: 'n1', instanceType: 'm5.xlarge' });

t.test('each reason for answering without a patch', async (t) => {
  t.equal(mutate(review(registered), deps({ ready: () => false }), T0 + 500).outcome, 'not_synced');
  t.equal(mutate(review(registered), deps({ held: () => true }), T0 + 500).outcome, 'held', 'records held: no patch');
  t.equal(mutate(review(registered), deps(), T0 - 1).outcome, 'deadline', 'queued past the deadline before deciding');
  let clock = T0;
  const slow = deps({ now: () => (clock += 400) });
  t.equal(
    mutate(review(registered), slow, T0 + 1000).outcome,
    'deadline',
    'past the deadline after deciding: no patch',
  );
  t.equal(
    mutate(review(registered), deps({ existingNode: () => ({ name: 'n1', labels: {} }) }), T0 + 500).outcome,
    'exists',
  );
  t.equal(mutate(review(registered, 'DELETE'), deps(), T0 + 500).outcome, 'ignored');
  t.equal(
    mutate(review(karpenterNode({ name: 'n2', capacityType: 'spot' })), deps(), T0 + 500).outcome,
    'out_of_scope',
  );
  const withOverlay = deps({ index: indexWith([reservedInstance('m5.xlarge', 'us-west-2')]) });
  t.match(mutate(review(karpenterNode({ name: 'n3', stage: 'kubelet' })), withOverlay, T0 + 500), {
    outcome: 'undetermined',
    detail: /not yet on the node/,
  });
  const recorded = karpenterNode({ name: 'n4', extraLabels: { 'veneer.io/overlay-influenced': 'true' } });
  t.equal(
    mutate(review(recorded, 'UPDATE'), deps(), T0 + 500).outcome,
    'recorded',
    'a reinvocation gets no second patch',
  );
  t.same(
    mutate(review(registered), deps({ ready: () => false }), T0 + 500).answer.response,
    { uid: 'u1', allowed: true },
    'allowed, uid echoed, no patch',
  );
});

t.test('a decided node gets a base64 JSON Patch', async (t) => {
  const r = mutate(review(registered), deps(), T0 + 500);
  t.equal(r.outcome, 'patched');
  const ops = JSON.parse(Buffer.from(r.answer.response.patch ?? '', 'base64').toString()) as {
    op: string;
    path: string;
  }[];
  t.ok(
    ops.every(
      (o) =>
        o.op === 'add' && (o.path.startsWith('/metadata/labels/veneer.io~1') || o.path === '/metadata/annotations'),
    ),
  );
  t.equal(r.answer.response.patchType, 'JSONPatch');
});

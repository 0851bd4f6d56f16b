// The record-protecting webhook's matchConditions are its own test: the apiserver must call it
// for every update validate() would deny (else the record goes unprotected) and for no other.
import t from 'tap';
import { recordKeys } from '../../src/engine/index.ts';
import { validatingMatchConditions } from '../../src/engine/scope.ts';
import { validate } from '../../src/admission/validate.ts';
import type { AdmissionReview } from '../../src/admission/review.ts';
import { calls } from '../support/cel.ts';

type Meta = { labels?: Record<string, string>; annotations?: Record<string, string> };

const review = (oldMeta: Meta, meta: Meta): AdmissionReview => ({
  apiVersion: 'admission.k8s.io/v1',
  kind: 'AdmissionReview',
  request: {
    uid: 'u1',
    kind: { group: '', version: 'v1', kind: 'Node' },
    operation: 'UPDATE',
    userInfo: { username: 'someone' },
    object: { metadata: { name: 'n', ...meta } },
    oldObject: { metadata: { name: 'n', ...oldMeta } },
  },
});

/** A field's states before or after an update: absent, empty, or with one key of interest at one of two values. */
function fieldStates(key: string): (Record<string, string> | undefined)[] {
  return [undefined, {}, { [key]: 'a' }, { [key]: 'b' }, { [key]: 'a', 'example.com/other': 'x' }];
}

for (const ns of ['veneer.io', 'nodes.example.com']) {
  t.test(`the conditions call the webhook exactly for the updates it denies (${ns})`, async (t) => {
    const keys = recordKeys(ns);
    const conditions = validatingMatchConditions(keys);
    let denials = 0;
    let cases = 0;
    for (const label of [keys.influenced, keys.labeledAt, 'karpenter.sh/nodepool'])
      for (const annotation of [keys.decisionAnnotation, 'example.com/note'])
        for (const [oldLabels, labels] of fieldStates(label).flatMap((a) => fieldStates(label).map((b) => [a, b])))
          for (const [oldAnnotations, annotations] of fieldStates(annotation).flatMap((a) =>
            fieldStates(annotation).map((b) => [a, b]),
          )) {
            const oldMeta: Meta = {
              ...(oldLabels ? { labels: oldLabels } : {}),
              ...(oldAnnotations ? { annotations: oldAnnotations } : {}),
            };
            const meta: Meta = { ...(labels ? { labels } : {}), ...(annotations ? { annotations } : {}) };
            const denied =
              validate(review(oldMeta, meta), {
                keys,
                selfUsername: () => 'watcher',
                allowedUsers: [],
                allowedGroups: [],
              }).outcome === 'denied';
            const called = calls(conditions, {
              object: { metadata: { name: 'n', ...meta } },
              oldObject: { metadata: { name: 'n', ...oldMeta } },
            });
            cases++;
            if (denied) denials++;
            if (called !== denied)
              t.fail(
                `${called ? 'called' : 'not called'} for ${JSON.stringify(oldMeta)} -> ${JSON.stringify(meta)}, which validate() ${denied ? 'denies' : 'allows'}`,
              );
          }
    t.ok(denials > 0 && denials < cases, `${denials} of ${cases} updates denied`);
  });
}

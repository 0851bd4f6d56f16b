// The record's guard as CEL (src/engine/guard.ts): what the policy says, for any label namespace
// and identities. The real apiserver evaluates it in test/apiserver/record-guard.test.ts (the side
// door, the identities allowed, the watcher down); the chart renders the same text
// (test/packaging/chart.test.ts).
import t from 'tap';
import { recordKeys } from '../../src/engine/index.ts';
import { recordGuard } from '../../src/engine/guard.ts';

t.test('the identities allowed are exempt: users by name, groups by membership', async (t) => {
  const g = recordGuard(recordKeys('veneer.io'), {
    users: ['system:serviceaccount:veneer-system:vnw', "o'brien", 'back\\slash'],
    groups: ['ops'],
  });
  t.same(g.matchConditions, [
    {
      name: 'not-an-allowed-user',
      expression:
        "!(request.userInfo.username in ['system:serviceaccount:veneer-system:vnw', 'o\\'brien', 'back\\\\slash'])",
    },
    { name: 'not-in-an-allowed-group', expression: "!request.userInfo.groups.exists(g, g in ['ops'])" },
  ]);
  t.equal(
    recordGuard(recordKeys('veneer.io'), { users: ['w'], groups: [] }).matchConditions.length,
    1,
    'no group condition when no group is allowed',
  );
});

t.test("the record is every label of the watcher's namespace but the opt-out, and the story", async (t) => {
  const g = recordGuard(recordKeys('nodes.example.com'), { users: ['w'], groups: [] });
  const before = g.variables.find((v) => v.name === 'before')?.expression ?? '';
  t.match(before, /k\.startsWith\('nodes\.example\.com\/'\) && k != 'nodes\.example\.com\/opt-out'/);
  t.match(g.variables.find((v) => v.name === 'changed')?.expression ?? '', /!\(k in variables\.after\)/, 'removed');
  t.notMatch(
    g.variables.find((v) => v.name === 'changed')?.expression ?? '',
    /variables\.after\.filter/,
    "added keys are not changes: the webhook adds a record to the kubelet's and Karpenter's own updates",
  );
  t.match(g.validations[1]?.expression ?? '', /'nodes\.example\.com\/overlay-decision'/);
  t.match(g.validations[0]?.messageExpression ?? '', /variables\.changed\.join/, 'the message names the keys');
});

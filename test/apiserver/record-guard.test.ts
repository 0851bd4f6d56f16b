// The record's guard, where Kubernetes decides it: a real apiserver refuses to alter or remove a
// record's labels or its story by anyone but the watcher and the identities the operator allows,
// through the node and through its status subresource alike (the kubelet itself rewrites labels
// through nodes/status), whether the watcher runs or not.
import t from 'tap';
import * as k8s from '@kubernetes/client-node';
import { reservedInstance } from '../../kit/veneer.ts';
import { KarpenterSim, mergePatch } from '../../kit/karpenter-sim.ts';
import { startWatcherEnv, WATCHER_USER } from '../../kit/watcher-env.ts';

const KUBELET = 'system:node:ip-10-0-9-1';
const env = await startWatcherEnv({
  users: [
    { name: 'alice', groups: ['ops'] },
    // As the kubelet of ip-10-0-9-1 authenticates (its client certificate's CN and O).
    { name: KUBELET, groups: ['system:nodes'] },
    { name: 'carol', groups: ['ops'] },
    { name: 'dave', groups: ['record-admins'] },
  ],
  guard: { allowedUsers: ['carol'], allowedGroups: ['record-admins'] },
});
t.teardown(() => env.stop());
const { admin, watcher, cp } = env;
const sim = new KarpenterSim(admin);
const custom = admin.makeApiClient(k8s.CustomObjectsApi);
await custom.createClusterCustomObject({
  group: 'karpenter.sh',
  version: 'v1alpha1',
  plural: 'nodeoverlays',
  body: reservedInstance('m5.xlarge', 'us-west-2'),
});
for (let i = 0; watcher.caches!.overlays.index.size < 1 && i < 100; i++) await new Promise((r) => setTimeout(r, 50));
await new Promise((r) => setTimeout(r, 1000));

// Rights as each identity has them in a cluster: the kubelet its node and its status (the Node
// authorizer grants a kubelet its own node; this apiserver authorizes by RBAC alone, so the
// system:node ClusterRole stands in), a node agent's ServiceAccount, the users.
const rbac = admin.makeApiClient(k8s.RbacAuthorizationV1Api);
await rbac.createClusterRole({
  body: {
    metadata: { name: 'node-editor' },
    rules: [{ apiGroups: [''], resources: ['nodes', 'nodes/status'], verbs: ['get', 'patch', 'update'] }],
  },
});
const bind = (name: string, role: string, subject: k8s.RbacV1Subject) =>
  rbac.createClusterRoleBinding({
    body: {
      metadata: { name },
      roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: role },
      subjects: [subject],
    },
  });
await bind('kubelet', 'system:node', { kind: 'User', name: KUBELET, apiGroup: 'rbac.authorization.k8s.io' });
await bind('ops-node-editor', 'node-editor', { kind: 'Group', name: 'ops', apiGroup: 'rbac.authorization.k8s.io' });
await bind('admins-node-editor', 'node-editor', {
  kind: 'Group',
  name: 'record-admins',
  apiGroup: 'rbac.authorization.k8s.io',
});
await bind('agent-node-editor', 'node-editor', { kind: 'ServiceAccount', name: 'labeler', namespace: 'agents' });

await sim.createNodeClaim({ name: 'ip-10-0-9-1', claimName: 'guard-claim', instanceType: 'm5.xlarge' });
for (let i = 0; !watcher.caches!.nodeClaims.byName('guard-claim') && i < 100; i++)
  await new Promise((r) => setTimeout(r, 50));
const created = await sim.kubeletCreate({ name: 'ip-10-0-9-1' });
t.equal(created.metadata?.labels?.['veneer.io/overlay-influenced'], 'true', 'the node has its record');

const as = async (identity: k8s.KubeConfig | string) =>
  (typeof identity === 'string' ? cp.userKubeConfig(identity) : identity).makeApiClient(k8s.CoreV1Api);
/** PATCH the node, or its status, as `api`: `allowed`, or the status code and message. */
const patch = (api: k8s.CoreV1Api, body: object, subresource: 'node' | 'status') =>
  (subresource === 'status'
    ? api.patchNodeStatus({ name: 'ip-10-0-9-1', body }, mergePatch)
    : api.patchNode({ name: 'ip-10-0-9-1', body }, mergePatch)
  ).then(
    () => 'allowed',
    (e: { code?: number; body?: string }) => `${e.code} ${e.body}`,
  );
const forged = { metadata: { labels: { 'veneer.io/overlay-influenced': 'false' } } };
const influenced = async () =>
  (await (await as(admin)).readNode({ name: 'ip-10-0-9-1' })).metadata?.labels?.['veneer.io/overlay-influenced'];

t.test('through nodes/status, the side door: the kubelet, a node agent and system:masters are refused', async (t) => {
  const agent = await cp.serviceAccountKubeConfig('agents', 'labeler');
  for (const [who, api] of [
    ['the kubelet of its own node', await as(KUBELET)],
    ["a node agent's ServiceAccount", await as(agent)],
    ['system:masters', await as(admin)],
  ] as const) {
    t.match(await patch(api, forged, 'status'), /^403 .*veneer\.io\/overlay-influenced/, who);
  }
  t.equal(await influenced(), 'true', 'the record stands');
});

t.test('through the node itself: alter or remove a record key; other labels stay editable', async (t) => {
  const alice = await as('alice');
  t.match(await patch(alice, forged, 'node'), /^403 .*veneer\.io\/overlay-influenced/);
  t.match(
    await patch(alice, { metadata: { labels: { 'veneer.io/matching-overlay': null } } }, 'node'),
    /^403 .*veneer\.io\/matching-overlay/,
    'removed',
  );
  // Adding is not refused: the webhook adds a record inline to the kubelet's and Karpenter's own
  // updates, which the policy sees as theirs. Once there, a key is guarded.
  t.equal(await patch(alice, { metadata: { labels: { 'veneer.io/note': 'mine' } } }, 'node'), 'allowed');
  t.match(
    await patch(alice, { metadata: { labels: { 'veneer.io/note': 'theirs' } } }, 'node'),
    /^403 .*veneer\.io\/note/,
    'a key of the namespace, once added',
  );
  t.match(
    await patch(alice, { metadata: { annotations: { 'veneer.io/overlay-decision': '{}' } } }, 'node'),
    /^403 .*veneer\.io\/overlay-decision/,
    'the story',
  );
  t.equal(await patch(alice, { metadata: { labels: { team: 'payments' } } }, 'node'), 'allowed');
  t.equal(
    await patch(alice, { metadata: { labels: { 'veneer.io/opt-out': 'true' } } }, 'node'),
    'allowed',
    'the opt-out label is an input, not a record',
  );
  t.equal(await influenced(), 'true');
});

t.test('the watcher and the identities the operator allows may change it', async (t) => {
  t.equal(
    await patch(await as(WATCHER_USER), { metadata: { labels: { 'veneer.io/region': 'us-west-2' } } }, 'node'),
    'allowed',
    "the watcher's own identity",
  );
  t.equal(
    await patch(await as('carol'), { metadata: { labels: { 'veneer.io/region': 'eu-west-1' } } }, 'status'),
    'allowed',
    'a user allowed by name (recordGuard.allowedUsers)',
  );
  t.equal(
    await patch(await as('dave'), { metadata: { labels: { 'veneer.io/region': null } } }, 'node'),
    'allowed',
    'a member of an allowed group (recordGuard.allowedGroups)',
  );
});

/** Record keys a NodePool's template would give: the kubelet's --node-labels, then the NodeClaim's labels at registration. */
const template = { 'veneer.io/overlay-influenced': 'false', 'veneer.io/matching-overlay': 'from-the-template' };

t.test(
  "Karpenter's registration copies a template's record keys again: the webhook puts the record back",
  async (t) => {
    await sim.createNodeClaim({ name: 'ip-10-0-9-2', claimName: 'template-claim', instanceType: 'm5.xlarge' });
    for (let i = 0; !watcher.caches!.nodeClaims.byName('template-claim') && i < 100; i++)
      await new Promise((r) => setTimeout(r, 50));
    const created = await sim.kubeletCreate({ name: 'ip-10-0-9-2', extraLabels: template });
    t.equal(
      created.metadata?.labels?.['veneer.io/overlay-influenced'],
      'true',
      "at CREATE the watcher's decision replaces them",
    );
    const registered = await sim.register({
      name: 'ip-10-0-9-2',
      claimName: 'template-claim',
      instanceType: 'm5.xlarge',
      extraLabels: template,
    });
    t.match(
      registered.metadata?.labels,
      {
        'karpenter.sh/registered': 'true',
        'veneer.io/overlay-influenced': 'true',
        'veneer.io/matching-overlay': 'cost-aware-ri-m5.xlarge-us-west-2',
      },
      "registered, with the record the watcher wrote, not the template's",
    );
    const restored = (await watcher.metrics.admissionRequests.get()).values.find(
      (v) => v.labels.outcome === 'restored' && v.labels.dry_run === 'false',
    );
    t.equal(restored?.value, 1, 'put back once, in the registration update itself');
  },
);

t.test('the guard holds while the watcher is down, and never refuses a registration', async (t) => {
  await watcher.stop();
  t.match(await patch(await as(admin), forged, 'status'), /^403 .*veneer\.io\/overlay-influenced/);
  t.match(await patch(await as('alice'), forged, 'node'), /^403 .*veneer\.io\/overlay-influenced/);
  t.equal(await influenced(), 'true');
  // No webhook to restore it: the template's keys arrive at CREATE (fail open) and again at
  // registration, and the guard lets Karpenter register the node.
  await sim.createNodeClaim({ name: 'ip-10-0-9-3', claimName: 'template-claim-3', instanceType: 'm5.xlarge' });
  await sim.kubeletCreate({ name: 'ip-10-0-9-3', extraLabels: template });
  const registered = await sim.register({
    name: 'ip-10-0-9-3',
    claimName: 'template-claim-3',
    instanceType: 'm5.xlarge',
    extraLabels: { ...template, 'veneer.io/overlay-influenced': 'true' },
  });
  t.equal(registered.metadata?.labels?.['karpenter.sh/registered'], 'true', 'registered, record keys and all');
  t.match(
    await patch(await as('alice'), forged, 'node'),
    /^403 /,
    'only the registration: any other change is refused as before',
  );
});

// Proves the test control plane is a real one: real storage, real CRD validation, real RBAC,
// real watches and real ServiceAccount tokens.
import { existsSync } from 'node:fs';
import t from 'tap';
import * as k8s from '@kubernetes/client-node';
import { ControlPlane } from '../../kit/control-plane.ts';
import { installKarpenterCRDs } from '../../kit/karpenter-crds.ts';

const cp = await ControlPlane.start({ users: [{ name: 'developer', groups: ['developers'] }] });
t.teardown(() => cp.stop());
const admin = cp.adminKubeConfig();
await installKarpenterCRDs(cp);
const core = admin.makeApiClient(k8s.CoreV1Api);
const custom = admin.makeApiClient(k8s.CustomObjectsApi);
const overlays = { group: 'karpenter.sh', version: 'v1alpha1', plural: 'nodeoverlays' };

function overlay(name: string, spec: Record<string, unknown>) {
  return { apiVersion: 'karpenter.sh/v1alpha1', kind: 'NodeOverlay', metadata: { name }, spec };
}
const onDemand = [{ key: 'karpenter.sh/capacity-type', operator: 'In', values: ['on-demand'] }];

t.test('a Node with Karpenter labels is stored and read back', async (t) => {
  const labels = {
    'karpenter.sh/nodepool': 'default',
    'karpenter.sh/capacity-type': 'on-demand',
    'node.kubernetes.io/instance-type': 'm5.xlarge',
  };
  await core.createNode({
    body: { metadata: { name: 'ip-10-0-1-1.ec2.internal', labels }, spec: { providerID: 'aws:///us-west-2a/i-0abc' } },
  });
  const node = await core.readNode({ name: 'ip-10-0-1-1.ec2.internal' });
  t.same(node.metadata?.labels, { ...labels });
  t.equal(node.spec?.providerID, 'aws:///us-west-2a/i-0abc');
  t.ok(node.metadata?.resourceVersion, 'etcd assigned a resourceVersion');
});

t.test('a NodeOverlay is created, listed and watched', async (t) => {
  let resolveSeen: (phase: string) => void = () => {};
  const seen = new Promise<string>((resolve) => (resolveSeen = resolve));
  const req = await new k8s.Watch(admin).watch(
    '/apis/karpenter.sh/v1alpha1/nodeoverlays',
    {},
    (phase, obj: { metadata: { name: string } }) => {
      if (phase === 'ADDED' && obj.metadata.name === 'cost-aware-compute-sp-global') resolveSeen(phase);
    },
    () => {},
  );
  t.teardown(() => req.abort());
  await custom.createClusterCustomObject({
    ...overlays,
    body: overlay('cost-aware-compute-sp-global', {
      price: '0.00',
      weight: 10,
      requirements: [...onDemand, { key: 'karpenter.k8s.aws/instance-family', operator: 'Exists' }],
    }),
  });
  t.equal(await seen, 'ADDED', 'the watch delivered the ADDED event');
  const list = (await custom.listClusterCustomObject(overlays)) as { items: { metadata: { name: string } }[] };
  t.same(
    list.items.map((i) => i.metadata.name),
    ['cost-aware-compute-sp-global'],
  );
});

async function rejection(body: object): Promise<string> {
  try {
    await custom.createClusterCustomObject({ ...overlays, body });
  } catch (err) {
    const e = err as { code?: number; body?: string };
    return `${e.code} ${e.body}`;
  }
  return 'accepted';
}

t.test('the apiserver rejects NodeOverlays that Karpenter rejects', async (t) => {
  t.match(
    await rejection(overlay('unsigned', { priceAdjustment: '0%', requirements: onDemand })),
    /^422 .*spec\.priceAdjustment.*should match/,
  );
  t.match(
    await rejection(overlay('both', { price: '0.10', priceAdjustment: '-10%', requirements: onDemand })),
    /^422 .*cannot set both 'price' and 'priceAdjustment'/,
  );
  t.match(
    await rejection(overlay('heavy', { price: '1', weight: 10001, requirements: onDemand })),
    /^422 .*spec\.weight.*less than or equal to 10000/,
  );
  t.match(
    await rejection(
      overlay('gt-two', {
        price: '1',
        requirements: [{ key: 'karpenter.k8s.aws/instance-cpu', operator: 'Gt', values: ['2', '4'] }],
      }),
    ),
    /^422 .*must have a single positive integer value/,
  );
  t.match(
    await rejection(overlay('in-empty', { price: '1', requirements: [{ key: 'a/b', operator: 'In', values: [] }] })),
    /^422 .*operator 'In' must have a value defined/,
  );
  t.match(
    await rejection(
      overlay('hostname', { price: '1', requirements: [{ key: 'kubernetes.io/hostname', operator: 'Exists' }] }),
    ),
    /^422 .*label \\"kubernetes.io\/hostname\\" is restricted/,
  );
  t.match(
    await rejection(overlay('bad-op', { price: '1', requirements: [{ key: 'a/b', operator: 'Like', values: ['x'] }] })),
    /^422 .*Unsupported value: \\"Like\\"/,
  );
  t.equal(
    await rejection(
      overlay('gte-ok', {
        priceAdjustment: '-30%',
        weight: 10000,
        requirements: [{ key: 'karpenter.k8s.aws/instance-cpu', operator: 'Gte', values: ['4'] }],
      }),
    ),
    'accepted',
    'a valid overlay with Gte and the maximum weight is accepted',
  );
});

t.test('RBAC is enforced: a non-admin user gets 403 listing nodes', async (t) => {
  const dev = cp.userKubeConfig('developer').makeApiClient(k8s.CoreV1Api);
  const err = await dev.listNode().then(
    () => undefined,
    (e: { code?: number; body?: string }) => e,
  );
  t.equal(err?.code, 403);
  t.match(err?.body, /User \\"developer\\" cannot list resource \\"nodes\\"/);
});

t.test('ServiceAccount tokens are minted through TokenRequest and authenticate', async (t) => {
  const kc = await cp.serviceAccountKubeConfig('veneer-system', 'veneer-node-watcher');
  const review = await kc.makeApiClient(k8s.AuthenticationV1Api).createSelfSubjectReview({ body: {} });
  t.equal(review.status?.userInfo?.username, 'system:serviceaccount:veneer-system:veneer-node-watcher');
  const err = await kc
    .makeApiClient(k8s.CoreV1Api)
    .listNode()
    .then(
      () => undefined,
      (e: { code?: number }) => e,
    );
  t.equal(err?.code, 403, 'an account without bindings is denied');
});

t.test('stop() ends both processes and removes the scratch directory', async (t) => {
  const other = await ControlPlane.start();
  const dir = other.dir;
  t.ok(existsSync(dir));
  t.equal((await other.get('/readyz')).status, 200, 'the second control plane was serving');
  await other.stop();
  t.notOk(existsSync(dir), 'scratch directory removed');
  const after = await other.get('/readyz').then(
    (r) => `answered ${r.status}`,
    (e: NodeJS.ErrnoException) => e.code,
  );
  t.equal(after, 'ECONNREFUSED', 'nothing listens on the apiserver port any more');
});

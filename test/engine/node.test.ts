import t from 'tap';
import { nodeClaimFor, toNodeClaimView, toNodeView, toOverlayView } from '../../src/engine/index.ts';

t.test('views read JSON (admission) and client objects (lists, with Date timestamps) alike', async (t) => {
  const created = '2026-01-12T15:00:00Z';
  const fromJson = toNodeView({
    metadata: {
      name: 'n',
      labels: { a: 'b' },
      creationTimestamp: created,
      resourceVersion: '7',
      ownerReferences: [
        { apiVersion: 'karpenter.sh/v1', kind: 'NodeClaim', name: 'c1' },
        { apiVersion: 'v1', kind: 'Pod', name: 'x' },
      ],
    },
    spec: { providerID: 'aws:///z/i-1' },
  });
  const fromClient = toNodeView({
    metadata: {
      name: 'n',
      labels: { a: 'b' },
      creationTimestamp: new Date(created) as unknown as string,
      resourceVersion: '7',
      ownerReferences: [{ apiVersion: 'karpenter.sh/v1', kind: 'NodeClaim', name: 'c1' }],
    },
    spec: { providerID: 'aws:///z/i-1' },
  });
  t.same(fromJson, fromClient);
  t.same(fromJson, {
    name: 'n',
    labels: { a: 'b' },
    createdAt: Date.parse(created),
    providerID: 'aws:///z/i-1',
    ownerNodeClaim: 'c1',
    resourceVersion: '7',
  });
  t.same(toNodeView({}), { name: '', labels: {} }, 'an empty object is an empty view');
  t.same(toNodeView({ metadata: { labels: null, creationTimestamp: 'not a date' }, spec: null }), {
    name: '',
    labels: {},
  });
  t.same(toNodeClaimView({ metadata: { name: 'c' }, status: null }), { name: 'c', labels: {} });
  t.same(toOverlayView({}).requirements, []);
});

t.test('a node finds its NodeClaim by providerID first, then by ownerReference', async (t) => {
  const byId = { name: 'by-id', labels: {} };
  const byName = { name: 'by-name', labels: {} };
  const lookup = {
    byProviderID: (id: string) => (id === 'p' ? byId : undefined),
    byName: (n: string) => (n === 'c1' ? byName : undefined),
  };
  t.equal(nodeClaimFor(toNodeView({ metadata: { name: 'n' }, spec: { providerID: 'p' } }), lookup)?.name, 'by-id');
  t.equal(
    nodeClaimFor(
      toNodeView({
        metadata: { name: 'n', ownerReferences: [{ apiVersion: 'karpenter.sh/v1', kind: 'NodeClaim', name: 'c1' }] },
        spec: { providerID: 'q' },
      }),
      lookup,
    )?.name,
    'by-name',
  );
  t.equal(nodeClaimFor(toNodeView({ metadata: { name: 'n' } }), lookup), undefined);
});

t.test(
  "before Karpenter links them, a KWOK node finds the NodeClaim KWOK named it after, and only that provider's",
  async (t) => {
    const kwok = (name: string, providerID?: string) => ({
      name,
      labels: {},
      nodeClassGroup: 'karpenter.kwok.sh',
      ...(providerID ? { providerID } : {}),
    });
    const claims = new Map([
      ['default-abc', kwok('default-abc')],
      ['launched', kwok('launched', 'kwok://kwok-launched-x-2')],
      ['aws-claim', { name: 'aws-claim', labels: {}, nodeClassGroup: 'karpenter.k8s.aws' }],
    ]);
    const lookup = { byProviderID: () => undefined, byName: (n: string) => claims.get(n) };
    const node = (hostname: string, providerID: string) =>
      toNodeView({
        metadata: { name: `kwok-${hostname}-x-1`, labels: { 'kubernetes.io/hostname': hostname } },
        spec: { providerID },
      });
    t.equal(
      nodeClaimFor(node('default-abc', 'kwok://kwok-default-abc-x-1'), lookup)?.name,
      'default-abc',
      'by the hostname label KWOK copied from its NodeClaim',
    );
    t.equal(
      nodeClaimFor(node('launched', 'kwok://kwok-launched-x-1'), lookup),
      undefined,
      'not a NodeClaim that names another instance',
    );
    t.equal(
      nodeClaimFor(node('aws-claim', 'kwok://kwok-aws-claim-x-1'), lookup),
      undefined,
      "not another provider's NodeClaim",
    );
    t.equal(
      nodeClaimFor(node('default-abc', 'aws:///us-east-1a/i-1'), lookup),
      undefined,
      'not a node KWOK did not create',
    );
  },
);

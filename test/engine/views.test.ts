import t from 'tap';
import { nodeClaimFor, toNodeClaimView, toNodeView, toOverlayView } from '../../src/engine/index.ts';

t.test('views read JSON (admission) and client objects (lists, with Date timestamps) alike', async (t) => {
  const created = '2026-01-12T15:00:00Z';
  const fromJson = toNodeView({
    metadata: { name: 'n', labels: { a: 'b' }, creationTimestamp: created, resourceVersion: '7', ownerReferences: [{ apiVersion: 'karpenter.sh/v1', kind: 'NodeClaim', name: 'c1' }, { apiVersion: 'v1', kind: 'Pod', name: 'x' }] },
    spec: { providerID: 'aws:///z/i-1' },
  });
  const fromClient = toNodeView({
    metadata: { name: 'n', labels: { a: 'b' }, creationTimestamp: new Date(created) as unknown as string, resourceVersion: '7', ownerReferences: [{ apiVersion: 'karpenter.sh/v1', kind: 'NodeClaim', name: 'c1' }] },
    spec: { providerID: 'aws:///z/i-1' },
  });
  t.same(fromJson, fromClient);
  t.same(fromJson, { name: 'n', labels: { a: 'b' }, createdAt: Date.parse(created), providerID: 'aws:///z/i-1', ownerNodeClaim: 'c1', resourceVersion: '7' });
  t.same(toNodeView({}), { name: '', labels: {} }, 'an empty object is an empty view');
  t.same(toNodeView({ metadata: { labels: null, creationTimestamp: 'not a date' }, spec: null }), { name: '', labels: {} });
  t.same(toNodeClaimView({ metadata: { name: 'c' }, status: null }), { name: 'c', labels: {} });
  t.same(toOverlayView({}).requirements, []);
});

t.test('a node finds its NodeClaim by providerID first, then by ownerReference', async (t) => {
  const byId = { name: 'by-id', labels: {} };
  const byName = { name: 'by-name', labels: {} };
  const lookup = { byProviderID: (id: string) => (id === 'p' ? byId : undefined), byName: (n: string) => (n === 'c1' ? byName : undefined) };
  t.equal(nodeClaimFor(toNodeView({ metadata: { name: 'n' }, spec: { providerID: 'p' } }), lookup)?.name, 'by-id');
  t.equal(nodeClaimFor(toNodeView({ metadata: { name: 'n', ownerReferences: [{ apiVersion: 'karpenter.sh/v1', kind: 'NodeClaim', name: 'c1' }] }, spec: { providerID: 'q' } }), lookup)?.name, 'by-name');
  t.equal(nodeClaimFor(toNodeView({ metadata: { name: 'n' } }), lookup), undefined);
});

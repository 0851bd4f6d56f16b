// What `explain` and `report` share with the watcher's caches: NodeClaims found by providerID or
// name and counted by provider, and EC2NodeClasses reduced to their zones. Built once from a
// list, the answers are the cache's after the same NodeClaims came one by one.
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import t from 'tap';
import { toNodeClaimView, type NodeClaimView } from '../../src/engine/index.ts';
import { claimLookup, readInputFiles } from '../../src/commands/inputs.ts';
import { createLogger } from '../../src/log.ts';
import { createMetrics } from '../../src/metrics.ts';
import { NodeClaimCache } from '../../src/state/caches.ts';
import { NodeClaimIndex, nodeClassFacts } from '../../src/state/lookups.ts';
import type { KubeClient } from '../../src/kube/client.ts';
import type { ReflectorHandlers } from '../../src/kube/reflector-options.ts';

const claim = (
  name: string,
  group?: string,
  providerID: string | undefined = `aws:///us-west-2a/i-${name}`,
): NodeClaimView =>
  toNodeClaimView({
    metadata: { name },
    ...(group ? { spec: { nodeClassRef: { group, kind: 'EC2NodeClass', name: 'default' } } } : {}),
    ...(providerID ? { status: { providerID } } : {}),
  });

t.test('a list gives the answers the cache gives after the same NodeClaims one by one', async (t) => {
  const claims = [
    claim('a', 'karpenter.k8s.aws'),
    claim('b', 'karpenter.kwok.sh'),
    claim('c', 'karpenter.k8s.aws', undefined),
    claim('d'),
  ];
  const cache = new NodeClaimCache({
    client: {} as KubeClient,
    metrics: createMetrics(),
    log: createLogger('error', new Writable({ write: (_c, _e, done) => done() })),
    now: () => 0,
  });
  const { handlers } = (cache.reflector as unknown as { o: { handlers: ReflectorHandlers<NodeClaimView> } }).o;
  for (const c of claims) {
    // The Reflector stores an item before it calls upsert.
    cache.reflector.store.set(c.name, c);
    handlers.upsert(c, 0);
  }
  const listed = claimLookup(claims);
  t.same([...listed.groups!], [...cache.groups]);
  t.same(
    [...listed.groups!],
    [
      ['karpenter.k8s.aws', 2],
      ['karpenter.kwok.sh', 1],
    ],
    'a NodeClaim without a group is not counted',
  );
  for (const c of claims) {
    t.equal(listed.byName(c.name), cache.byName(c.name), `${c.name} by name`);
    if (c.providerID)
      t.equal(listed.byProviderID(c.providerID), cache.byProviderID(c.providerID), `${c.name} by providerID`);
  }
  t.equal(listed.byProviderID(''), undefined, 'no providerID finds nothing');
  t.equal(listed.byName('zz'), undefined);
});

t.test('of NodeClaims that share a name the last counts, once', async (t) => {
  const index = NodeClaimIndex.of([
    claim('a', 'karpenter.kwok.sh', 'p://old'),
    claim('a', 'karpenter.k8s.aws', 'p://new'),
  ]);
  t.same([...index.groups], [['karpenter.k8s.aws', 1]]);
  t.equal(index.byName('a')?.providerID, 'p://new');
  t.equal(index.byProviderID('p://new')?.name, 'a');
  index.remove(claim('a', 'karpenter.k8s.aws', 'p://new'));
  t.same([...index.groups], [], 'removed: no longer counted');
  t.equal(index.byProviderID('p://new'), undefined);
});

t.test("an EC2NodeClass reduced to its subnets' zones; one with no subnets yet says nothing", async (t) => {
  t.same(
    nodeClassFacts({
      metadata: { name: 'default' },
      status: { subnets: [{ zone: 'us-west-2a' }, { zone: 'us-west-2b' }, { zone: 'us-west-2a' }, {}] },
    }),
    {
      name: 'default',
      zones: new Set(['us-west-2a', 'us-west-2b']),
      sizing: { amiFamily: 'Custom', kubelet: {}, expressions: false },
    },
  );
  t.match(nodeClassFacts({ metadata: { name: 'new' }, status: null }), { name: 'new', zones: new Set() });
  const dir = mkdtempSync(join(tmpdir(), 'vnw-lookups-'));
  const list = (kind: string, items: object[]) => {
    const path = join(dir, `${kind}.json`);
    writeFileSync(path, JSON.stringify({ apiVersion: 'v1', kind: 'List', items }));
    return path;
  };
  const inputs = readInputFiles({
    nodesFile: list('Node', []),
    overlaysFile: list('NodeOverlay', []),
    nodeClassesFile: list('EC2NodeClass', [
      { kind: 'EC2NodeClass', metadata: { name: 'default' }, status: { subnets: [{ zone: 'us-west-2a' }] } },
      { kind: 'EC2NodeClass', metadata: { name: 'unresolved' }, status: {} },
    ]),
  });
  t.same(
    [...inputs.nodeClassZones],
    [['default', new Set(['us-west-2a'])]],
    "as the watcher's cache answers: zones unknown, not none",
  );
});

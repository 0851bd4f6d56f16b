// What the effect reads from the cluster besides the NodeClaim, against a real apiserver: each
// EC2NodeClass's zones (from its status' subnets, as the AWS provider resolves them), with the
// cluster serving no EC2NodeClass at all or forbidding the watcher to read them, and its sizing (AMI
// family, kubelet settings); and the labels of a registered node per instance type.
import { Writable } from 'node:stream';
import t from 'tap';
import * as k8s from '@kubernetes/client-node';
import { createLogger } from '../../src/log.ts';
import { createMetrics } from '../../src/metrics.ts';
import { NodeClassCache } from '../../src/state/launch-caches.ts';
import { InstanceTypeLabels } from '../../src/state/lookups.ts';
import { clientFor, ControlPlane } from '../../kit/control-plane.ts';
import { EC2_NODECLASS_API, installAwsCRDs } from '../../kit/aws/karpenter.ts';
import { until } from '../../kit/fleet.ts';
import type { KubeClient } from '../../src/kube/client.ts';
import { KARPENTER_DEFAULTS, type NodeView } from '../../src/engine/index.ts';

const cp = await ControlPlane.start();
t.teardown(() => cp.stop());
const admin = cp.adminKubeConfig();
const custom = admin.makeApiClient(k8s.CustomObjectsApi);

function cacheWith(client: KubeClient) {
  const lines: { level: number; msg: string; resource?: string }[] = [];
  const log = createLogger(
    'info',
    new Writable({
      write: (chunk: Buffer, _e, done) => {
        lines.push(JSON.parse(chunk.toString()) as (typeof lines)[number]);
        done();
      },
    }),
  );
  const cache = new NodeClassCache({ client, metrics: createMetrics(), log, now: Date.now });
  cache.reflector.start();
  t.teardown(() => cache.reflector.stop());
  return { cache, lines };
}

t.test('a cluster without the AWS provider: synced at once, empty, said once at info', async (t) => {
  const client = clientFor(admin);
  t.teardown(() => client.close());
  const { cache, lines } = cacheWith(client);
  await cache.reflector.synced;
  t.ok(cache.reflector.isSynced);
  t.equal(cache.zonesOf('default'), undefined);
  t.match(lines, [{ level: 30, resource: 'ec2nodeclasses', msg: /not served by this cluster/ }]);
  t.equal(lines.length, 1);
});

t.test("EC2NodeClasses: their resolved subnets' zones, followed as the status changes", async (t) => {
  await installAwsCRDs(cp);
  const client = clientFor(admin);
  t.teardown(() => client.close());
  const { cache } = cacheWith(client);
  await cache.reflector.synced;
  await custom.createClusterCustomObject({
    ...EC2_NODECLASS_API,
    body: {
      apiVersion: 'karpenter.k8s.aws/v1',
      kind: 'EC2NodeClass',
      metadata: { name: 'default' },
      spec: {
        role: 'KarpenterNodeRole',
        amiFamily: 'AL2023',
        amiSelectorTerms: [{ alias: 'al2023@latest' }],
        subnetSelectorTerms: [{ tags: { 'karpenter.sh/discovery': 'c' } }],
        securityGroupSelectorTerms: [{ tags: { 'karpenter.sh/discovery': 'c' } }],
      },
    },
  });
  await until('the cache has it', async () => cache.reflector.store.has('default'), 10_000);
  t.equal(cache.zonesOf('default'), undefined, 'no subnets resolved yet: unknown, not "no zone"');
  // Its sizing, as the CRD served it back (the fields the API server keeps are the provider's).
  const seen = new Map([['m5.large', {}]]);
  const sizing = cache.sizingOf('default', KARPENTER_DEFAULTS, seen)!;
  t.same(sizing.nodeClass, { amiFamily: 'AL2023', kubelet: {}, expressions: false });
  t.same([...sizing.registered], ['m5.large']);
  t.equal(
    cache.sizingOf('default', KARPENTER_DEFAULTS, seen),
    sizing,
    'one object while nothing changes: the memos find it',
  );
  t.equal(cache.sizingOf('other', KARPENTER_DEFAULTS, seen), undefined);
  const subnets = (zones: string[]) =>
    zones.map((zone, i) => ({ id: `subnet-0${i}`, zone, zoneID: `use1-az${i + 1}` }));
  const setSubnets = (zones: string[]) =>
    custom.patchClusterCustomObjectStatus({
      ...EC2_NODECLASS_API,
      name: 'default',
      body: [{ op: 'add', path: '/status', value: { subnets: subnets(zones) } }],
    });
  await setSubnets(['us-east-1a', 'us-east-1b', 'us-east-1b']);
  await until('zones', async () => cache.zonesOf('default') !== undefined, 10_000);
  t.same([...cache.zonesOf('default')!].sort(), ['us-east-1a', 'us-east-1b']);
  await setSubnets(['us-east-1c']);
  await until('the new zones', async () => cache.zonesOf('default')?.has('us-east-1c') === true, 10_000);
  t.same([...cache.zonesOf('default')!], ['us-east-1c']);
  await custom.deleteClusterCustomObject({ ...EC2_NODECLASS_API, name: 'default' });
  await until('it is gone', async () => !cache.reflector.store.has('default'), 10_000);
  t.equal(cache.zonesOf('default'), undefined);
});

t.test('forbidden to list them: synced, empty, one warning', async (t) => {
  const kc = await cp.serviceAccountKubeConfig('default', 'no-rbac');
  const client = clientFor(kc);
  t.teardown(() => client.close());
  const { cache, lines } = cacheWith(client);
  await cache.reflector.synced;
  t.equal(cache.zonesOf('default'), undefined);
  t.match(lines, [{ level: 40, resource: 'ec2nodeclasses', msg: /not allowed to list it \(403\)/ }]);
  t.equal(lines.length, 1);
});

t.test('instance-type labels: the first registered node of each type', async (t) => {
  const labels = new InstanceTypeLabels();
  const node = (name: string, l: Record<string, string>): NodeView => ({ name, labels: l });
  labels.seen(
    node('booting', { 'node.kubernetes.io/instance-type': 'm5.large', 'karpenter.k8s.aws/instance-gpu-count': '1' }),
  );
  t.equal(labels.current.get('m5.large'), undefined, 'not registered yet: its labels may not be final');
  const before = labels.current;
  labels.seen(
    node('a', {
      'node.kubernetes.io/instance-type': 'm5.large',
      'karpenter.sh/registered': 'true',
      'karpenter.k8s.aws/instance-cpu': '2',
    }),
  );
  labels.seen(
    node('b', {
      'node.kubernetes.io/instance-type': 'm5.large',
      'karpenter.sh/registered': 'true',
      'karpenter.k8s.aws/instance-cpu': '99',
    }),
  );
  labels.seen(node('untyped', { 'karpenter.sh/registered': 'true' }));
  t.match(labels.current.get('m5.large'), { 'karpenter.k8s.aws/instance-cpu': '2' });
  t.equal(labels.current.get('c5.large'), undefined);
  t.not(labels.current, before, 'a type seen first is a new map: the replay keys on it');
  const after = labels.current;
  labels.seen(node('c', { 'node.kubernetes.io/instance-type': 'm5.large', 'karpenter.sh/registered': 'true' }));
  t.equal(labels.current, after, 'a type seen again leaves the map as it is');
});

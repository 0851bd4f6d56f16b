// What real Karpenter (KWOK provider) compares an overlay with, seen on its own nodes: each probe
// overlay prices one instance type only, with one requirement the watcher could get wrong (a key
// on the node that Karpenter never compares, a numeric bound on a value that is no integer, a key
// only KWOK's offerings define, a deprecated key, a zone...). Karpenter's own annotation
// `karpenter.sh/price-overlay-applied` on each launched node says whether any overlay priced an
// offering of its type: with one probe per type, whether that probe applied. The watcher's record
// must agree with it on every type, and with the judge (Karpenter's NodeOverlay controller and store
// over the same catalog, NodePools and overlays) on every node, zones included.
import t from 'tap';
import * as k8s from '@kubernetes/client-node';
import type { DecisionStory } from '../../src/engine/record.ts';
import { until } from '../../kit/fleet.ts';
import {
  createPendingPods,
  type PendingPod,
  PRICE_OVERLAY_APPLIED,
  REGION,
  startKarpenterWithWatcher,
  KARPENTER_VERSION,
} from '../../kit/karpenter.ts';
import type { VeneerOverlay } from '../../kit/veneer.ts';
import { KarpenterJudge } from '../judges/karpenter-oracle.ts';
import { kwokJudgeCase } from '../judges/kwok-judge.ts';
import { expectOverlaysCounted } from '../support/expectations.ts';

t.setTimeout(240_000);
const started = Date.now();
const env = await startKarpenterWithWatcher();
t.teardown(env.stop);
const { watcher } = env;
const custom = env.admin.makeApiClient(k8s.CustomObjectsApi);
const core = env.admin.makeApiClient(k8s.CoreV1Api);

interface Probe {
  type: string;
  requirement: { key: string; operator: string; values?: string[] };
  /** Whether Karpenter prices the type's on-demand offerings (all zones, unless a zone is named). */
  applies: boolean;
  why: string;
}
const PROBES: Probe[] = [
  {
    type: 'm5.large',
    requirement: { key: 'kwok.x-k8s.io/node', operator: 'In', values: ['fake'] },
    applies: false,
    why: 'a label KWOK puts on every node, which no instance type defines',
  },
  {
    type: 'm5.xlarge',
    requirement: { key: 'eks-node-viewer/instance-price', operator: 'Exists' },
    applies: false,
    why: 'another node-only label',
  },
  {
    type: 'm5.2xlarge',
    requirement: { key: 'karpenter.kwok.sh/instance-memory', operator: 'Gt', values: ['16000'] },
    applies: false,
    why: "KWOK's memory is a quantity (32Gi), no integer: every numeric bound fails",
  },
  {
    type: 'c6i.large',
    requirement: { key: 'karpenter.kwok.sh/instance-cpu', operator: 'Lt', values: ['3'] },
    applies: true,
    why: 'cpu 2 < 3',
  },
  {
    type: 'c6i.xlarge',
    requirement: { key: 'topology.kubernetes.io/region', operator: 'NotIn', values: ['us-east-1'] },
    applies: true,
    why: "region is only in KWOK's offerings: NotIn another region holds",
  },
  {
    type: 'c6i.2xlarge',
    requirement: { key: 'topology.kubernetes.io/region', operator: 'In', values: [REGION] },
    applies: false,
    why: 'region In: the instance type does not define region, although every node carries it',
  },
  {
    type: 'r6g.large',
    requirement: { key: 'kubernetes.io/arch', operator: 'In', values: ['arm64'] },
    applies: true,
    why: 'arch',
  },
  {
    type: 'r6g.xlarge',
    requirement: { key: 'karpenter.sh/nodepool', operator: 'In', values: ['default'] },
    applies: true,
    why: 'the NodePool name',
  },
  {
    type: 'r6g.2xlarge',
    requirement: { key: 'beta.kubernetes.io/instance-type', operator: 'In', values: ['r6g.2xlarge'] },
    applies: true,
    why: 'a deprecated key, normalized',
  },
  {
    type: 't3.large',
    requirement: { key: 'topology.kubernetes.io/zone', operator: 'In', values: ['us-west-2a'] },
    applies: true,
    why: 'one zone: only that offering',
  },
  {
    type: 't3.xlarge',
    requirement: { key: 'karpenter.kwok.sh/instance-size', operator: 'In', values: ['xlarge'] },
    applies: true,
    why: 'size from the AWS-shaped name',
  },
  {
    type: 't3.2xlarge',
    requirement: { key: 'karpenter.kwok.sh/instance-family', operator: 'NotIn', values: ['t3'] },
    applies: false,
    why: 'family NotIn its own family',
  },
];
const overlays: VeneerOverlay[] = PROBES.map((p) => ({
  apiVersion: 'karpenter.sh/v1alpha1',
  kind: 'NodeOverlay',
  metadata: { name: `probe-${p.type}`, labels: { 'app.kubernetes.io/managed-by': 'veneer' } },
  spec: {
    weight: 50,
    price: '0.001',
    requirements: [
      { key: 'node.kubernetes.io/instance-type', operator: 'In', values: [p.type] },
      { key: 'karpenter.sh/capacity-type', operator: 'In', values: ['on-demand'] },
      p.requirement,
    ],
  },
}));

t.test('each probe, on a node of its type that real Karpenter launched', async (t) => {
  await expectOverlaysCounted({
    custom,
    overlays,
    metrics: () => watcher.metrics.registry.metrics(),
    condition: 'ValidationSucceeded',
  });

  // One on-demand node per type; t3.large twice, in the probe's zone and in another.
  const pods: PendingPod[] = PROBES.map((p) => ({
    name: `probe-${p.type.replace('.', '-')}`,
    instanceType: p.type,
    capacityType: 'on-demand',
    ...(p.type === 't3.large' ? { zone: 'us-west-2a' } : {}),
  }));
  pods.push({ name: 'probe-t3-large-b', instanceType: 't3.large', capacityType: 'on-demand', zone: 'us-west-2b' });
  await createPendingPods(env.admin, pods, env.karpenter.catalog);
  const recorded = async () =>
    (await core.listNode()).items.filter((n) => n.metadata?.labels?.['veneer.io/overlay-influenced'] !== undefined);
  await until(`${pods.length} nodes recorded`, async () => (await recorded()).length === pods.length, 90_000);
  const nodes = await recorded();

  const judge = new KarpenterJudge(KARPENTER_VERSION);
  t.teardown(() => judge.close());
  const answer = await judge.judge(
    kwokJudgeCase(
      env.karpenter.catalog,
      env.karpenter.nodePools,
      overlays,
      nodes.map((n) => {
        const labels = n.metadata?.labels ?? {};
        return {
          nodePool: 'default',
          instanceType: labels['node.kubernetes.io/instance-type']!,
          offering: env.karpenter.offeringOf(labels).offering,
        };
      }),
    ),
  );
  for (const [i, n] of nodes.entries()) {
    const labels = n.metadata?.labels ?? {};
    const type = labels['node.kubernetes.io/instance-type']!;
    const zone = labels['topology.kubernetes.io/zone']!;
    const probe = PROBES.find((p) => p.type === type)!;
    const story = JSON.parse(n.metadata?.annotations?.['veneer.io/overlay-decision'] ?? '{}') as DecisionStory;
    const annotated = n.metadata?.annotations?.[PRICE_OVERLAY_APPLIED] === 'true';
    const expected =
      probe.applies &&
      (probe.requirement.key !== 'topology.kubernetes.io/zone' || probe.requirement.values?.includes(zone));
    t.equal(
      annotated,
      probe.applies,
      `${type}: Karpenter ${probe.applies ? 'priced' : 'did not price'} it (${PRICE_OVERLAY_APPLIED}) — ${probe.why}`,
    );
    t.equal(answer.applied[i] ?? null, expected ? `probe-${type}` : null, `${type} in ${zone}: the judge agrees`);
    t.same(
      [story.influenced, story.overlay],
      [expected, expected ? `probe-${type}` : null],
      `${type} in ${zone}: the watcher's record (by the ${story.decidedBy}, from ${story.characteristicsFrom})`,
    );
  }
  const u = env.karpenter.usage();
  t.comment(
    `karpenter RSS ${u.karpenter?.rssMiB.toFixed(0)} MiB, kube-scheduler ${u.scheduler?.rssMiB.toFixed(0)} MiB; file wall time ${((Date.now() - started) / 1000).toFixed(1)} s`,
  );
});

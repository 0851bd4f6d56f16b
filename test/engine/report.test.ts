// The per-overlay report, on nodes and overlays built here: every verdict, the records' own
// word for recorded nodes, the engine's decision for the rest, and the totals.
import t from 'tap';
import {
  buildReport,
  decide,
  parseSelector,
  toNodeView,
  toOverlayView,
  type NodeObject,
  type OverlayIndex,
  type OverlayObject,
} from '../../src/engine/index.ts';
import { NO_OVERLAY } from '../../src/engine/report-rows.ts';
import { computeSavingsPlan, ec2InstanceSavingsPlan, karpenterNode, reservedInstance } from '../../kit/veneer.ts';
import { indexWith, iso, settings, T0, withCreation, withStatus } from './fixtures.ts';

const policy = { selector: parseSelector('app.kubernetes.io/managed-by=veneer'), requireOverlayReady: false };
const noClaims = { byProviderID: () => undefined, byName: () => undefined };
const NOW = T0 + 600_000;

/** A node as the watcher would have recorded it at `NOW - 60 s`, by `decidedBy`. */
function recorded(
  name: string,
  instanceType: string,
  index: OverlayIndex,
  decidedBy: 'webhook' | 'reconciler',
  basis?: 'approximate',
): NodeObject {
  const node = karpenterNode({ name, instanceType, createdAt: iso(T0 + 1000) });
  const d = decide({ node: toNodeView(node), now: NOW - 60_000, decidedBy }, index, settings);
  if (d.outcome !== 'influenced' && d.outcome !== 'not-influenced') throw new Error(`${name}: ${d.outcome}`);
  const annotations = { ...d.record.annotations };
  if (basis)
    annotations['veneer.io/overlay-decision'] = JSON.stringify({
      ...JSON.parse(annotations['veneer.io/overlay-decision']!),
      basis,
    });
  return {
    ...node,
    metadata: { ...node.metadata, labels: { ...node.metadata?.labels, ...d.record.labels }, annotations },
  };
}

t.test('steering, outranked, idle, inactive and gone overlays, and the totals', async (t) => {
  const ri = reservedInstance('m5.xlarge', 'us-west-2');
  const ec2 = ec2InstanceSavingsPlan('m5', 'us-west-2');
  const compute = computeSavingsPlan();
  const idle = reservedInstance('c7i.large', 'us-east-1');
  const rejected = withStatus(reservedInstance('r6g.large', 'us-west-2'), [
    { type: 'Ready', status: 'False', reason: 'Conflict' },
  ]);
  const capacityOnly: OverlayObject = {
    ...reservedInstance('x2.large', 'us-west-2'),
    spec: { requirements: [], capacity: { 'example.com/gpu': '1' } },
  };
  const old = reservedInstance('m4.large', 'us-west-2');
  const lighter: OverlayObject = {
    ...ri,
    metadata: { ...ri.metadata, name: 'pref-default-1' },
    spec: { ...ri.spec, weight: 5 },
  };
  const present = [ri, ec2, compute, lighter, idle, rejected, capacityOnly].map((o) => withCreation(o, T0 - 3_600_000));
  // Records were written while `old` and `rejected` still counted.
  const then = indexWith([ri, ec2, compute, old, withStatus(reservedInstance('r6g.large', 'us-west-2'), [])]);
  const nodes: NodeObject[] = [
    recorded('ri-1', 'm5.xlarge', then, 'webhook'),
    recorded('ri-2', 'm5.xlarge', then, 'reconciler', 'approximate'),
    recorded('ec2-1', 'm5.large', then, 'webhook'),
    recorded('old-1', 'm4.large', then, 'webhook'),
    recorded('r6g-1', 'r6g.large', then, 'webhook'),
    // No record yet: counted as explain would decide it now.
    karpenterNode({ name: 'pending-1', instanceType: 'c6i.large', createdAt: iso(NOW - 5_000) }),
    // Still waiting for its labels (no NodeClaim, not registered, young): no match counted.
    karpenterNode({ name: 'waiting', stage: 'kubelet', createdAt: iso(NOW - 1_000) }),
    karpenterNode({ name: 'spot', capacityType: 'spot', instanceType: 'm5.xlarge', createdAt: iso(T0) }),
  ];
  // A record that says nothing matched, although the Compute SP matches it now (it changed since, say).
  const none = karpenterNode({ name: 'none-1', instanceType: 'm5.xlarge', createdAt: iso(T0 + 1000) });
  const noneDecision = decide({ node: toNodeView(none), now: NOW, decidedBy: 'reconciler' }, indexWith([]), settings);
  if (noneDecision.outcome !== 'not-influenced') throw new Error('expected not-influenced');
  nodes.push({
    ...none,
    metadata: {
      ...none.metadata,
      labels: { ...none.metadata?.labels, ...noneDecision.record.labels },
      annotations: noneDecision.record.annotations,
    },
  });

  const report = buildReport({
    nodes,
    overlays: present.map((o) => toOverlayView(o)),
    nodePools: [],
    nodeClaims: noClaims,
    now: NOW,
    settings,
    policy,
  });
  const row = (name: string) => report.overlays.find((o) => o.overlay === name);
  t.same(
    report.overlays.map((o) => [o.overlay, o.verdict]),
    [
      ['cost-aware-ri-r6g.large-us-west-2', 'rejected'],
      ['cost-aware-ri-m5.xlarge-us-west-2', 'steering'],
      ['cost-aware-ri-c7i.large-us-east-1', 'idle'],
      ['cost-aware-ec2-sp-m5-us-west-2', 'steering'],
      ['cost-aware-compute-sp-global', 'steering'],
      ['pref-default-1', 'outranked'],
      ['cost-aware-ri-m4.large-us-west-2', 'gone'],
    ],
    "Karpenter's order (weight, then the later name), gone overlays last; the capacity-only one is left out",
  );
  t.match(row('cost-aware-ri-m5.xlarge-us-west-2'), {
    weight: 30,
    capacityType: 'reserved-instance',
    instanceFamily: 'm5',
    instanceType: 'm5.xlarge',
    region: 'us-west-2',
    won: 2,
    lost: 1,
    lostTo: { [NO_OVERLAY]: 1 },
    newestWin: iso(NOW - 60_000).replace('.000', ''),
  });
  t.match(row('cost-aware-ec2-sp-m5-us-west-2'), {
    won: 1,
    lost: 3,
    lostTo: { 'cost-aware-ri-m5.xlarge-us-west-2': 2, [NO_OVERLAY]: 1 },
  });
  t.match(row('cost-aware-compute-sp-global'), { won: 1, wonWithoutRecord: 1, lost: 6, newestWin: null });
  t.same(
    row('cost-aware-compute-sp-global')?.lostTo,
    {
      'cost-aware-ri-m5.xlarge-us-west-2': 2,
      'cost-aware-ec2-sp-m5-us-west-2': 1,
      'cost-aware-ri-m4.large-us-west-2': 1,
      'cost-aware-ri-r6g.large-us-west-2': 1,
      [NO_OVERLAY]: 1,
    },
    'the waiting node counts for nothing',
  );
  t.same(
    [row('pref-default-1')?.won, row('pref-default-1')?.lostTo],
    [0, { 'cost-aware-ri-m5.xlarge-us-west-2': 2, [NO_OVERLAY]: 1 }],
    'matches only where a heavier overlay won',
  );
  t.match(row('cost-aware-ri-c7i.large-us-east-1'), { won: 0, lost: 0, newestWin: null, region: 'us-east-1' });
  t.match(row('cost-aware-ri-r6g.large-us-west-2'), { won: 1, note: 'rejected by Karpenter (Ready=False, Conflict)' });
  t.match(row('cost-aware-ri-m4.large-us-west-2'), {
    weight: null,
    capacityType: 'reserved-instance',
    instanceType: 'm4.large',
    won: 1,
    note: 'no longer in the cluster; named by 1 record',
  });
  // Decided without their NodeClaims: what the overlays changed is unknown for each.
  t.same(report.totals, {
    onDemandNodes: 8,
    influenced: 5,
    notInfluenced: 1,
    pending: 2,
    records: 6,
    recordedInline: 4,
    inlineShare: 4 / 6,
    approximate: 1,
    inactiveOverlays: 1,
    effects: {
      steeredFromSpot: 0,
      movedType: 0,
      replaced: 0,
      none: 0,
      unknown: 6,
      steeredListPricePerHour: 0,
      churned: 0,
    },
    unreadableRecords: 0,
    unreadableNodes: [],
    optedOut: 0,
  });
});

t.test('a record without its story still counts, by its label (a shortened long name included)', async (t) => {
  const long = reservedInstance('m5.xlarge', 'us-west-2');
  const name = `${'very-long-overlay-name-'.repeat(4)}m5`;
  const overlay = withCreation({ ...long, metadata: { ...long.metadata, name } }, T0 - 3_600_000);
  const view = toOverlayView(overlay);
  t.not(view.nameLabelValue, name, 'the label holds a shortened name');
  const node = karpenterNode({
    name: 'n',
    instanceType: 'm5.xlarge',
    createdAt: iso(T0),
    extraLabels: {
      'veneer.io/overlay-influenced': 'true',
      'veneer.io/matching-overlay': view.nameLabelValue,
      'veneer.io/labeled-at': '20260112T150500Z',
    },
  });
  const gone = karpenterNode({
    name: 'g',
    instanceType: 'm5.xlarge',
    createdAt: iso(T0),
    extraLabels: {
      'veneer.io/overlay-influenced': 'true',
      'veneer.io/matching-overlay': 'deleted-overlay',
      'veneer.io/labeled-at': 'not-a-time',
    },
  });
  const report = buildReport({
    nodes: [
      node,
      { ...gone, metadata: { ...gone.metadata, annotations: { 'veneer.io/overlay-decision': '{not json' } } },
    ],
    overlays: [view],
    nodePools: [],
    nodeClaims: noClaims,
    now: NOW,
    settings,
    policy,
  });
  t.match(report.overlays, [
    {
      overlay: name,
      won: 1,
      lost: 1,
      lostTo: { 'deleted-overlay': 1 },
      newestWin: '2026-01-12T15:05:00Z',
      verdict: 'steering',
    },
    { overlay: 'deleted-overlay', won: 1, newestWin: null, verdict: 'gone' },
  ]);
  t.same(report.totals.inlineShare, 0, 'records without a story are not counted as inline');
  t.match(
    report.totals,
    { unreadableRecords: 2, unreadableNodes: ['n', 'g'] },
    'and are named: a record the watcher did not write',
  );
  const optedOut = karpenterNode({ name: 'o', createdAt: iso(T0), extraLabels: { 'veneer.io/opt-out': 'true' } });
  t.match(
    buildReport({
      nodes: [optedOut],
      overlays: [view],
      nodePools: [],
      nodeClaims: noClaims,
      now: NOW,
      settings,
      policy,
    }).totals,
    { optedOut: 1, onDemandNodes: 0, pending: 0 },
    'an opted-out node is counted apart, never pending',
  );
  t.equal(
    buildReport({ nodes: [], overlays: [], nodePools: [], nodeClaims: noClaims, now: NOW, settings, policy }).totals
      .inlineShare,
    null,
    'no records: no share',
  );
});

t.test(
  'effects per overlay: steered from spot, moved to another type, a replacement it caused, no effect, and what was steered',
  async (t) => {
    const ri = withCreation(reservedInstance('m5.xlarge', 'us-west-2'), T0 - 3_600_000);
    const ec2 = withCreation(ec2InstanceSavingsPlan('c6i', 'us-west-2'), T0 - 3_600_000);
    const index = indexWith([ri, ec2]);
    const withEffect = (name: string, type: string, effect: Record<string, unknown>): NodeObject => {
      const node = recorded(name, type, index, 'webhook');
      const story = { ...JSON.parse(node.metadata!.annotations!['veneer.io/overlay-decision']!), effect };
      return {
        ...node,
        metadata: {
          ...node.metadata,
          labels: { ...node.metadata?.labels, 'veneer.io/overlay-effect': String(effect.verdict) },
          annotations: { 'veneer.io/overlay-decision': JSON.stringify(story) },
        },
      };
    };
    const riName = ri.metadata!.name!;
    const ec2Name = ec2.metadata!.name!;
    const nodes = [
      withEffect('a', 'm5.xlarge', {
        verdict: 'capacity-type',
        overlays: [riName],
        launched: { listPrice: 0.192, price: 0 },
      }),
      withEffect('b', 'm5.xlarge', {
        verdict: 'instance-type',
        overlays: [riName],
        launched: { listPrice: 0.192, price: 0 },
      }),
      withEffect('c', 'm5.xlarge', { verdict: 'none', overlays: [riName] }),
      withEffect('f', 'm5.xlarge', {
        verdict: 'replacement',
        overlays: [riName],
        launched: { listPrice: 0.192, price: 0 },
        disruption: { reason: 'Underutilized', replaced: [{ nodeClaim: 'old' }], replacedCount: 1 },
      }),
      withEffect('d', 'c6i.large', {
        verdict: 'none',
        overlays: [ec2Name],
        // The replacement of three recorded nodes after the RI for m5.large they named was deleted.
        disruption: {
          reason: 'Underutilized',
          replaced: [{ nodeClaim: 'old-1' }, { nodeClaim: 'old-2' }, { nodeClaim: 'old-3' }],
          replacedCount: 3,
          churn: [{ overlay: 'cost-aware-ri-m5.large-us-west-2', state: 'gone', nodes: 3 }],
        },
      }),
      withEffect('e', 'c6i.large', { verdict: 'none', overlays: [ec2Name] }),
    ];
    const report = buildReport({
      nodes,
      overlays: [ri, ec2].map((o) => toOverlayView(o)),
      nodePools: [],
      nodeClaims: noClaims,
      now: NOW,
      settings,
      policy,
    });
    const row = (name: string) => report.overlays.find((o) => o.overlay === name);
    t.match(row(riName), {
      won: 4,
      verdict: 'steering',
      effects: { steeredFromSpot: 1, movedType: 1, replaced: 1, none: 1, unknown: 0, steeredListPricePerHour: 0.576 },
    });
    t.match(row(ec2Name), {
      won: 2,
      verdict: 'no-effect',
      effects: { none: 2 },
      note: 'won 2 nodes, and each launch would have been the same without the selected overlays',
    });
    t.match(
      row('cost-aware-ri-m5.large-us-west-2'),
      {
        won: 0,
        verdict: 'gone',
        effects: { churned: 3, replaced: 0 },
        note: 'no longer in the cluster; named by 0 records; 3 recorded node(s) replaced after it went',
      },
      'an overlay gone with the nodes it priced: a row for the churn its replacements tell',
    );
    t.equal(row(riName)?.effects.churned, 0);
    t.same(report.totals.effects, {
      steeredFromSpot: 1,
      movedType: 1,
      replaced: 1,
      none: 3,
      unknown: 0,
      steeredListPricePerHour: 0.576,
      churned: 3,
    });
  },
);

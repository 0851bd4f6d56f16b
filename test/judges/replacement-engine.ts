// The engine's side of the replacement differentials: the replacement Karpenter's disruption made
// in a generated cluster, decided as the watcher decides its node, from what the watcher gets live:
// the node and NodeClaim as Karpenter writes them, the marks on the replaced NodeClaims and the
// DisruptionLaunching Event, Balanced's approvals and the candidate Event (as evidence), the
// NodePools' NodeClaims by offering, the overlays with the statuses Karpenter wrote, the prices and
// zones (test/judges/replacement-differential.test.ts, drift-differential.test.ts).
import {
  decide,
  type DisruptionEvidence,
  type DisruptionMark,
  type Effect,
  type EngineSettings,
  type OverlayIndex,
  parseApproval,
  parseSelector,
  type PoolOffering,
  recordKeys,
  toNodeClaimView,
  toNodeView,
} from '../../src/engine/index.ts';
import type { LaunchKnowledge } from '../../src/engine/decide.ts';
import { type FitSizing, KARPENTER_DEFAULTS } from '../../src/engine/effect/allocatable.ts';
import type { CaseSizing } from './case-sizing.ts';
import { catalogPrices, type OverlayChange } from './judged-cluster.ts';
import type { WorldCommand } from './karpenter-oracle.ts';
import { nodeLabelsOfType } from './launch-cases.ts';
import { capacityOf, type ConsolidationCase } from './replacement-cases.ts';

export const settings: EngineSettings = { keys: recordKeys('veneer.io'), gracePeriodMs: 60_000, provider: 'auto' };
export const policy = { selector: parseSelector('app.kubernetes.io/managed-by=veneer'), requireOverlayReady: true };
/** When the replacement's NodeClaim is created; the marks are a second before. */
export const T0 = Date.parse('2026-02-01T10:00:00Z');
const at = (ms: number) => new Date(ms).toISOString();
/** An overlay that came or went while Karpenter decided, when Karpenter priced, and the ConsolidationCandidate Event that dates it, if published. */
export type Moment = OverlayChange & { decidedAt: number; candidateAt?: number };

/** The provider's allocatable as a NodeClaim's status carries it. */
const allocatableQuantities = (a: { cpu: number; memory: number; pods: number }) => ({
  cpu: `${a.cpu}m`,
  memory: String(a.memory),
  pods: String(a.pods),
});

/**
 * The engine's effect on the replacement of `set` for `reason` (Underutilized: consolidation's;
 * Drifted: drift's), decided as the watcher decides its node.
 */
export function engineEffect(
  c: ConsolidationCase,
  sizing: CaseSizing,
  index: OverlayIndex,
  set: string[],
  w: WorldCommand,
  launched: string,
  priceOverlayApplied: boolean,
  change: Moment | undefined,
  reason: 'Underutilized' | 'Drifted' = 'Underutilized',
): { effect: Effect | undefined; outcome: string } {
  const r = w.replacement!;
  const types = new Map(c.request.instanceTypes.map((x) => [x.name, nodeLabelsOfType(x)]));
  const zone = c.catalog.get(launched)!.zones.find((z) => {
    const zonesReq = r.requirements.find((q) => q.key === 'topology.kubernetes.io/zone');
    return zonesReq?.values === undefined || zonesReq.values.includes(z);
  })!;
  const marks: DisruptionMark[] = set.map((name) => {
    const n = c.request.nodes.find((x) => x.name === name)!;
    // The judge's NodeClaims carry their type's allocatable in their status, as Karpenter writes it at launch.
    const { allocatable } = toNodeClaimView({
      metadata: { name: `${name}-claim` },
      status: {
        conditions: [{ type: 'DisruptionReason', status: 'True', reason }],
        allocatable: allocatableQuantities(sizing.allocatable.get(n.instanceType)!),
      },
    });
    return {
      nodeClaim: `${name}-claim`,
      node: name,
      reason,
      markedAt: T0 - 1000,
      labels: {
        ...types.get(n.instanceType),
        'karpenter.sh/nodepool': n.nodePool,
        'karpenter.sh/capacity-type': n.capacityType,
        'topology.kubernetes.io/zone': n.zone,
      },
      ...(allocatable ? { allocatable } : {}),
    };
  });
  // Balanced's approval, published as the command was computed (before its 15 s validation): on the
  // candidate's NodeClaim for one node, on each NodePool for several.
  const approvedAt = Math.floor((change?.decidedAt ?? T0 - 20_000) / 1000) * 1000;
  const approvals = new Map(
    Object.entries(w.balanced?.approvals ?? {}).map(([pool, message]) => [
      set.length === 1 ? `NodeClaim/${set[0]}-claim` : `NodePool/${pool}`,
      [{ at: approvedAt, figures: parseApproval(message)! }],
    ]),
  );
  const evidence: DisruptionEvidence = {
    launching: (name) => (name === 'replacement-claim' ? reason : undefined),
    marksBetween: (from, to) => marks.filter((m) => m.markedAt >= from && m.markedAt <= to),
    replacementsCreatedBetween: () => ['replacement-claim'],
    approvalsBetween: (kind, name, from, to) =>
      (approvals.get(`${kind}/${name}`) ?? []).filter((a) => a.at >= from && a.at <= to),
    ...(change?.candidateAt !== undefined
      ? {
          candidateAt: (_: string, notAfter: number) =>
            change.candidateAt! <= notAfter ? change.candidateAt : undefined,
        }
      : {}),
  };
  // What ClusterCost counts: the cluster's NodeClaims, by NodePool and offering.
  const offerings = new Map<string, PoolOffering[]>();
  for (const n of c.request.nodes) {
    const pool = offerings.get(n.nodePool) ?? [];
    const same = pool.findIndex(
      (o) => o.instanceType === n.instanceType && o.zone === n.zone && o.capacityType === n.capacityType,
    );
    if (same === -1) pool.push({ instanceType: n.instanceType, zone: n.zone, capacityType: n.capacityType, count: 1 });
    else pool[same] = { ...pool[same]!, count: pool[same]!.count + 1 };
    offerings.set(n.nodePool, pool);
  }
  // A node of each of the cluster's types registered: the provider may hold the memory it reported.
  const fit: FitSizing = {
    nodeClass: sizing.nodeClass,
    settings: KARPENTER_DEFAULTS,
    registered: new Set(c.request.nodes.map((n) => n.instanceType)),
  };
  const launch: LaunchKnowledge = {
    prices: catalogPrices(c.catalog, T0, sizing.info),
    sizingOf: () => fit,
    zonesOf: () => new Set(c.zones),
    instanceLabels: types,
    disruption: evidence,
    poolOfferings: (pool) => offerings.get(pool),
    // What its limits count: every node of the pool, with its type's capacity (the judge's NodeClaims carry it).
    poolCapacity: (pool, _createdBefore, except) => {
      const others = c.request.nodes.filter((n) => n.nodePool === pool && !except.has(`${n.name}-claim`));
      const sum = (resource: string) => others.reduce((s, n) => s + capacityOf(c, n.instanceType, resource), 0);
      return { cpu: sum('cpu'), memory: sum('memory'), pods: sum('pods') };
    },
  };
  const claim = toNodeClaimView({
    metadata: {
      name: 'replacement-claim',
      labels: {
        'karpenter.sh/nodepool': r.nodePool,
        'karpenter.sh/capacity-type': 'on-demand',
        'node.kubernetes.io/instance-type': launched,
      },
      creationTimestamp: at(T0),
      ...(priceOverlayApplied ? { annotations: { 'karpenter.sh/price-overlay-applied': 'true' } } : {}),
    },
    spec: {
      nodeClassRef: { group: 'karpenter.k8s.aws', kind: 'EC2NodeClass', name: 'default' },
      requirements: r.requirements,
      ...(r.requests ? { resources: { requests: r.requests } } : {}),
    },
    status: { providerID: `aws:///${zone}/i-replacement`, nodeName: 'replacement' },
  });
  const node = toNodeView({
    metadata: {
      name: 'replacement',
      creationTimestamp: at(T0 + 5_000),
      labels: {
        ...types.get(launched),
        'karpenter.sh/nodepool': r.nodePool,
        'karpenter.sh/capacity-type': 'on-demand',
        'topology.kubernetes.io/zone': zone,
        'karpenter.sh/registered': 'true',
      },
    },
    spec: { providerID: `aws:///${zone}/i-replacement` },
  });
  const d = decide({ node, nodeClaim: claim, now: T0 + 10_000, decidedBy: 'reconciler', launch }, index, settings);
  return {
    effect: d.outcome === 'influenced' || d.outcome === 'not-influenced' ? d.effect : undefined,
    outcome: d.outcome,
  };
}

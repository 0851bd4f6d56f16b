// The effect of a consolidation replacement per node, beside the launch effect's (bench/decision.ts,
// same setting): the replaced node's price and every option's in both worlds, and then either the
// launch replay (`anyway`: the replacement would have happened without the overlays) or the scan of
// the catalog's types no option lists (`caused`: nothing undercuts without them), or the same for
// two nodes replaced by one (`multi`: multi-node consolidation, its filterOutSameInstanceType and
// the pods' requests read too), or the `anyway` path in a Balanced pool (`balanced`: its score
// without the overlays, from Karpenter's ConsolidationApproved Event, before the launch replay). A burst: every node from one NodeClaim's options, as a multi-node
// consolidation's or a drift wave's replacements share them.
import { type DisruptionEvidence, KARPENTER_DEFAULTS, nodeClassSizing } from '../src/engine/index.ts';
import { karpenterNode } from '../kit/veneer.ts';
import { type DecisionEngine, effectFixture, THIS_ENGINE } from './decision.ts';

/** What DescribeInstanceTypes says of the catalog's types: 4 vCPUs and 16 GiB hold the replacement's requests. */
const DESCRIBED = { vcpus: 4, memoryMiB: 16384, arch: 'x86_64', maxENIs: 4, ipv4PerENI: 15 };
const AL2023 = nodeClassSizing({ amiSelectorTerms: [{ alias: 'al2023@latest' }] });

export type ReplacementPath = 'anyway' | 'caused' | 'multi' | 'balanced';

/** `round` names the types apart, so that each call starts with no work of an earlier one kept (bench/ab.ts runs several). */
export function replacementPerNode(
  candidates: number,
  total: number,
  nodes: number,
  path: ReplacementPath,
  e: DecisionEngine = THIS_ENGINE,
  round = '',
): number[] {
  const family = `${{ anyway: 'ra', caused: 'rc', multi: 'rm', balanced: 'rb' }[path]}${round}`;
  const caused = path === 'caused' || path === 'multi';
  const options = effectFixture(candidates, 0, family).names;
  // `caused`: a selected overlay prices every option on-demand at 0.00; the replaced node lists
  // below all of them, so without the overlays nothing undercuts it.
  const free = {
    metadata: { name: `free-${family}`, labels: { 'app.kubernetes.io/managed-by': 'veneer' } },
    spec: {
      weight: 50,
      price: '0.00',
      requirements: [
        { key: 'karpenter.sh/capacity-type', operator: 'In', values: ['on-demand'] },
        { key: 'node.kubernetes.io/instance-type', operator: 'In', values: options },
      ],
    },
  };
  // The Compute Savings Plan overlay prices every on-demand offering at 0.00, the replaced node's
  // too: nothing would undercut it, and Karpenter would replace nothing.
  const f = effectFixture(
    candidates,
    total,
    family,
    (veneer) => [...veneer.filter((o) => !o.metadata?.name?.includes('compute-sp')), ...(caused ? [free] : [])],
    path === 'balanced' ? 'Balanced' : undefined,
    e,
  );
  const names = f.names;
  // The replaced node's type: below every option's list price (`caused`, `multi`), or far above (`anyway`).
  const replacedType = `q${family}.large`;
  // Two nodes (`multi`) at half the price undercut no option together either.
  const replacedPrice = { anyway: 5, caused: 0.09, multi: 0.045, balanced: 5 }[path];
  const od = (x: string) => (x === replacedType ? replacedPrice : f.od.get(x));
  const prices = {
    ...f.prices,
    onDemand: (x: string) => od(x),
    spot: (x: string, z: string) => (od(x) ?? 0) * (0.33 + f.zones.indexOf(z) / 100),
    // DescribeInstanceTypes: the pods' fit is computed (fit.ts), as the watcher computes it on AWS.
    instanceInfo: (x: string) =>
      x === replacedType ? { ...DESCRIBED, vcpus: 2, memoryMiB: 8192, maxENIs: 3, ipv4PerENI: 10 } : DESCRIBED,
  };
  const marks = (path === 'multi' ? ['old', 'old-2'] : ['old']).map((name) => ({
    nodeClaim: name,
    node: name,
    reason: 'Underutilized',
    markedAt: f.now - 31_000,
    labels: karpenterNode({ name, instanceType: replacedType, zone: 'us-east-1a' }).metadata?.labels ?? {},
  }));
  const evidence: DisruptionEvidence = {
    launching: () => 'Underutilized',
    marksBetween: (from, to) => marks.filter((m) => m.markedAt >= from && m.markedAt <= to),
    replacementsCreatedBetween: () => [],
    // `balanced`: Karpenter's approval of the move, the one node the whole pool's cost.
    candidateAt: () => f.now - 50_000,
    approvalsBetween: (kind, name) =>
      path === 'balanced' && kind === 'NodeClaim' && name === 'old'
        ? [
            {
              at: f.now - 50_000,
              figures: { score: 1.96, threshold: 0.5, k: 2, savingsPct: 98, disruptionPct: 50 },
            },
          ]
        : [],
  };
  // One list while the pool's NodeClaims stay as they are, as the caches hand it out.
  const offerings = [{ instanceType: replacedType, zone: 'us-east-1a', capacityType: 'on-demand', count: 2 }];
  const poolOfferings = () => offerings;
  // `multi`: the pods ask for more than a replaced node's type holds, as a seen node of it tells, so
  // that type was no option and filterOutSameInstanceType has nothing to take.
  const replacedLabels = { ...marks[0]!.labels, 'karpenter.k8s.aws/instance-cpu': '2' };
  const instanceLabels = new Map([[replacedType, replacedLabels]]);
  // nodeLabelsOf: the same, as engines before the labels were handed over as one map read them
  // (bench/ab.ts runs this input on another commit's engine too).
  const nodeLabelsOf = (x: string) => instanceLabels.get(x);
  const sizing = { nodeClass: AL2023, settings: KARPENTER_DEFAULTS, registered: new Set(instanceLabels.keys()) };
  const launch = {
    ...f.launch,
    prices,
    disruption: evidence,
    instanceLabels,
    nodeLabelsOf,
    poolOfferings,
    // The NodeClass's sizing, one object as the caches hand it out (engines before the fit ignore it).
    sizingOf: () => sizing,
  };
  // On-demand: the watcher records on-demand nodes only.
  const capacityTypes = ['on-demand'];
  const out: number[] = [];
  let decided = 0;
  let first: unknown;
  for (let i = 0; i < nodes; i++) {
    // `anyway`, `balanced`: the launch replay predicts the cheapest option, which no overlay prices.
    const type = caused ? names[(i * 7919) % names.length]! : names[0]!;
    const node = e.toNodeView(
      karpenterNode({
        name: `n${i}`,
        instanceType: type,
        capacityType: 'on-demand',
        zone: 'us-east-1a',
        createdAt: new Date(f.now - 5000).toISOString(),
      }),
    );
    const claim = e.toNodeClaimView({
      metadata: {
        name: `c${i}`,
        labels: { 'karpenter.sh/nodepool': 'default' },
        annotations: { 'karpenter.sh/price-overlay-applied': 'true' },
        creationTimestamp: new Date(f.now - 30_000).toISOString(),
      },
      spec: {
        nodeClassRef: { group: 'karpenter.k8s.aws', kind: 'EC2NodeClass', name: 'default' },
        requirements: f.requirements(names, capacityTypes),
        resources: { requests: { cpu: '3', memory: '512Mi', pods: '2' } },
      },
      status: { providerID: `aws:///us-east-1a/i-${i}` },
    });
    const start = process.hrtime.bigint();
    const d = e.decide({ node, nodeClaim: claim, now: f.now, decidedBy: 'webhook', launch }, f.index, f.settings);
    out.push(Number(process.hrtime.bigint() - start) / 1000);
    const expected = caused ? 'replacement' : undefined;
    if (
      (d.outcome === 'influenced' || d.outcome === 'not-influenced') &&
      d.effect.disruption !== undefined &&
      d.effect.verdict !== 'unknown' &&
      (expected === undefined || d.effect.verdict === expected)
    )
      decided++;
    else first ??= d;
  }
  if (decided !== nodes)
    throw new Error(
      `${nodes - decided} of ${nodes} replacements were not decided as the ${path} path; the first: ${JSON.stringify((first as { effect?: unknown }).effect ?? first).slice(0, 1500)}`,
    );
  return out;
}

// The consolidation judge (test/judges/oracle consolidate.go: Karpenter's own computeConsolidation,
// SimulateScheduling, provisioner and scheduler, candidates from GetCandidates, prices from its
// NodeOverlay store through the overlay decorator) on small hand-made cases that pin down what the
// watcher relies on, for every Karpenter version the judge is built for. If one of these fails after
// a Karpenter upgrade, Karpenter's consolidation changed, and the notes
// (/work/shared/notes/karpenter-disruption.md) and the watcher's reading of replacements need another look.
import t from 'tap';
import {
  JUDGE_VERSIONS,
  KarpenterJudge,
  type ConsolidateAnswer,
  type ConsolidateNode,
  type ConsolidateNodePool,
  type ConsolidateRequest,
  type JudgeInstanceType,
  type JudgeNodePoolRequirement,
  type JudgeOverlay,
  type WorldCommand,
} from './karpenter-oracle.ts';

const req = (key: string, operator: string, ...values: string[]) =>
  values.length > 0 ? { key, operator, values } : { key, operator };

const ZONE = 'us-east-1a';
const zone = [req('topology.kubernetes.io/zone', 'In', ZONE), req('topology.k8s.aws/zone-id', 'In', 'use1-az1')];

/** An AWS-shaped instance type in one zone, offered on-demand and spot. */
function instanceType(name: string, cpu: string, memory: string, onDemand: number, spot: number): JudgeInstanceType {
  const family = name.split('.')[0] ?? name;
  return {
    name,
    requirements: [
      req('node.kubernetes.io/instance-type', 'In', name),
      req('karpenter.k8s.aws/instance-family', 'In', family),
      req('karpenter.k8s.aws/instance-cpu', 'In', cpu),
      req('kubernetes.io/arch', 'In', 'amd64'),
      req('kubernetes.io/os', 'In', 'linux'),
      req('topology.kubernetes.io/region', 'In', 'us-east-1'),
      req('karpenter.sh/capacity-type', 'In', 'on-demand', 'spot'),
      ...zone,
    ],
    offerings: [
      {
        requirements: [req('karpenter.sh/capacity-type', 'In', 'on-demand'), ...zone],
        price: onDemand,
        available: true,
      },
      { requirements: [req('karpenter.sh/capacity-type', 'In', 'spot'), ...zone], price: spot, available: true },
    ],
    capacity: { cpu, memory, pods: '29' },
  };
}

// us-east-1 list prices: c6i.large is the cheapest of the three on-demand, m5.large is not.
const C6I = instanceType('c6i.large', '2', '4Gi', 0.085, 0.035);
const M5 = instanceType('m5.large', '2', '8Gi', 0.096, 0.04);
const R6I = instanceType('r6i.large', '2', '16Gi', 0.126, 0.05);
const TYPES = [C6I, M5, R6I];

const types = (...names: string[]) => req('node.kubernetes.io/instance-type', 'In', ...names);
const onDemandOnly = req('karpenter.sh/capacity-type', 'In', 'on-demand');
const spotOrOnDemand = req('karpenter.sh/capacity-type', 'In', 'spot', 'on-demand');
const pool = (name: string, ...requirements: JudgeNodePoolRequirement[]): ConsolidateNodePool => ({
  name,
  labels: {},
  requirements,
});
const OD_POOL = pool('od', onDemandOnly, types('c6i.large', 'm5.large', 'r6i.large'));
const MIXED_POOL = pool('mixed', spotOrOnDemand, types('c6i.large', 'm5.large', 'r6i.large'));

/** The RI-style overlay: m5.large on-demand at 0.00. */
const riOverlay = (selected: boolean): JudgeOverlay & { selected: boolean } => ({
  name: 'ri-m5',
  weight: 10,
  requirements: [types('m5.large'), onDemandOnly],
  price: '0.00',
  selected,
});

const POD = { cpu: '500m', memory: '512Mi' };
const node = (
  name: string,
  nodePool: string,
  instanceType: string,
  capacityType: ConsolidateNode['capacityType'],
  pods = [POD],
): ConsolidateNode => ({ name, nodePool, instanceType, zone: ZONE, capacityType, pods });

const requirement = (c: WorldCommand, key: string) => c.replacement?.requirements.find((r) => r.key === key);

for (const version of JUDGE_VERSIONS) {
  t.test(`Karpenter ${version}`, async (t) => {
    const judge = new KarpenterJudge(version);
    t.teardown(() => judge.close());
    const ask = async (r: Partial<ConsolidateRequest> & Pick<ConsolidateRequest, 'nodes' | 'commands'>) => {
      const a: ConsolidateAnswer = await judge.consolidate({
        instanceTypes: TYPES,
        nodePools: [OD_POOL],
        overlays: [],
        spotToSpot: false,
        ...r,
      });
      t.equal(a.error, undefined, 'the request ran');
      t.equal(a.commands.length, r.commands.length, 'one answer per command');
      return a;
    };

    t.test('on-demand-only NodePool: a c6i.large is replaced by m5.large only with the 0.00 overlay', async (t) => {
      const a = await ask({
        overlays: [riOverlay(true)],
        nodes: [node('n1', 'od', 'c6i.large', 'on-demand')],
        commands: [['n1']],
      });
      const [c] = a.commands;
      t.match(c?.with, {
        decision: 'replace',
        candidatePrice: 0.085,
        replacement: { nodePool: 'od', instanceTypes: ['m5.large'] },
      });
      // The replacement NodeClaim's requirements exactly as ToNodeClaim writes them (sorted by key).
      t.same(c?.with.replacement?.requirements, [
        req('karpenter.k8s.aws/ec2nodeclass', 'In', 'default'),
        req('karpenter.sh/capacity-type', 'In', 'on-demand'),
        req('karpenter.sh/nodepool', 'In', 'od'),
        req('node.kubernetes.io/instance-type', 'In', 'm5.large'),
      ]);
      // Nothing on-demand is cheaper than the cheapest on-demand type at list price.
      t.match(c?.without, { decision: 'none', candidatePrice: 0.085, reason: "Can't replace with a cheaper node" });
      t.equal(c?.without.replacement, undefined);
      t.match(
        a.statuses['ri-m5']?.conditions.find((x) => x.type === 'Ready'),
        { status: 'True' },
      );
      t.same(a.statusesWithout, {}, 'the selected overlay is not in the other world');
    });

    t.test('mixed NodePool: the replacement is narrowed to spot even with the on-demand 0.00 overlay', async (t) => {
      const a = await ask({
        nodePools: [MIXED_POOL],
        overlays: [riOverlay(true)],
        nodes: [node('n1', 'mixed', 'r6i.large', 'on-demand')],
        commands: [['n1']],
      });
      const [c] = a.commands;
      for (const world of ['with', 'without'] as const) {
        t.match(c?.[world], { decision: 'replace', candidatePrice: 0.126 }, world);
        t.same(requirement(c![world], 'karpenter.sh/capacity-type')?.values, ['spot'], `${world}: spot only`);
      }
      // Every spot price is below the node's 0.126, so all three stay. The options are ordered by price
      // BEFORE the narrowing to spot (consolidation.go OrderByPrice, then the spot requirement): with
      // the overlay, m5.large's on-demand 0.00 puts it first, although only its spot offering can launch.
      t.same(c?.with.replacement?.instanceTypes, ['m5.large', 'c6i.large', 'r6i.large']);
      t.same(c?.without.replacement?.instanceTypes, ['c6i.large', 'm5.large', 'r6i.large']);
    });

    t.test('minValues: the 0.00 type alone cannot replace, and a replacement keeps minValues', async (t) => {
      const minTwo = pool('od', onDemandOnly, { ...types('c6i.large', 'm5.large', 'r6i.large'), minValues: 2 });
      const ask1 = (instanceType: string) =>
        ask({
          nodePools: [minTwo],
          overlays: [riOverlay(true)],
          nodes: [node('n1', 'od', instanceType, 'on-demand')],
          commands: [['n1']],
        });
      const [c6i] = (await ask1('c6i.large')).commands;
      t.match(c6i?.with, {
        decision: 'none',
        candidatePrice: 0.085,
        reason:
          'Filtering by price: minValues requirement is not met for label(s) (label(s)=[node.kubernetes.io/instance-type])',
      });
      t.match(c6i?.without, { decision: 'none', reason: "Can't replace with a cheaper node" });
      const [r6i] = (await ask1('r6i.large')).commands;
      for (const world of ['with', 'without'] as const) {
        t.match(r6i?.[world], { decision: 'replace', candidatePrice: 0.126 }, world);
        t.same(
          requirement(r6i![world], 'node.kubernetes.io/instance-type'),
          { ...types('c6i.large', 'm5.large'), minValues: 2 },
          world,
        );
      }
      t.same(r6i?.with.replacement?.instanceTypes, ['m5.large', 'c6i.large']);
    });

    t.test('an on-demand node priced 0.00 is never replaced', async (t) => {
      const a = await ask({
        overlays: [riOverlay(true)],
        nodes: [node('n1', 'od', 'm5.large', 'on-demand')],
        commands: [['n1']],
      });
      const [c] = a.commands;
      t.match(c?.with, { decision: 'none', candidatePrice: 0, reason: "Can't replace with a cheaper node" });
      // At its list price (0.096) the cheaper c6i.large (0.085) replaces it.
      t.match(c?.without, {
        decision: 'replace',
        candidatePrice: 0.096,
        replacement: { instanceTypes: ['c6i.large'] },
      });
    });

    t.test('an empty candidate is deleted, in both worlds', async (t) => {
      const a = await ask({
        overlays: [riOverlay(true)],
        nodes: [node('n1', 'od', 'm5.large', 'on-demand', [])],
        commands: [['n1']],
      });
      const [c] = a.commands;
      t.match(c?.with, { decision: 'delete', candidatePrice: 0 });
      t.match(c?.without, { decision: 'delete', candidatePrice: 0 });
    });

    t.test('spot to spot needs the gate and 15 cheaper options for a single node', async (t) => {
      // 20 spot types, t00 the cheapest; the node runs on the most expensive.
      const many = Array.from({ length: 20 }, (_, i) => {
        const name = `t${String(i).padStart(2, '0')}.large`;
        return instanceType(name, '2', '8Gi', 0.1 + i / 100, 0.03 + i / 1000);
      });
      const names = many.map((it) => it.name);
      const spotPool = pool('spot', spotOrOnDemand, types(...names));
      // Each node alone in its cluster (with two, the pods of one would move to the other: a delete).
      const ask1 = (n: ConsolidateNode, spotToSpot: boolean) =>
        ask({ instanceTypes: many, nodePools: [spotPool], nodes: [n], commands: [[n.name]], spotToSpot });
      const n19 = node('n19', 'spot', 't19.large', 'spot'); // 19 cheaper spot types
      const n10 = node('n10', 'spot', 't10.large', 'spot'); // 10 cheaper spot types
      const off = (await ask1(n19, false)).commands[0];
      t.match(off?.with, {
        decision: 'none',
        candidatePrice: 0.049,
        reason: "SpotToSpotConsolidation is disabled, can't replace a spot node with a spot node",
      });
      const on = (await ask1(n19, true)).commands[0];
      t.match(on?.with, { decision: 'replace', candidatePrice: 0.049 });
      t.same(on?.with.replacement?.instanceTypes, names.slice(0, 15), 'cut to the 15 cheapest');
      t.same(requirement(on!.with, 'karpenter.sh/capacity-type')?.values, ['spot']);
      const few = (await ask1(n10, true)).commands[0];
      t.match(few?.with, {
        decision: 'none',
        candidatePrice: 0.04,
        reason:
          'SpotToSpotConsolidation requires 15 cheaper instance type options than the current candidate to consolidate, got 10',
      });
    });

    t.test(
      'two nodes into one: only an option below the replaced type among the options (filterOutSameInstanceType)',
      async (t) => {
        const a = await ask({
          overlays: [riOverlay(true)],
          nodes: [node('n1', 'od', 'c6i.large', 'on-demand'), node('n2', 'od', 'c6i.large', 'on-demand')],
          commands: [['n1', 'n2']],
        });
        const [c] = a.commands;
        // Every type undercuts the two nodes together ($0.17), none undercuts c6i.large itself ($0.085):
        // Karpenter would rather delete one of them.
        t.match(c?.without, {
          decision: 'none',
          candidatePrice: 0.17,
          reason: 'filterOutSameInstanceType: no option left',
        });
        t.match(c?.with, { decision: 'replace', candidatePrice: 0.17 });
        t.same(c?.with.replacement?.instanceTypes, ['m5.large'], 'only the 0.00 type undercuts c6i.large');
      },
    );
  });
}

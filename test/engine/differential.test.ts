// Karpenter's own code judges the decision engine. Generated overlays and nodes go to
// test/karpenter-oracle (sigs.k8s.io/karpenter v1.14.1: NewNodeSelectorRequirements,
// NewLabelRequirements, IsCompatible, NodeOverlayList.OrderByWeight) and, through `decide`, the
// entry point the webhook and the reconciler use, to the engine; every node's winner must agree.
//
// VENEER_ORACLE_DECISIONS sets the number of node decisions (default 20,000), VENEER_ORACLE_SEED
// replays a run. A disagreement fails with fast-check's seed and shrunk case.
import fc from 'fast-check';
import t from 'tap';
import { decide, toNodeView, toOverlayView, type OverlayObject } from '../../src/engine/index.ts';
import { NORMALIZED_LABEL_VALUES, NORMALIZED_LABELS } from '../../src/engine/normalize.ts';
import { combineRequirements, requirementPasses, type RequirementSpec } from '../../src/engine/requirements.ts';
import { KarpenterOracle, type OracleCase } from '../support/karpenter-oracle.ts';
import { newIndex, settings, T0 } from './fixtures.ts';

const NODES_PER_CASE = 10;
const DECISIONS = Number(process.env.VENEER_ORACLE_DECISIONS ?? 20_000);
const SEED = Number(process.env.VENEER_ORACLE_SEED ?? Date.now() % 1_000_000);

// Few keys, so that requirements repeat keys; deprecated keys beside their stable names.
const KEYS = [
  'node.kubernetes.io/instance-type', 'beta.kubernetes.io/instance-type',
  'topology.kubernetes.io/zone', 'failure-domain.beta.kubernetes.io/zone',
  'topology.kubernetes.io/region', 'failure-domain.beta.kubernetes.io/region',
  'kubernetes.io/arch', 'beta.kubernetes.io/arch', 'kubernetes.io/os', 'beta.kubernetes.io/os',
  'karpenter.k8s.aws/instance-cpu', 'karpenter.k8s.aws/instance-memory', 'karpenter.sh/capacity-type',
  'example.com/team', 'constructor',
];
// Integer edges around the bounds (N-1, N, N+1), and strings strconv.Atoi must refuse or read oddly.
const BOUNDS = ['0', '1', '3', '4', '5', '4095', '4096', '4097', '007', '9223372036854775806', '9223372036854775807'];
const VALUES = [...BOUNDS, '2', '6', '-1', '12a', '1e3', '0x10', '', '+5', 'a', 'b', 'm5.xlarge', 'on-demand', 'spot'];
const OPERATORS = ['In', 'NotIn', 'Exists', 'DoesNotExist', 'Gt', 'Lt', 'Gte', 'Lte'] as const;
const BASE_LABELS = { 'karpenter.sh/nodepool': 'default', 'karpenter.sh/capacity-type': 'on-demand', 'karpenter.sh/registered': 'true' };

const requirement = (keys: string[]): fc.Arbitrary<RequirementSpec> =>
  fc.record({ key: fc.constantFrom(...keys), operator: fc.constantFrom(...OPERATORS) }).chain(({ key, operator }): fc.Arbitrary<RequirementSpec> => {
    switch (operator) {
      case 'In':
      case 'NotIn':
        return fc.uniqueArray(fc.constantFrom(...VALUES), { minLength: 1, maxLength: 3 }).map((values) => ({ key, operator, values }));
      case 'Exists':
      case 'DoesNotExist':
        return fc.constant({ key, operator });
      default:
        return fc.constantFrom(...BOUNDS).map((bound) => ({ key, operator, values: [bound] }));
    }
  });

const oracleCase: fc.Arbitrary<OracleCase> = fc.shuffledSubarray(KEYS, { minLength: 2, maxLength: 5 }).chain((keys) => fc.record({
  overlays: fc.uniqueArray(fc.record({
    name: fc.constantFrom('a', 'b', 'c', 'ab', 'b1', 'cost-aware-ri-m5.xlarge-us-west-2'),
    weight: fc.option(fc.constantFrom(1, 10, 20, 30), { nil: undefined }),
    requirements: fc.array(requirement(keys), { minLength: 1, maxLength: 8 }),
  }), { minLength: 1, maxLength: 6, selector: (o) => o.name }),
  nodes: fc.array(fc.dictionary(fc.constantFrom(...keys), fc.constantFrom(...VALUES), { maxKeys: keys.length }), { minLength: NODES_PER_CASE, maxLength: NODES_PER_CASE }),
}));

const nodeLabels = (labels: Record<string, string>) => ({ ...labels, ...BASE_LABELS });

/** The engine's answer per node, through `decide` with an index as the watcher builds it. */
function engineWinners(c: OracleCase): (string | null)[] {
  const index = newIndex();
  const overlays = c.overlays.map((o): OverlayObject => ({
    metadata: { name: o.name, labels: { 'app.kubernetes.io/managed-by': 'veneer' }, creationTimestamp: new Date(T0 - 60_000).toISOString() },
    spec: { requirements: o.requirements, price: '0.00', ...(o.weight !== undefined ? { weight: o.weight } : {}) },
  }));
  index.replaceAll(overlays.map((o) => toOverlayView(o)), T0 - 60_000);
  index.markSynced(T0 - 60_000);
  return c.nodes.map((labels, i) => {
    const node = toNodeView({ metadata: { name: `n${i}`, labels, creationTimestamp: new Date(T0).toISOString() } });
    const d = decide({ node, now: T0 + 1_000, decidedBy: 'reconciler' }, index, settings);
    if (d.outcome !== 'influenced' && d.outcome !== 'not-influenced') throw new Error(`node ${i} not decided: ${JSON.stringify(d)}`);
    return d.overlay?.name ?? null;
  });
}

/** Requirement by requirement on the raw keys: the rules the engine followed before it mirrored Karpenter. */
function naiveMatch(requirements: RequirementSpec[], labels: Record<string, string>): boolean {
  return requirements.every((spec) => {
    const [req] = combineRequirements([spec]);
    return req !== undefined && requirementPasses(req, Object.hasOwn(labels, spec.key) ? labels[spec.key] : undefined);
  });
}

const oracle = new KarpenterOracle();
t.teardown(() => oracle.close());

t.test('the normalization tables are Karpenter\'s (v1.NormalizedLabels, v1.NormalizedLabelValues)', async (t) => {
  const tables = await oracle.tables();
  t.same(Object.fromEntries(NORMALIZED_LABELS), tables.normalizedLabels);
  t.same(Object.fromEntries([...NORMALIZED_LABEL_VALUES].map(([k, m]) => [k, Object.fromEntries(m)])), tables.normalizedLabelValues);
});

t.test(`${DECISIONS} node decisions agree with Karpenter's code`, async (t) => {
  t.comment(`seed ${SEED} (rerun with VENEER_ORACLE_SEED=${SEED})`);
  const stats = { decisions: 0, influenced: 0, naiveWouldDiffer: 0 };
  const started = Date.now();
  const result = await fc.check(fc.asyncProperty(oracleCase, async (generated) => {
    const c = { ...generated, nodes: generated.nodes.map(nodeLabels) };
    const [expected, actual] = [await oracle.winners(c), engineWinners(c)];
    if (JSON.stringify(expected) !== JSON.stringify(actual)) {
      throw new Error(`Karpenter: ${JSON.stringify(expected)}\nengine:    ${JSON.stringify(actual)}`);
    }
    for (const [i, labels] of c.nodes.entries()) {
      stats.decisions++;
      if (expected[i] !== null) stats.influenced++;
      const winner = c.overlays.find((o) => o.name === expected[i]);
      if (winner && !naiveMatch(winner.requirements, labels)) stats.naiveWouldDiffer++;
      else if (!winner && c.overlays.some((o) => naiveMatch(o.requirements, labels))) stats.naiveWouldDiffer++;
    }
  }), { numRuns: Math.ceil(DECISIONS / NODES_PER_CASE), seed: SEED });
  const seconds = (Date.now() - started) / 1000;
  t.notOk(result.failed, result.failed ? `${fc.defaultReportMessage(result) ?? 'failed'}\n${String(result.errorInstance)}` : 'no disagreement');
  if (result.failed) return;
  const share = (n: number) => `${((100 * n) / stats.decisions).toFixed(1)}%`;
  t.comment(`${stats.decisions} decisions in ${seconds.toFixed(1)} s; ${share(stats.influenced)} influenced; ${share(stats.naiveWouldDiffer)} decided differently by requirement-by-requirement rules on raw keys`);
  // Cases that cannot tell the rules apart would prove nothing.
  t.ok(stats.influenced > stats.decisions * 0.1 && stats.influenced < stats.decisions * 0.9, `both outcomes are common (${share(stats.influenced)} influenced)`);
  t.ok(stats.naiveWouldDiffer > stats.decisions * 0.02, `the cases reach the two rules: ${share(stats.naiveWouldDiffer)} of decisions differ from the naive rules`);
  console.error(`differential: ${stats.decisions} decisions in ${seconds.toFixed(1)} s, seed ${SEED}, ${share(stats.naiveWouldDiffer)} would differ under the naive rules`);
});

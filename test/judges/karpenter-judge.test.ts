// The judge itself (test/judges/oracle, Karpenter's own NodeOverlay controller and store), on
// small hand-made cases that pin down the behaviour the decision engine relies on, for every
// Karpenter version it is built for. If one of these fails after a Karpenter upgrade, Karpenter
// changed, and the engine's rules (and the notes they came from) need another look.
import t, { type Test } from 'tap';
import {
  JUDGE_VERSIONS,
  KarpenterJudge,
  type JudgeAnswer,
  type JudgeCase,
  type JudgeCondition,
  type JudgeInstanceType,
  type JudgeNodePool,
  type JudgeOverlay,
} from './karpenter-oracle.ts';

const req = (key: string, operator: string, ...values: string[]) =>
  values.length > 0 ? { key, operator, values } : { key, operator };

/** An AWS-shaped instance type in one zone: offering 0 on-demand, offering 1 spot (both carry the zone id, as AWS offerings do). */
function instanceType(name: string, price: number): JudgeInstanceType {
  const family = name.split('.')[0] ?? name;
  const zone = [
    req('topology.kubernetes.io/zone', 'In', 'us-east-1a'),
    req('topology.k8s.aws/zone-id', 'In', 'use1-az1'),
  ];
  return {
    name,
    requirements: [
      req('node.kubernetes.io/instance-type', 'In', name),
      req('karpenter.k8s.aws/instance-family', 'In', family),
      req('karpenter.k8s.aws/instance-cpu', 'In', '4'),
      req('kubernetes.io/arch', 'In', 'amd64'),
      req('kubernetes.io/os', 'In', 'linux'),
      req('topology.kubernetes.io/region', 'In', 'us-east-1'),
      req('karpenter.sh/capacity-type', 'In', 'on-demand', 'spot'),
      ...zone,
      req('karpenter.k8s.aws/instance-gpu-count', 'DoesNotExist'),
    ],
    offerings: [
      { requirements: [req('karpenter.sh/capacity-type', 'In', 'on-demand'), ...zone], price, available: true },
      { requirements: [req('karpenter.sh/capacity-type', 'In', 'spot'), ...zone], price: price / 3, available: true },
    ],
    capacity: { cpu: '4', memory: '16Gi', pods: '58' },
  };
}

const TYPES = [instanceType('m5.xlarge', 0.192), instanceType('c5.xlarge', 0.17)];
const POOLS: JudgeNodePool[] = [
  { name: 'default', labels: {}, requirements: [] },
  { name: 'ml', labels: { team: 'ml' }, requirements: [] },
  // A single-valued template requirement becomes a node label, but Karpenter does not compare it.
  { name: 'required', labels: {}, requirements: [req('team', 'In', 'ml')] },
];
const OD = 0;
const SPOT = 1;
const launch = (nodePool: string, instanceType: string, offering: number) => ({ nodePool, instanceType, offering });
const onDemand = req('karpenter.sh/capacity-type', 'In', 'on-demand');
const priced = (
  name: string,
  weight: number | undefined,
  ...requirements: JudgeOverlay['requirements']
): JudgeOverlay => ({ name, ...(weight === undefined ? {} : { weight }), requirements, price: '0.00' });

const condition = (a: JudgeAnswer, overlay: string, type: string): JudgeCondition | undefined =>
  a.statuses[overlay]?.conditions.find((c) => c.type === type);
const validation = (a: JudgeAnswer, overlay: string) => {
  const c = condition(a, overlay, 'ValidationSucceeded');
  return c === undefined ? undefined : { status: c.status, reason: c.reason };
};

for (const version of JUDGE_VERSIONS) {
  t.test(`Karpenter ${version}`, async (t) => {
    const judge = new KarpenterJudge(version);
    t.teardown(() => judge.close());
    const ask = async (t: Test, overlays: JudgeOverlay[], launches: JudgeCase['launches'], instanceTypes = TYPES) => {
      const a = await judge.judge({ instanceTypes, nodePools: POOLS, overlays, launches });
      t.equal(a.error, undefined, 'Reconcile succeeded');
      t.equal(a.applied.length, launches.length, 'one answer per launch');
      return a;
    };

    t.test('the heavier overlay wins an offering, whatever the names', async (t) => {
      const a = await ask(
        t,
        [priced('a-heavy', 20, onDemand), priced('z-light', 10, onDemand)],
        [launch('default', 'm5.xlarge', OD), launch('default', 'c5.xlarge', OD)],
      );
      t.same(a.applied, ['a-heavy', 'a-heavy']);
      t.same(validation(a, 'a-heavy'), { status: 'True', reason: 'ValidationSucceeded' });
      t.same(validation(a, 'z-light'), { status: 'True', reason: 'ValidationSucceeded' }, 'losing is no conflict');
    });

    t.test('an unset weight counts as 0 and loses to weight 1', async (t) => {
      const a = await ask(
        t,
        [priced('a-one', 1, onDemand), priced('z-unset', undefined, onDemand)],
        [launch('default', 'm5.xlarge', OD)],
      );
      t.same(a.applied, ['a-one']);
    });

    t.test('equal weight on one offering: the name sorting earlier is a Conflict and applies nowhere', async (t) => {
      const a = await ask(
        t,
        [
          priced('a-wide', 10, onDemand), // also the only one on c5.xlarge
          priced('b-narrow', 10, req('node.kubernetes.io/instance-type', 'In', 'm5.xlarge'), onDemand),
        ],
        [launch('default', 'm5.xlarge', OD), launch('default', 'c5.xlarge', OD), launch('ml', 'c5.xlarge', OD)],
      );
      t.same(a.applied, ['b-narrow', null, null]);
      t.same(validation(a, 'a-wide'), { status: 'False', reason: 'Conflict' });
      t.match(condition(a, 'a-wide', 'ValidationSucceeded'), { message: 'conflict with another overlay' });
      t.match(condition(a, 'a-wide', 'Ready'), { status: 'False', reason: 'UnhealthyDependents' });
      t.same(validation(a, 'b-narrow'), { status: 'True', reason: 'ValidationSucceeded' });
      t.match(condition(a, 'b-narrow', 'Ready'), { status: 'True' });
    });

    t.test('a tie beneath a heavier overlay is still a Conflict', async (t) => {
      const a = await ask(
        t,
        [
          priced('heavy', 30, req('node.kubernetes.io/instance-type', 'In', 'm5.xlarge'), onDemand),
          priced('a-tied', 10, onDemand),
          priced('b-tied', 10, req('node.kubernetes.io/instance-type', 'In', 'm5.xlarge'), onDemand),
        ],
        [launch('default', 'm5.xlarge', OD), launch('default', 'c5.xlarge', OD)],
      );
      t.same(a.applied, ['heavy', null]);
      t.same(validation(a, 'a-tied'), { status: 'False', reason: 'Conflict' });
      t.same(validation(a, 'b-tied'), { status: 'True', reason: 'ValidationSucceeded' });
    });

    t.test('an on-demand overlay does not price the spot offering', async (t) => {
      const a = await ask(
        t,
        [priced('od', 10, onDemand), priced('spot', 10, req('karpenter.sh/capacity-type', 'In', 'spot'))],
        [launch('default', 'm5.xlarge', OD), launch('default', 'm5.xlarge', SPOT)],
      );
      t.same(a.applied, ['od', 'spot'], 'different offerings of one type: no conflict');
      t.same(validation(a, 'od'), { status: 'True', reason: 'ValidationSucceeded' });
    });

    t.test('a key the instance type does not define: In applies nowhere, NotIn applies', async (t) => {
      const a = await ask(
        t,
        [priced('team-in', 20, req('team', 'In', 'ml')), priced('team-not-in', 10, req('team', 'NotIn', 'x'))],
        [
          launch('default', 'm5.xlarge', OD),
          launch('ml', 'm5.xlarge', OD),
          launch('required', 'm5.xlarge', OD),
          launch('default', 'm5.xlarge', SPOT),
        ],
      );
      t.same(
        a.applied,
        ['team-not-in', 'team-in', 'team-not-in', 'team-not-in'],
        'team In [ml] applies only where a NodePool template LABEL says team=ml; a template requirement does not count',
      );
    });

    t.test('karpenter.sh/nodepool is one of the compared keys', async (t) => {
      const a = await ask(
        t,
        [priced('ml-only', 10, req('karpenter.sh/nodepool', 'In', 'ml'))],
        [launch('default', 'm5.xlarge', OD), launch('ml', 'm5.xlarge', OD), launch('ml', 'c5.xlarge', SPOT)],
      );
      t.same(a.applied, [null, 'ml-only', 'ml-only']);
    });

    t.test('instance-type keys: a missing attribute is DoesNotExist, a present one compares', async (t) => {
      const a = await ask(
        t,
        [
          priced('gpu', 30, req('karpenter.k8s.aws/instance-gpu-count', 'Exists')),
          priced(
            'cpu-ge-4',
            20,
            req('karpenter.k8s.aws/instance-cpu', 'Gte', '4'),
            req('karpenter.k8s.aws/instance-family', 'In', 'c5'),
          ),
          priced('cpu-gt-4', 10, req('karpenter.k8s.aws/instance-cpu', 'Gt', '4')),
        ],
        [launch('default', 'm5.xlarge', OD), launch('default', 'c5.xlarge', OD)],
      );
      t.same(a.applied, [null, 'cpu-ge-4']);
    });

    t.test('the AWS zone id is a well-known key an offering carries', async (t) => {
      const a = await ask(
        t,
        [
          priced('az1', 10, req('topology.k8s.aws/zone-id', 'In', 'use1-az1')),
          priced('az2', 20, req('topology.k8s.aws/zone-id', 'In', 'use1-az2')),
        ],
        [launch('default', 'm5.xlarge', OD), launch('default', 'm5.xlarge', SPOT)],
      );
      t.same(a.applied, ['az1', 'az1']);
    });

    t.test('an offering key that is not well known must be named by the overlay', async (t) => {
      // Offerings are matched with AllowUndefinedWellKnownLabels only: an offering requirement on a
      // custom key (In) fails every overlay that does not mention that key, although the instance
      // type defines it too. This is why the AWS provider's keys (topology.k8s.aws/zone-id, ...) must
      // be registered as well known.
      const m5 = instanceType('m5.xlarge', 0.192);
      const pool = req('example.com/pool', 'In', 'p1');
      const custom = {
        ...m5,
        requirements: [...m5.requirements, pool],
        offerings: m5.offerings.map((o) => ({ ...o, requirements: [...o.requirements, pool] })),
      };
      const a = await ask(
        t,
        [priced('plain', 20, onDemand), priced('named', 10, onDemand, pool)],
        [launch('default', 'm5.xlarge', OD), launch('default', 'c5.xlarge', OD)],
        [custom, TYPES[1] as JudgeInstanceType],
      );
      t.same(a.applied, ['named', 'plain']);
    });

    t.test('restricted keys fail runtime validation and apply nowhere', async (t) => {
      const a = await ask(
        t,
        [
          priced('hostname', 30, req('kubernetes.io/hostname', 'NotIn', 'x')),
          priced('registered', 30, req('karpenter.sh/registered', 'NotIn', 'x')),
          priced('aws-unknown', 30, req('karpenter.k8s.aws/not-a-key', 'NotIn', 'x')),
          priced('aws-family', 20, req('karpenter.k8s.aws/instance-family', 'In', 'm5')),
        ],
        [launch('default', 'm5.xlarge', OD), launch('default', 'c5.xlarge', OD)],
      );
      t.same(
        a.applied,
        ['aws-family', null],
        'NotIn on a key the type lacks would match: only validation keeps them out',
      );
      for (const name of ['hostname', 'registered', 'aws-unknown']) {
        t.same(validation(a, name), { status: 'False', reason: 'RuntimeValidation' }, name);
        t.match(condition(a, name, 'Ready'), { status: 'False', reason: 'UnhealthyDependents' }, name);
      }
      t.same(
        validation(a, 'aws-family'),
        { status: 'True', reason: 'ValidationSucceeded' },
        'karpenter.k8s.aws/instance-family is well known',
      );
    });

    t.test('a capacity-only overlay prices nothing and takes no offering', async (t) => {
      const a = await ask(
        t,
        [
          { name: 'capacity', weight: 50, requirements: [onDemand], capacity: { 'example.com/device': '1' } },
          priced('price', 10, onDemand),
        ],
        [launch('default', 'm5.xlarge', OD)],
      );
      t.same(a.applied, ['price']);
      t.same(validation(a, 'capacity'), { status: 'True', reason: 'ValidationSucceeded' });
    });

    t.test('a priceAdjustment counts as a price', async (t) => {
      const a = await ask(
        t,
        [{ name: 'discount', weight: 5, requirements: [onDemand], priceAdjustment: '-10%' }],
        [launch('default', 'm5.xlarge', OD), launch('default', 'm5.xlarge', SPOT)],
      );
      t.same(a.applied, ['discount', null]);
    });

    t.test('statuses carry the overlay generation and the judge clock', async (t) => {
      const a = await ask(
        t,
        [
          { ...priced('seventh', 10, onDemand), generation: 7 },
          priced('first', 20, req('karpenter.sh/registered', 'In', 'true')),
        ],
        [],
      );
      const seventh = a.statuses.seventh?.conditions ?? [];
      t.same(seventh.map((c) => c.type).sort(), ['Ready', 'ValidationSucceeded']);
      for (const c of seventh) t.match(c, { observedGeneration: 7, lastTransitionTime: '2026-01-01T00:00:00Z' });
      for (const c of a.statuses.first?.conditions ?? []) t.equal(c.observedGeneration, 1, 'generation defaults to 1');
    });

    t.test('label tables as Karpenter sees them (with the AWS provider registered)', async (t) => {
      const tables = await judge.tables();
      t.equal(tables.normalizedLabels['failure-domain.beta.kubernetes.io/zone'], 'topology.kubernetes.io/zone');
      const wk = await judge.wellKnown();
      t.ok(wk.wellKnownLabels.includes('topology.k8s.aws/zone-id'));
      t.ok(wk.wellKnownLabels.includes('karpenter.k8s.aws/instance-family'));
      t.notOk(wk.wellKnownLabels.includes('size'), "Karpenter's fake cloud provider is not linked in");
      t.same(wk.restrictedLabelDomains, [...wk.restrictedLabelDomains].sort());
      t.ok(wk.restrictedLabelDomains.includes('karpenter.k8s.aws'));
    });

    t.test('pipelined requests come back in order', async (t) => {
      const names = Array.from({ length: 200 }, (_, i) => `o${i}`);
      const answers = await Promise.all(
        names.map((name) =>
          judge.judge({
            instanceTypes: TYPES,
            nodePools: POOLS,
            overlays: [priced(name, 1, onDemand)],
            launches: [launch('default', 'm5.xlarge', OD)],
          }),
        ),
      );
      t.same(
        answers.map((a) => a.applied[0]),
        names,
      );
    });
  });
}

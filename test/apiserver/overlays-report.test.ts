// "Are the overlays working?" per overlay, against a real apiserver: a fleet with a steering, an
// outranked and an idle overlay; the report live and from the files `kubectl get -o yaml` gives;
// the per-overlay gauge (the idle overlay at 0, the cap folding the rest into "other"); what each
// overlay is worth (its nodes' list price an hour) and its launches, counted once, not again by a
// restarted leader, with the dashboard's panels for both evaluated by promtool on the scrapes; and
// exactly one Event on each recorded node, whoever wrote the record, across a restart.
import { execFile } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { promisify } from 'node:util';
import t from 'tap';
import * as k8s from '@kubernetes/client-node';
import { stringify } from 'yaml';
import { EFFECTS, type Report } from '../../src/engine/index.ts';
import type { RunningWatcher } from '../../src/commands/serve.ts';
import { computeSavingsPlan, ec2InstanceSavingsPlan, reservedInstance } from '../../kit/veneer.ts';
import { KarpenterSim, mergePatch } from '../../kit/karpenter-sim.ts';
import { UNVALIDATED_ANNOTATION } from '../../kit/overlay-validation.ts';
import { OVERLAY_API, sleep, until } from '../../kit/fleet.ts';
import { launchWatcher, registerWebhooksAt, startClusterEnv, WATCHER_USER } from '../../kit/watcher-env.ts';
import { staticOnDemand } from '../../src/prices/static-table.ts';
import { dashboardQueries, testRules } from '../support/chart.ts';
import { inputSeries, promtool } from '../support/prometheus.ts';

const cli = join(import.meta.dirname, '..', '..', 'src', 'cli.ts');
const report = (args: string[], kubeconfig?: string) =>
  promisify(execFile)(process.execPath, [cli, 'report', ...args], {
    env: { ...process.env, ...(kubeconfig ? { KUBECONFIG: kubeconfig } : {}) },
  }).then(
    (r) => ({ code: 0, out: r.stdout, err: r.stderr }),
    (e: { code: number; stdout: string; stderr: string }) => ({ code: e.code, out: e.stdout, err: e.stderr }),
  );

const env = await startClusterEnv();
t.teardown(() => env.cp.stop());
const { admin, cp, certs } = env;
const sim = new KarpenterSim(admin);
const core = admin.makeApiClient(k8s.CoreV1Api);
const eventsApi = admin.makeApiClient(k8s.EventsV1Api);
const RI = 'cost-aware-ri-m5.xlarge-us-west-2';
const EC2 = 'cost-aware-ec2-sp-m5-us-west-2';
const COMPUTE = 'cost-aware-compute-sp-global';
const IDLE = 'cost-aware-ri-c7i.large-us-east-1';
for (const o of [
  reservedInstance('m5.xlarge', 'us-west-2'),
  ec2InstanceSavingsPlan('m5', 'us-west-2'),
  computeSavingsPlan(),
  reservedInstance('c7i.large', 'us-east-1'),
]) {
  await sim.custom.createClusterCustomObject({ ...OVERLAY_API, body: o });
}

let watcher: RunningWatcher | undefined;
t.teardown(() => watcher?.stop());
const leading = (w: RunningWatcher) =>
  until('leadership', () => w.metrics.leader.get().then((m) => m.values[0]?.value === 1));
const recordedNodes = async () =>
  (await core.listNode()).items.filter((n) => n.metadata?.labels?.['veneer.io/overlay-influenced'] !== undefined);
const nodeEvents = async () =>
  (await eventsApi.listNamespacedEvent({ namespace: 'default' })).items.filter((e) => e.regarding?.kind === 'Node');
const gauge = async (w: RunningWatcher) => {
  const text = await w.metrics.registry.metrics();
  return Object.fromEntries(
    [
      ...text.matchAll(
        /^veneer_nodewatcher_overlay_nodes_current\{overlay="([^"]+)",capacity_type="([^"]+)"\} (\d+)$/gm,
      ),
    ].map((m) => [`${m[1]} ${m[2]}`, Number(m[3])]),
  );
};
/** `overlay effect` -> value, of a metric labelled by overlay and effect. */
const byOverlayEffect = (text: string, metric: string) =>
  Object.fromEntries(
    [...text.matchAll(new RegExp(`^${metric}\\{overlay="([^"]+)",effect="([^"]+)"\\} (\\S+)$`, 'gm'))].map((m) => [
      `${m[1]} ${m[2]}`,
      Number(m[3]),
    ]),
  );
const launchCounts = async (w: RunningWatcher) =>
  Object.fromEntries(
    Object.entries(byOverlayEffect(await w.metrics.registry.metrics(), 'veneer_nodewatcher_launches_total')).filter(
      ([, n]) => n > 0,
    ),
  );
/** The static table: what the watcher prices with here (no region in the environment; us-west-2 has none of its own). */
const LIST = staticOnDemand('us-west-2');
const dashboardExpr = (metric: string) => dashboardQueries().find((q) => q.expr.includes(metric))!.expr;
let beforeLaunches = '';
const eventCount = async (w: RunningWatcher, result: string) =>
  (await w.metrics.events.get()).values.find((v) => v.labels.result === result)?.value ?? 0;

t.test('records by the reconciler and inline by the webhook: one Event each, none for spot or dry runs', async (t) => {
  watcher = (await launchWatcher(cp, certs, WATCHER_USER)).watcher;
  await leading(watcher);
  beforeLaunches = await watcher.metrics.registry.metrics();
  await sleep(1100); // launches in a later second than the overlays: exact decisions
  // No webhook yet: the reconciler records these.
  for (const [name, instanceType] of [
    ['late-1', 'm5.xlarge'],
    ['late-2', 'm5.xlarge'],
    ['late-3', 'c6i.large'],
  ])
    await sim.launch({ name: name!, claimName: `${name}-claim`, instanceType });
  await until('3 records', async () => (await recordedNodes()).length === 3);
  // The registration's dry-run probes reach the webhook but are never stored.
  await registerWebhooksAt(admin, { caPem: certs.caPem, port: watcher.webhookPort! });
  for (const [name, instanceType] of [
    ['inline-1', 'm5.xlarge'],
    ['inline-2', 'c6i.large'],
  ])
    await sim.launch({ name: name!, claimName: `${name}-claim`, instanceType });
  await sim.launch({ name: 'spot-1', claimName: 'spot-1-claim', instanceType: 'm5.xlarge', capacityType: 'spot' });
  await until('5 records', async () => (await recordedNodes()).length === 5);
  await until('5 Events', async () => (await nodeEvents()).length >= 5);
  await sleep(1000); // room for a duplicate to show up
  const nodes = await recordedNodes();
  const events = await nodeEvents();
  t.same(
    events.map((e) => e.regarding?.name).sort(),
    ['inline-1', 'inline-2', 'late-1', 'late-2', 'late-3'],
    'exactly one Event per recorded node; none for the spot node or the dry-run probes',
  );
  const story = (name: string) =>
    JSON.parse(
      nodes.find((n) => n.metadata?.name === name)?.metadata?.annotations?.['veneer.io/overlay-decision'] ?? '{}',
    ) as { decidedBy: string };
  t.same([story('late-1').decidedBy, story('inline-1').decidedBy], ['reconciler', 'webhook'], 'both paths are covered');
  const byNode = new Map(events.map((e) => [e.regarding?.name, e]));
  t.match(byNode.get('late-1'), {
    reason: 'OverlayInfluenced',
    type: 'Normal',
    reportingController: 'veneer.io/node-watcher',
    note: `Launched under NodeOverlay ${RI} (weight 30, capacity type reserved-instance); recorded by the reconciler (basis exact)`,
  });
  t.match(byNode.get('inline-2'), {
    note: `Launched under NodeOverlay ${COMPUTE} (weight 10, capacity type compute-savings-plan); recorded by the webhook (basis exact)`,
  });
  // What `kubectl describe node` asks for: core/v1 Events of the node, by kind, name and uid.
  const node = nodes.find((n) => n.metadata?.name === 'inline-1');
  const described = await core.listEventForAllNamespaces({
    fieldSelector: `involvedObject.kind=Node,involvedObject.name=inline-1,involvedObject.namespace=,involvedObject.uid=${node?.metadata?.uid}`,
  });
  t.same(
    described.items.map((e) => e.reason),
    ['OverlayInfluenced'],
    'kubectl describe node finds it',
  );
  t.equal(await eventCount(watcher, 'created'), 5);

  const series = await gauge(watcher);
  t.same(
    series,
    {
      [`${RI} reserved-instance`]: 3,
      [`${EC2} ec2-instance-savings-plan`]: 0,
      [`${COMPUTE} compute-savings-plan`]: 2,
      [`${IDLE} reserved-instance`]: 0,
    },
    'every active overlay, the idle and the outranked at 0',
  );
});

t.test('what each overlay is worth an hour, and its launches counted once, as the Nodes say', async (t) => {
  const w = watcher!;
  const counts: Record<string, number> = {};
  const dollars: Record<string, number> = {};
  for (const n of await recordedNodes()) {
    const l = n.metadata?.labels ?? {};
    const key = `${l['veneer.io/matching-overlay']} ${l['veneer.io/overlay-effect'] ?? 'unknown'}`;
    counts[key] = (counts[key] ?? 0) + 1;
    dollars[key] =
      Math.round(((dollars[key] ?? 0) + LIST.get(l['node.kubernetes.io/instance-type']!)!) * 10_000) / 10_000;
  }
  t.same(
    Object.values(counts).reduce((a, b) => a + b),
    5,
    `the records: ${JSON.stringify(counts)}`,
  );
  await until('every record counted', async () => Object.values(await launchCounts(w)).reduce((a, b) => a + b, 0) >= 5);
  await sleep(500); // room for a second count to show up
  t.same(await launchCounts(w), counts, 'launches_total: each record once, by the overlay and effect it names');
  const text = await w.metrics.registry.metrics();
  t.same(
    byOverlayEffect(text, 'veneer_nodewatcher_overlay_dollars_per_hour'),
    dollars,
    'overlay_dollars_per_hour: the list price of the nodes each record names it on',
  );
  const launchSeries = byOverlayEffect(text, 'veneer_nodewatcher_launches_total');
  t.equal(
    Object.keys(launchSeries).length,
    4 * EFFECTS.length,
    'four active overlays, a series per effect each, 0 included',
  );
  t.notMatch(text, /late-|inline-|spot-1/, 'no node names');
  const check = promtool(['check', 'metrics'], text);
  t.equal(check.status, 0, check.stderr);
  t.equal(check.stdout.trim(), '', 'promtool has nothing to say of the exposition');

  // The dashboard's panels, evaluated by Prometheus' engine on the two scrapes, ten minutes apart.
  const scrapes = [
    { minute: 0, text: beforeLaunches },
    { minute: 10, text },
  ];
  const launchesExpr = dashboardExpr('veneer_nodewatcher_launches_total');
  const dollarsExpr = dashboardExpr('veneer_nodewatcher_overlay_dollars_per_hour');
  const steered = new Map<string, number>();
  for (const [key, usd] of Object.entries(dollars)) {
    const [overlay, effect] = key.split(' ') as [string, string];
    if (effect === 'capacity-type' || effect === 'instance-type')
      steered.set(overlay, (steered.get(overlay) ?? 0) + usd);
  }
  const tests = stringify({
    rule_files: ['rules.yaml'],
    evaluation_interval: '1m',
    tests: [
      {
        interval: '1m',
        input_series: ['veneer_nodewatcher_launches_total', 'veneer_nodewatcher_overlay_dollars_per_hour'].flatMap(
          (m) => inputSeries(scrapes, m),
        ),
        promql_expr_test: [
          {
            expr: launchesExpr,
            eval_time: '10m',
            exp_samples: Object.keys(launchSeries).map((key) => {
              const [overlay, effect] = key.split(' ');
              return { labels: `{effect="${effect}",overlay="${overlay}"}`, value: counts[key] ?? 0 };
            }),
          },
          {
            expr: dollarsExpr,
            eval_time: '10m',
            exp_samples: [...steered].map(([overlay, value]) => ({ labels: `{overlay="${overlay}"}`, value })),
          },
        ],
      },
    ],
  });
  const run = testRules(tests);
  t.equal(run.status, 0, 'the panels say what the Nodes say (launches in the last hour: each record once)', {
    output: run.output,
    tests,
  });
  t.comment(
    `effects here: ${Object.keys(counts).join(', ')} (the steered panel is evaluated on real effects in test/aws/flip.test.ts)`,
  );
});

t.test('the report, live and from the files kubectl writes, gives each overlay its verdict', async (t) => {
  const live = await report(['-o', 'json'], cp.writeKubeConfig());
  t.equal(live.code, 0, live.err);
  const fromCluster = JSON.parse(live.out) as Report;
  t.same(
    fromCluster.overlays.map((o) => [o.overlay, o.verdict, o.won, o.lost]),
    [
      [RI, 'steering', 3, 0],
      [IDLE, 'idle', 0, 0],
      [EC2, 'outranked', 0, 3],
      [COMPUTE, 'steering', 2, 3],
    ],
  );
  t.same(fromCluster.overlays.find((o) => o.overlay === EC2)?.lostTo, { [RI]: 3 });
  t.match(fromCluster.totals, {
    onDemandNodes: 5,
    influenced: 5,
    notInfluenced: 0,
    pending: 0,
    records: 5,
    recordedInline: 2,
    inlineShare: 0.4,
    approximate: 0,
  });

  // `kubectl get nodes,nodeoverlays,nodeclaims -o yaml`: a List whose items carry their kind.
  const dump = async (path: string, kind: string, apiVersion: string, file: string) => {
    const list = JSON.parse((await cp.get(path)).body) as { items: object[] };
    writeFileSync(
      join(cp.dir, file),
      stringify({ apiVersion: 'v1', kind: 'List', items: list.items.map((i) => ({ apiVersion, kind, ...i })) }),
    );
    return join(cp.dir, file);
  };
  const files = [
    '--nodes',
    await dump('/api/v1/nodes', 'Node', 'v1', 'nodes.yaml'),
    '--overlays',
    await dump('/apis/karpenter.sh/v1alpha1/nodeoverlays', 'NodeOverlay', 'karpenter.sh/v1alpha1', 'overlays.yaml'),
    '--nodeclaims',
    await dump('/apis/karpenter.sh/v1/nodeclaims', 'NodeClaim', 'karpenter.sh/v1', 'claims.yaml'),
  ];
  const offline = await report([...files, '-o', 'json']);
  t.equal(offline.code, 0, offline.err);
  const fromFiles = JSON.parse(offline.out) as Report;
  t.same(
    [fromFiles.overlays, fromFiles.totals],
    [fromCluster.overlays, fromCluster.totals],
    'the same verdicts offline',
  );
  const table = await report(files);
  t.match(
    table.out,
    new RegExp(
      `^${EC2.replace(/\./g, '\\.')} +20 +ec2-instance-savings-plan +m5 +- +us-west-2 +0 +3 +0 +0 +0 +0 +0 +0\\.0000 +- +outranked$`,
      'm',
    ),
  );
  t.match(
    table.out,
    /^5 on-demand Karpenter nodes: 5 influenced, 0 not influenced, 0 pending; 2 of 5 records written inline \(40%\); 0 with basis approximate$/m,
  );
  const yaml = await report([...files, '-o', 'yaml']);
  t.match(yaml.out, /verdict: idle/);
  const bad = await report(['--nodes', files[3]!, '--overlays', files[3]!]);
  t.equal(bad.code, 2, 'the wrong kind of objects: exit 2');
  t.match(bad.err, /overlays\.yaml: item 1 is a NodeOverlay, not a Node/);
  const half = await report(['--overlays', files[3]!]);
  t.equal(half.code, 2);
  t.match(half.err, /report reads the cluster \(KUBECONFIG\), or --nodes FILE and --overlays FILE/);
});

t.test(
  'a restart posts no second Event (the apiserver refuses the name); the cap folds the rest into other',
  async (t) => {
    await watcher?.stop();
    watcher = (await launchWatcher(cp, certs, WATCHER_USER, { '--metrics-max-overlay-series': '2' })).watcher;
    await leading(watcher);
    await until('every fresh record tried again', async () => (await eventCount(watcher!, 'exists')) === 5);
    t.equal(await eventCount(watcher, 'created'), 0);
    t.equal((await nodeEvents()).length, 5, 'still one Event per node');
    t.same(
      await gauge(watcher),
      { [`${RI} reserved-instance`]: 3, 'other other': 2 },
      'two series at most: the biggest, and the sum of the rest',
    );
    const text = await watcher.metrics.registry.metrics();
    t.same(await launchCounts(watcher), {}, 'the new leader counts none of the records written before it led');
    t.ok(
      Object.keys(byOverlayEffect(text, 'veneer_nodewatcher_launches_total')).length <= 2,
      'launches_total: two series at most',
    );
    t.ok(Object.keys(byOverlayEffect(text, 'veneer_nodewatcher_overlay_dollars_per_hour')).length <= 2);
    await sleep(1100); // a record in a later second than the leadership
    await sim.launch({ name: 'after-restart', claimName: 'after-restart-claim', instanceType: 'm5.xlarge' });
    await until('the new record counted', async () => Object.keys(await launchCounts(watcher!)).length > 0);
    await sleep(500);
    t.same(
      Object.values(await launchCounts(watcher)),
      [1],
      'a record written since it leads: counted once (in its own series or in other)',
    );
  },
);

t.test(
  'overlays Karpenter refused or never validated: report names them with the reason, the gauge counts them',
  async (t) => {
    // One Karpenter never gave a status (its NodeOverlay gate off), one it found in Conflict.
    const ri = reservedInstance('r6g.large', 'us-west-2');
    const unvalidated = { ...ri, metadata: { ...ri.metadata, annotations: { [UNVALIDATED_ANNOTATION]: 'never' } } };
    const conflicting = {
      ...ec2InstanceSavingsPlan('m5', 'us-west-2'),
      metadata: { ...ec2InstanceSavingsPlan('m5', 'us-west-2').metadata, name: 'cost-aware-ec2-sp-m5-us-west-2-dup' },
    };
    for (const o of [unvalidated, conflicting]) await sim.custom.createClusterCustomObject({ ...OVERLAY_API, body: o });
    await sim.custom.patchClusterCustomObjectStatus(
      {
        ...OVERLAY_API,
        name: 'cost-aware-ec2-sp-m5-us-west-2-dup',
        body: {
          status: {
            conditions: [
              {
                type: 'ValidationSucceeded',
                status: 'False',
                reason: 'Conflict',
                message: 'conflict with another overlay',
                lastTransitionTime: new Date().toISOString().replace(/\.\d+Z$/, 'Z'),
              },
              {
                type: 'Ready',
                status: 'False',
                reason: 'UnhealthyDependents',
                message: 'ValidationSucceeded=False',
                lastTransitionTime: new Date().toISOString().replace(/\.\d+Z$/, 'Z'),
              },
            ],
          },
        },
      },
      mergePatch,
    );
    const states = async () =>
      Object.fromEntries(
        [
          ...(await watcher!.metrics.registry.metrics()).matchAll(
            /^veneer_nodewatcher_overlays\{state="(\w+)"\} (\d+)$/gm,
          ),
        ].map((m) => [m[1], Number(m[2])]),
      );
    await until(
      'the watcher sees both',
      async () => (await states()).unvalidated === 1 && (await states()).rejected_conflict === 1,
    );
    t.same(await states(), {
      counted: 4,
      rejected_conflict: 1,
      rejected_validation: 0,
      unvalidated: 1,
      capacity_only: 0,
      deleting: 0,
    });
    const live = JSON.parse((await report(['-o', 'json'], cp.writeKubeConfig())).out) as Report;
    t.match(
      live.overlays.find((o) => o.overlay === 'cost-aware-ec2-sp-m5-us-west-2-dup'),
      { verdict: 'rejected', note: 'rejected by Karpenter (ValidationSucceeded=False, Conflict)' },
    );
    t.match(
      live.overlays.find((o) => o.overlay === 'cost-aware-ri-r6g.large-us-west-2'),
      {
        verdict: 'unvalidated',
        note: /^not validated by Karpenter: is its NodeOverlay feature gate on\? \(created \d+ min ago\)$/,
      },
    );
  },
);

// `explain` through the real entry point: on files kubectl wrote (from the demo's cluster) and
// live against a real apiserver.
import { execFile } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import t from 'tap';
import * as k8s from '@kubernetes/client-node';
import type { Explanation } from '../../src/engine/index.ts';
import { KarpenterSim } from '../../kit/karpenter-sim.ts';
import { computeSavingsPlan, karpenterNode, reservedInstance, validatedByKarpenter } from '../../kit/veneer.ts';
import { startClusterEnv } from '../../kit/watcher-env.ts';
import { nodePool } from '../../kit/karpenter-crds.ts';

const cli = join(import.meta.dirname, '..', '..', 'src', 'cli.ts');
const fixtures = join(import.meta.dirname, '..', 'fixtures', 'kubectl');
const run = (args: string[], env: Record<string, string> = {}) =>
  promisify(execFile)(process.execPath, [cli, 'explain', ...args], { env: { ...process.env, ...env } }).then(
    (r) => ({ code: 0, out: r.stdout, err: r.stderr }),
    (e: { code: number; stdout: string; stderr: string }) => ({ code: e.code, out: e.stdout, err: e.stderr }),
  );
const files = [
  '--nodes',
  join(fixtures, 'nodes.yaml'),
  '--overlays',
  join(fixtures, 'nodeoverlays.yaml'),
  '--nodeclaims',
  join(fixtures, 'nodeclaims.yaml'),
];

t.test('offline, on `kubectl get -o yaml` output: one result per node, every overlay explained', async (t) => {
  const r = await run([...files, '-o', 'json']);
  t.equal(r.code, 0, r.err);
  const results = JSON.parse(r.out) as Explanation[];
  t.equal(results.length, 10, 'a List of ten nodes');
  const byName = new Map(results.map((e) => [e.node, e]));
  t.match(byName.get('ip-10-0-1-10'), {
    outcome: 'influenced',
    overlay: 'cost-aware-ri-m5.xlarge-us-west-2',
    existingRecord: { 'veneer.io/matching-overlay': 'cost-aware-ri-m5.xlarge-us-west-2' },
  });
  t.match(byName.get('ip-10-0-1-12'), { outcome: 'influenced', overlay: 'cost-aware-ec2-sp-m5-us-west-2' });
  t.match(byName.get('ip-10-0-1-20'), { outcome: 'out-of-scope', reason: /"spot", not on-demand/ });
  const ri = byName.get('ip-10-0-1-12')?.overlays.find((o) => o.name === 'cost-aware-ri-m5.xlarge-us-west-2');
  t.match(ri, {
    active: true,
    matched: false,
    winner: false,
    requirements: [
      { key: 'karpenter.sh/capacity-type', pass: true },
      {
        key: 'node.kubernetes.io/instance-type',
        operator: 'In',
        values: ['m5.xlarge'],
        nodeValue: 'm5.2xlarge',
        pass: false,
      },
    ],
  });
  t.match(byName.get('ip-10-0-1-10')?.labels, {
    'veneer.io/overlay-influenced': 'true',
    'veneer.io/labeled-at': /^\d{8}T\d{6}Z$/,
  });
  t.ok(byName.get('ip-10-0-1-10')?.annotations['veneer.io/overlay-decision'], 'the annotation that would be written');
});

t.test('a single JSON object, the table for people, and a time before the overlays existed', async (t) => {
  const one = await run([
    '--nodes',
    join(fixtures, 'node-ip-10-0-1-10.json'),
    '--overlays',
    join(fixtures, 'nodeoverlays.yaml'),
    '--nodeclaims',
    join(fixtures, 'nodeclaims.yaml'),
  ]);
  t.equal(one.code, 0, one.err);
  t.match(one.out, /^ip-10-0-1-10: influenced by cost-aware-ri-m5\.xlarge-us-west-2/);
  t.match(one.out, /cost-aware-ri-m5\.xlarge-us-west-2 \(weight 30\): WINS/);
  t.match(one.out, /cost-aware-compute-sp-global \(weight 10\): matches \(outranked\)/);
  t.match(one.out, /pass {2}node\.kubernetes\.io\/instance-type In \[m5\.xlarge\] {2}node: "m5\.xlarge"/);
  t.match(
    one.out,
    /^ {2}effect: unknown \(its NodeClaim has no node\.kubernetes\.io\/instance-type In requirement: the candidates Karpenter chose among are not known\)$/m,
    "an unknown effect gives its reason (the demo's simulated NodeClaims list no candidates)",
  );
  // Without its NodeClaim the node's own creation is the launch; the selector can exclude overlays.
  const other = await run([
    '--nodes',
    join(fixtures, 'node-ip-10-0-1-10.json'),
    '--overlays',
    join(fixtures, 'nodeoverlays.yaml'),
    '--overlay-selector',
    'team=none',
    '-o',
    'json',
  ]);
  const e = (JSON.parse(other.out) as Explanation[])[0];
  t.match(e, { outcome: 'not-influenced', overlay: null });
  t.match(e?.overlays[0], { active: false, inactiveReason: 'not selected by team=none' });
});

t.test(
  "what Karpenter compares: one combined requirement per normalized key, where it came from, the node's value",
  async (t) => {
    const dir = mkdtempSync(join(tmpdir(), 'explain-'));
    const ri = reservedInstance('m5.xlarge', 'us-west-2');
    const written = [
      { key: 'beta.kubernetes.io/instance-type', operator: 'In', values: ['m5.xlarge', 'm5.2xlarge'] },
      { key: 'node.kubernetes.io/instance-type', operator: 'NotIn', values: ['m5.2xlarge'] },
      { key: 'karpenter.k8s.aws/instance-memory', operator: 'Gt', values: ['8191'] },
      { key: 'karpenter.k8s.aws/instance-memory', operator: 'Lte', values: ['32768'] },
    ];
    const overlay = validatedByKarpenter(
      {
        ...ri,
        metadata: { ...ri.metadata, creationTimestamp: '2026-01-12T14:00:00Z' },
        spec: {
          ...ri.spec,
          requirements: [{ key: 'karpenter.sh/capacity-type', operator: 'In', values: ['on-demand'] }, ...written],
        },
      },
      '2026-01-12T14:00:00Z',
    );
    // The node carries only the deprecated instance-type key, as old kubelets wrote it.
    const node = karpenterNode({
      name: 'old-kubelet',
      instanceType: 'm5.xlarge',
      createdAt: '2026-01-12T15:00:00Z',
      extraLabels: { 'beta.kubernetes.io/instance-type': 'm5.xlarge', 'karpenter.k8s.aws/instance-memory': '16384' },
    });
    delete node.metadata?.labels?.['node.kubernetes.io/instance-type'];
    writeFileSync(join(dir, 'overlays.json'), JSON.stringify(overlay));
    writeFileSync(join(dir, 'node.json'), JSON.stringify(node));
    writeFileSync(
      join(dir, 'nodepool.json'),
      JSON.stringify({ ...nodePool(), metadata: { name: 'default', creationTimestamp: '2026-01-01T00:00:00Z' } }),
    );
    const args = [
      '--nodes',
      join(dir, 'node.json'),
      '--overlays',
      join(dir, 'overlays.json'),
      '--nodepools',
      join(dir, 'nodepool.json'),
    ];
    const json = await run([...args, '-o', 'json']);
    t.equal(json.code, 0, json.err);
    const [e] = JSON.parse(json.out) as Explanation[];
    t.match(e, { outcome: 'influenced', overlay: ri.metadata?.name });
    t.same(e?.overlays[0]?.requirements.slice(1), [
      {
        key: 'node.kubernetes.io/instance-type',
        operator: 'In',
        values: ['m5.xlarge'],
        from: [written[0], written[1]],
        nodeValue: 'm5.xlarge',
        comparedAs: 'instance-type',
        pass: true,
      },
      {
        key: 'karpenter.k8s.aws/instance-memory',
        operator: 'Exists',
        values: [],
        gte: '8192',
        lte: '32768',
        from: [written[2], written[3]],
        nodeValue: '16384',
        comparedAs: 'instance-type',
        pass: true,
      },
    ]);
    const table = await run(args);
    t.match(
      table.out,
      /pass {2}node\.kubernetes\.io\/instance-type In \[m5\.xlarge\] {2}node: "m5\.xlarge"\n {12}from: beta\.kubernetes\.io\/instance-type In \[m5\.xlarge, m5\.2xlarge\]; node\.kubernetes\.io\/instance-type NotIn \[m5\.2xlarge\]/,
    );
    t.match(table.out, /pass {2}karpenter\.k8s\.aws\/instance-memory Exists >=8192 <=32768 {2}node: "16384"/);
  },
);

t.test(
  'with the NodePools, keys are compared as Karpenter knows them, and one it does not compare says so',
  async (t) => {
    const withPools = JSON.parse(
      (await run([...files, '--nodepools', join(fixtures, 'nodepools.yaml'), '-o', 'json'])).out,
    ) as Explanation[];
    const without = JSON.parse((await run([...files, '-o', 'json'])).out) as Explanation[];
    const compared = (results: Explanation[]) =>
      results
        .find((e) => e.node === 'ip-10-0-1-10')
        ?.overlays.find((o) => o.winner)
        ?.requirements.map((r) => r.comparedAs);
    t.same(
      compared(withPools),
      ['instance-type', 'instance-type'],
      "capacity type and instance type: the instance type's keys",
    );
    t.same(compared(without), ['label', 'label'], "without them the node's labels stand in");
    const dir = mkdtempSync(join(tmpdir(), 'explain-'));
    const team = validatedByKarpenter(
      {
        ...reservedInstance('m5.xlarge', 'us-west-2'),
        metadata: {
          name: 'team-ml',
          labels: { 'app.kubernetes.io/managed-by': 'veneer' },
          creationTimestamp: '2026-11-30T05:00:00Z',
        },
      },
      '2026-11-30T05:00:00Z',
    );
    team.spec = { ...team.spec, requirements: [{ key: 'team', operator: 'In', values: ['ml'] }] };
    writeFileSync(join(dir, 'overlays.json'), JSON.stringify(team));
    const node = karpenterNode({
      name: 'ml-1',
      instanceType: 'm5.xlarge',
      createdAt: '2026-11-30T06:00:00Z',
      extraLabels: { team: 'ml' },
    });
    writeFileSync(join(dir, 'node.json'), JSON.stringify(node));
    const r = await run([
      '--nodes',
      join(dir, 'node.json'),
      '--overlays',
      join(dir, 'overlays.json'),
      '--nodepools',
      join(fixtures, 'nodepools.yaml'),
    ]);
    t.equal(r.code, 0, r.err);
    t.match(r.out, /^ml-1: not influenced/);
    t.match(
      r.out,
      /FAIL {2}team In \[ml\] {2}node: "ml" \(not an instance-type, offering or NodePool template key: undefined for Karpenter\)/,
    );
  },
);

t.test("a recorded node's effect is its record's; decided again otherwise, that is shown beside", async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'explain-'));
  // A replacement the watcher judged with an RI overlay that decided it and was deleted since: a
  // decision made now sees neither the overlay nor the node it replaced.
  const effect = {
    verdict: 'replacement',
    reason: 'without the selected overlays nothing would have undercut the replaced node',
    overlays: ['cost-aware-ri-m5.large-us-east-1'],
    prices: { source: 'static', asOf: '2026-11-30T05:00:00Z' },
    disruption: { reason: 'Underutilized', replaced: [{ nodeClaim: 'old-c6i' }], replacedCount: 1 },
  };
  const node = karpenterNode({ name: 'replacement-1', instanceType: 'm5.large', createdAt: '2026-11-30T06:00:00Z' });
  node.metadata!.annotations = {
    ...node.metadata?.annotations,
    'veneer.io/overlay-decision': JSON.stringify({
      influenced: false,
      overlay: null,
      decidedBy: 'webhook',
      evaluatedAt: '2026-11-30T06:00:00Z',
      labeledAt: '2026-11-30T06:00:00Z',
      basis: 'exact',
      characteristicsFrom: 'node+nodeclaim',
      effect,
    }),
  };
  writeFileSync(join(dir, 'node.json'), JSON.stringify(node));
  writeFileSync(join(dir, 'overlays.json'), JSON.stringify({ apiVersion: 'v1', kind: 'List', items: [] }));
  const args = ['--nodes', join(dir, 'node.json'), '--overlays', join(dir, 'overlays.json')];
  const json = await run([...args, '-o', 'json']);
  t.equal(json.code, 0, json.err);
  const [e] = JSON.parse(json.out) as Explanation[];
  t.same(e?.effect, { ...effect, prices: { source: 'static', asOf: Date.parse(effect.prices.asOf) } }, "the record's");
  t.equal(e?.effectNow?.verdict, 'unknown', 'decided again without its NodeClaim or the overlay: unknown');
  const table = await run(args);
  t.match(table.out, /^ {2}effect: replacement \(/m);
  t.match(table.out, /^ {2}decided again now, with the overlays as they are: unknown \(/m);
});

t.test('mistakes get a clear message', async (t) => {
  const missing = await run(['--nodes', join(fixtures, 'nodes.yaml')]);
  t.equal(missing.code, 2);
  t.match(missing.err, /explain needs NODE_NAME \(live\) or --nodes FILE and --overlays FILE/);
  const badOutput = await run([...files, '-o', 'xml']);
  t.equal(badOutput.code, 2);
  t.match(badOutput.err, /-o must be table, json or yaml, not "xml"/);
  const noFile = await run(['--nodes', '/nonexistent.yaml', '--overlays', join(fixtures, 'nodeoverlays.yaml')]);
  t.equal(noFile.code, 2, 'input the user can fix: exit 2');
  t.match(noFile.err, /\/nonexistent\.yaml: cannot be read \(ENOENT\)/);
  const swapped = await run([
    '--nodes',
    join(fixtures, 'nodeoverlays.yaml'),
    '--overlays',
    join(fixtures, 'nodes.yaml'),
  ]);
  t.equal(swapped.code, 2);
  t.match(swapped.err, /nodeoverlays\.yaml: item 1 is a NodeOverlay, not a Node/);
});

t.test('live, from the cluster', async (t) => {
  const env = await startClusterEnv();
  t.teardown(() => env.cp.stop());
  const custom = env.admin.makeApiClient(k8s.CustomObjectsApi);
  for (const o of [computeSavingsPlan(), reservedInstance('m5.xlarge', 'us-west-2')])
    await custom.createClusterCustomObject({
      group: 'karpenter.sh',
      version: 'v1alpha1',
      plural: 'nodeoverlays',
      body: o,
    });
  await new KarpenterSim(env.admin).launch({ name: 'live-1', claimName: 'live-1-claim', instanceType: 'm5.xlarge' });
  const kubeconfig = env.cp.writeKubeConfig();
  const r = await run(['live-1', '-o', 'json'], { KUBECONFIG: kubeconfig });
  t.equal(r.code, 0, r.err);
  t.match(JSON.parse(r.out), [{ node: 'live-1', outcome: 'influenced', overlay: 'cost-aware-ri-m5.xlarge-us-west-2' }]);
  const gone = await run(['no-such-node'], { KUBECONFIG: kubeconfig });
  t.equal(gone.code, 1);
  t.match(gone.err, /veneer-node-watcher explain: .*404/s);

  // Karpenter's disruption Events, read as the watcher's caches read them: the decision's window and
  // Balanced's scores come from them live, so explain judges a replacement as the record was judged.
  const core = env.admin.makeApiClient(k8s.CoreV1Api);
  const event = (name: string, kind: string, object: string, reason: string, message: string, at: string) =>
    core.createNamespacedEvent({
      namespace: 'default',
      body: {
        metadata: { name },
        involvedObject: { kind, name: object, apiVersion: 'karpenter.sh/v1' },
        reason,
        message,
        type: 'Normal',
        source: { component: 'karpenter' },
        firstTimestamp: new Date(at),
        lastTimestamp: new Date(at),
      },
    });
  await event(
    'c1',
    'NodeClaim',
    'live-1-claim',
    'ConsolidationCandidate',
    'Can be consolidated',
    '2026-12-01T10:00:00Z',
  );
  await event(
    'a1',
    'NodePool',
    'od',
    'ConsolidationApproved',
    'score 0.85 >= threshold 0.50 (k: 2, savings 33.3%, disruption 39.3%)',
    '2026-12-01T10:00:05Z',
  );
  await event(
    'n1',
    'Node',
    'live-1',
    'ConsolidationApproved',
    'score 0.85 >= threshold 0.50 (k: 2, savings 33.3%, disruption 39.3%)',
    '2026-12-01T10:00:05Z',
  );
  const before = process.env.KUBECONFIG;
  process.env.KUBECONFIG = kubeconfig;
  t.teardown(() => {
    process.env.KUBECONFIG = before;
  });
  const { readLive } = await import('../../src/commands/live.ts');
  const inputs = await readLive('live-1');
  t.same(inputs.candidates, [{ nodeClaim: 'live-1-claim', at: Date.parse('2026-12-01T10:00:00Z') }]);
  t.same(
    inputs.approvals,
    [
      {
        object: 'NodePool/od',
        at: Date.parse('2026-12-01T10:00:05Z'),
        figures: { score: 0.85, threshold: 0.5, k: 2, savingsPct: 33.3, disruptionPct: 39.3 },
      },
    ],
    "the NodePool's approval; the Node's, which the watcher does not read either, left out",
  );
});

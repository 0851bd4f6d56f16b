// The README's main command, run start to finish and its output checked.
import { execFile, spawn } from 'node:child_process';
import { join } from 'node:path';
import { promisify } from 'node:util';
import t from 'tap';
import * as k8s from '@kubernetes/client-node';
import { networkNamespaceRefusal } from '../../kit/netns.ts';
import { karpenterNode } from '../../kit/veneer.ts';

// Four demos, one of them with Karpenter on AWS (about 40 s alone, 90 s on a busy 2-core machine).
t.setTimeout(420_000);
const demo = (args: string[] = [], env: NodeJS.ProcessEnv = {}) =>
  promisify(execFile)(process.execPath, [join(import.meta.dirname, '..', '..', 'scripts', 'demo.ts'), ...args], {
    timeout: 240_000,
    maxBuffer: 4 << 20,
    env: { ...process.env, ...env },
  });
// Both modes at once: the simulated one and the one where real Karpenter (KWOK) launches the nodes.
const [{ stdout }, { stdout: karpenterOut }] = await Promise.all([demo(), demo(['--karpenter'])]);
const row = (name: string) =>
  stdout
    .split('\n')
    .find((l) => l.startsWith(name))
    ?.split(/\s{2,}/) ?? [];

t.test('the demo shows every path at work', async (t) => {
  t.match(row('ip-10-0-1-10'), [
    'ip-10-0-1-10',
    'on-demand',
    'm5.xlarge',
    'true',
    'cost-aware-ri-m5.xlarge-us-west-2',
    'reserved-instance',
    'webhook',
  ]);
  t.match(row('ip-10-0-1-12'), [
    'ip-10-0-1-12',
    'on-demand',
    'm5.2xlarge',
    'true',
    'cost-aware-ec2-sp-m5-us-west-2',
    'ec2-instance-savings-plan',
    'webhook',
  ]);
  t.match(row('ip-10-0-1-20'), ['ip-10-0-1-20', 'spot', 'm5.xlarge', '-', '-', '-', '-'], 'spot: no record');
  t.match(
    row('ip-10-0-2-30'),
    [
      'ip-10-0-2-30',
      'on-demand',
      'm5.xlarge',
      'true',
      'cost-aware-ri-m5.xlarge-us-west-2',
      'reserved-instance',
      'reconciler',
    ],
    'webhook paused: the reconciler',
  );
  t.match(stdout, /^ {2}veneer_nodewatcher_nodes_pending 0$/m);
  t.match(stdout, /^ {2}veneer_nodewatcher_nodes_influenced_current\{capacity_type="reserved-instance"\} 3$/m);
  t.match(stdout, /\] done$/m, 'torn down');
});

t.test('--karpenter: real Karpenter launches a node per pod, and each is recorded as in the simulation', async (t) => {
  // Node names are Karpenter's (random): rows by capacity type, instance type and who recorded.
  const rows = karpenterOut
    .split('\n')
    .filter((l) => l.startsWith('kwok-'))
    .map((l) =>
      l
        .trim()
        .split(/\s{2,}/)
        .slice(1, 7)
        .join(' '),
    )
    .sort();
  t.same(rows, [
    'on-demand c6i.large true cost-aware-compute-sp-global compute-savings-plan webhook',
    'on-demand m5.2xlarge true cost-aware-ec2-sp-m5-us-west-2 ec2-instance-savings-plan webhook',
    'on-demand m5.large true cost-aware-ec2-sp-m5-us-west-2 ec2-instance-savings-plan reconciler',
    'on-demand m5.xlarge true cost-aware-ri-m5.xlarge-us-west-2 reserved-instance reconciler',
    'on-demand m5.xlarge true cost-aware-ri-m5.xlarge-us-west-2 reserved-instance webhook',
    'on-demand m5.xlarge true cost-aware-ri-m5.xlarge-us-west-2 reserved-instance webhook',
    'on-demand r6g.xlarge true cost-aware-compute-sp-global compute-savings-plan webhook',
    'on-demand t3.large true cost-aware-compute-sp-global compute-savings-plan reconciler',
    'spot m5.xlarge - - - -',
  ]);
  t.match(karpenterOut, /9 NodeClaims for 9 pods/);
  t.match(karpenterOut, /No record changed in any later version of its Node/);
  t.match(karpenterOut, /^ {2}veneer_nodewatcher_nodes_pending 0$/m);
  t.match(karpenterOut, /\] done$/m, 'torn down');
});

t.test(
  '--keep hands over with the webhook registered again: a node created afterwards is recorded inline',
  async (t) => {
    const demo = spawn(process.execPath, [join(import.meta.dirname, '..', '..', 'scripts', 'demo.ts'), '--keep'], {
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    t.teardown(() => void demo.kill('SIGINT'));
    let out = '';
    demo.stdout.on('data', (d: Buffer) => (out += d.toString()));
    const deadline = Date.now() + 240_000;
    while (!/--keep: the control plane and the watcher keep running/.test(out) && Date.now() < deadline)
      await new Promise((r) => setTimeout(r, 200));
    const kubeconfig = /KUBECONFIG=(\S+) kubectl get nodes/.exec(out)?.[1];
    if (!kubeconfig) throw new Error(`the demo never handed over:\n${out}`);
    const kc = new k8s.KubeConfig();
    kc.loadFromFile(kubeconfig);
    const created = await kc
      .makeApiClient(k8s.CoreV1Api)
      .createNode({ body: karpenterNode({ name: 'tried-afterwards', instanceType: 'm5.xlarge' }) as k8s.V1Node });
    const story = JSON.parse(created.metadata?.annotations?.['veneer.io/overlay-decision'] ?? '{}') as {
      decidedBy?: string;
      overlay?: string;
    };
    t.match(
      story,
      { decidedBy: 'webhook', overlay: 'cost-aware-ri-m5.xlarge-us-west-2' },
      'the record came back in the CREATE response',
    );
    demo.kill('SIGINT');
    await new Promise((r) => demo.once('exit', r));
  },
);

// Real Karpenter on AWS in a local EC2; the demo enters its own loopback-only network namespace.
// Its consolidation scene (scripts/demo-aws-consolidation.ts) is run and its output checked by
// test/aws/replacement.test.ts: run here too, it would be the same minute of Karpenter twice.
t.test(
  '--aws: the same pod launches spot without an overlay and on-demand with the RI overlay, each CreateFleet shown',
  { skip: networkNamespaceRefusal() ?? false },
  async (t) => {
    const { stdout: out } = await demo(['--aws'], { VENEER_DEMO_SKIP_CONSOLIDATION: '1' });
    const rows = out
      .split('\n')
      .filter((l) => l.startsWith('ip-') && !/^\S+: /.test(l))
      .map((l) => l.trim().split(/\s{2,}/))
      .map((r) => [...r.slice(1, 8), r[9]].join(' '))
      .sort();
    // The pods that ask for on-demand and pin a type leave Karpenter one launch either way: none.
    t.same(rows, [
      'on-demand c6i.large true cost-aware-ec2-sp-c6i-us-east-1 ec2-instance-savings-plan none reconciler api-3',
      'on-demand c6i.large true cost-aware-ec2-sp-c6i-us-east-1 ec2-instance-savings-plan none webhook api-1',
      'on-demand c6i.xlarge true cost-aware-ec2-sp-c6i-us-east-1 ec2-instance-savings-plan none webhook api-2',
      'on-demand m5.large true cost-aware-compute-sp-global compute-savings-plan none reconciler web-2',
      'on-demand m5.xlarge true cost-aware-ri-m5.xlarge-us-east-1 reserved-instance capacity-type webhook same-pod-with-ri',
      'on-demand m5.xlarge true cost-aware-ri-m5.xlarge-us-east-1 reserved-instance none webhook web-1',
      'on-demand r6i.2xlarge true cost-aware-compute-sp-global compute-savings-plan none webhook db-1',
      'on-demand t3.large true cost-aware-compute-sp-global compute-savings-plan none reconciler tools-1',
      'spot c6i.large - - - - - batch-2',
      'spot m5.xlarge - - - - - batch-1',
      'spot m5.xlarge - - - - - same-pod-no-overlay',
    ]);
    t.match(
      out,
      /without any overlay: +spot m5\.xlarge \(\S+\), no record; Karpenter: no karpenter\.sh\/price-overlay-applied\n {4}CreateFleet: DefaultTargetCapacityType=spot, SpotOptions\.AllocationStrategy=price-capacity-optimized, 3 overrides \(m5\.xlarge\)/,
    );
    t.match(
      out,
      /with Veneer's three overlays: on-demand m5\.xlarge \(\S+\), record names cost-aware-ri-m5\.xlarge-us-east-1 \(reserved-instance, by the webhook\); Karpenter: karpenter\.sh\/price-overlay-applied=true\n {4}CreateFleet: DefaultTargetCapacityType=on-demand, OnDemandOptions\.AllocationStrategy=prioritized, 3 overrides \(m5\.xlarge\) at Priority 0$/m,
    );
    t.match(
      out,
      /^ {4}effect: capacity-type; without the selected overlays: spot m5\.xlarge, price-capacity-optimized$/m,
      'the flip is the effect',
    );
    t.match(
      out,
      /^\$ veneer-node-watcher explain \S+ --prices-source isolated --prices-region us-east-1\n\S+: influenced by cost-aware-ri-m5\.xlarge-us-east-1/m,
      'explain, live',
    );
    t.match(out, /^ {2}effect: capacity-type \(without the selected overlays Karpenter would have launched spot\)$/m);
    t.match(
      out,
      /^cost-aware-ri-m5\.xlarge-us-east-1 +30 +reserved-instance +m5 +m5\.xlarge +us-east-1 +2 +0 +1 +0 +0 +0 +1 +0\.1920 /m,
      'report: the RI overlay won 2, steered 1 from spot',
    );
    t.match(out, /the consolidation and drift scenes skipped/, 'test/aws/replacement.test.ts runs it');
    t.match(out, /11 NodeClaims for 11 pods/);
    t.match(out, /No record changed in any later version of its Node/);
    t.match(out, /^ {2}veneer_nodewatcher_nodes_pending 0$/m);
    t.match(out, /\] done$/m, 'torn down');
  },
);

// The README's main command, run start to finish and its output checked.
import { execFile, spawn } from 'node:child_process';
import { join } from 'node:path';
import { promisify } from 'node:util';
import t from 'tap';
import * as k8s from '@kubernetes/client-node';
import { karpenterNode } from '../kit/veneer.ts';

const demo = (...args: string[]) => promisify(execFile)(process.execPath, [join(import.meta.dirname, '..', 'scripts', 'demo.ts'), ...args], { timeout: 240_000, maxBuffer: 4 << 20 });
// Both modes at once: the simulated one and the one where real Karpenter (KWOK) launches the nodes.
const [{ stdout }, { stdout: karpenterOut }] = await Promise.all([demo(), demo('--karpenter')]);
const row = (name: string) => stdout.split('\n').find((l) => l.startsWith(name))?.split(/\s{2,}/) ?? [];

t.test('the demo shows every path at work', async (t) => {
  t.match(row('ip-10-0-1-10'), ['ip-10-0-1-10', 'on-demand', 'm5.xlarge', 'true', 'cost-aware-ri-m5.xlarge-us-west-2', 'reserved-instance', 'webhook']);
  t.match(row('ip-10-0-1-12'), ['ip-10-0-1-12', 'on-demand', 'm5.2xlarge', 'true', 'cost-aware-ec2-sp-m5-us-west-2', 'ec2-instance-savings-plan', 'webhook']);
  t.match(row('ip-10-0-1-20'), ['ip-10-0-1-20', 'spot', 'm5.xlarge', '-', '-', '-', '-'], 'spot: no record');
  t.match(row('ip-10-0-2-30'), ['ip-10-0-2-30', 'on-demand', 'm5.xlarge', 'true', 'cost-aware-ri-m5.xlarge-us-west-2', 'reserved-instance', 'reconciler'], 'webhook paused: the reconciler');
  t.match(stdout, /^ {2}veneer_nodewatcher_nodes_pending 0$/m);
  t.match(stdout, /^ {2}veneer_nodewatcher_nodes_influenced_current\{capacity_type="reserved-instance"\} 3$/m);
  t.match(stdout, /\] done$/m, 'torn down');
});

t.test('--karpenter: real Karpenter launches a node per pod, and each is recorded as in the simulation', async (t) => {
  // Node names are Karpenter's (random): rows by capacity type, instance type and who recorded.
  const rows = karpenterOut.split('\n').filter((l) => l.startsWith('kwok-')).map((l) => l.trim().split(/\s{2,}/).slice(1, 7).join(' ')).sort();
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

t.test('--keep hands over with the webhook registered again: a node created afterwards is recorded inline', async (t) => {
  const demo = spawn(process.execPath, [join(import.meta.dirname, '..', 'scripts', 'demo.ts'), '--keep'], { stdio: ['ignore', 'pipe', 'inherit'] });
  t.teardown(() => void demo.kill('SIGINT'));
  let out = '';
  demo.stdout.on('data', (d: Buffer) => (out += d.toString()));
  const deadline = Date.now() + 240_000;
  while (!/--keep: the control plane and the watcher keep running/.test(out) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 200));
  const kubeconfig = /KUBECONFIG=(\S+) kubectl get nodes/.exec(out)?.[1];
  if (!kubeconfig) throw new Error(`the demo never handed over:\n${out}`);
  const kc = new k8s.KubeConfig();
  kc.loadFromFile(kubeconfig);
  const created = await kc.makeApiClient(k8s.CoreV1Api).createNode({ body: karpenterNode({ name: 'tried-afterwards', instanceType: 'm5.xlarge' }) as k8s.V1Node });
  const story = JSON.parse(created.metadata?.annotations?.['veneer.io/overlay-decision'] ?? '{}') as { decidedBy?: string; overlay?: string };
  t.match(story, { decidedBy: 'webhook', overlay: 'cost-aware-ri-m5.xlarge-us-west-2' }, 'the record came back in the CREATE response');
  demo.kill('SIGINT');
  await new Promise((r) => demo.once('exit', r));
});

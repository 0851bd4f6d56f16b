// The README's main command, run start to finish and its output checked.
import { execFile } from 'node:child_process';
import { join } from 'node:path';
import { promisify } from 'node:util';
import t from 'tap';

const { stdout } = await promisify(execFile)(process.execPath, [join(import.meta.dirname, '..', 'scripts', 'demo.ts')], { timeout: 240_000, maxBuffer: 4 << 20 });
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

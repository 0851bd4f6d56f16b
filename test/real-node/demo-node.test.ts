// `npm run demo -- --node`, start to finish, its output checked: the chart on a real node
// (kit/node/), in a network namespace of the demo's own. A file of its own: on a cold run it may
// first wait for the image (kit/node/image.ts builds it once, for whichever test asks first).
import { execFile } from 'node:child_process';
import { join } from 'node:path';
import { promisify } from 'node:util';
import t from 'tap';
import { networkNamespaceRefusal } from '../../kit/netns.ts';
import { realNodeRefusal } from '../../kit/node/node.ts';

t.setTimeout(540_000);
const demo = (...args: string[]) =>
  promisify(execFile)(process.execPath, [join(import.meta.dirname, '..', '..', 'scripts', 'demo.ts'), ...args], {
    timeout: 480_000,
    maxBuffer: 4 << 20,
  });

// The chart on a real node (kit/node/); the demo enters a network namespace of its own for it.
t.test(
  '--node: the chart installed on a real node, its pods record the launches, `report` runs in one',
  { skip: networkNamespaceRefusal() ?? realNodeRefusal() ?? false },
  async (t) => {
    const { stdout: out } = await demo('--node');
    const pods = out.split('\n').filter((l) => l.startsWith('veneer-node-watcher-'));
    t.equal(pods.length, 2, 'two pods');
    t.ok(
      pods.every((l) => /^\S+ +true +10\.88\.\d+\.\d+ +kit-node +65532\b/.test(l)),
      'Ready, at pod addresses, on the node, as 65532',
    );
    t.equal(pods.filter((l) => /\byes\s*$/.test(l)).length, 1, 'one of them the leader');
    const records = out
      .split('\n')
      .filter((l) => l.startsWith('ip-10-0-1-'))
      .map((l) =>
        l
          .trim()
          .split(/\s{2,}/)
          .slice(1)
          .join(' '),
      );
    t.same(records, [
      'm5.xlarge true cost-aware-ri-m5.xlarge-us-west-2 reserved-instance webhook',
      'm5.large true cost-aware-ec2-sp-m5-us-west-2 ec2-instance-savings-plan webhook',
      'c6i.large true cost-aware-compute-sp-global compute-savings-plan webhook',
      'r6g.2xlarge true cost-aware-compute-sp-global compute-savings-plan webhook',
      'm5.xlarge true cost-aware-ri-m5.xlarge-us-west-2 reserved-instance webhook',
      'm5.large true cost-aware-ec2-sp-m5-us-west-2 ec2-instance-savings-plan webhook',
    ]);
    t.match(
      out,
      /\] kubectl exec -n veneer-system veneer-node-watcher-\S+ -- \/nodejs\/bin\/node dist\/cli\.js report --config \/etc\/veneer-node-watcher\/config\/config\.yaml$/m,
    );
    t.match(
      out,
      /^6 on-demand Karpenter nodes: 6 influenced, .*6 of 6 records written inline/m,
      'report, run in the leader pod through the kubelet',
    );
    t.match(out, /\] done$/m, 'torn down');
  },
);

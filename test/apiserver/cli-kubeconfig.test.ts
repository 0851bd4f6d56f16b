// Which cluster `explain NODE` and `report` read live: the one `serve` would, found in serve's
// order (KUBECONFIG, else the pod's ServiceAccount, else ~/.kube/config) and with its refusals.
// A CLI with an order of its own read another cluster than the watcher beside it whenever a pod
// also had a ~/.kube/config. Each kubeconfig here names its own cluster entry and user: a
// watcher that may read, and a stranger that may read nothing, so the apiserver's answer says
// which file was used.
import { execFile } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import t from 'tap';
import * as k8s from '@kubernetes/client-node';
import type { Explanation, Report } from '../../src/engine/index.ts';
import { SERVICE_ACCOUNT_DIR } from '../../src/kube/kubeconfig.ts';
import type { AuditEvent } from '../../kit/control-plane.ts';
import { KarpenterSim } from '../../kit/karpenter-sim.ts';
import { karpenterNode, reservedInstance } from '../../kit/veneer.ts';
import { startClusterEnv, WATCHER_USER } from '../../kit/watcher-env.ts';

const cli = join(import.meta.dirname, '..', '..', 'src', 'cli.ts');
const STRANGER = 'stranger';
const NO_AWS = 'reader-without-aws';

const AUDIT_POLICY = `apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived]
rules:
  - level: Metadata
    users: [${NO_AWS}]
  - level: None
`;

const env = await startClusterEnv({ users: [{ name: STRANGER }, { name: NO_AWS }], auditPolicy: AUDIT_POLICY });
t.teardown(() => env.cp.stop());
const { cp, admin } = env;
await admin.makeApiClient(k8s.CustomObjectsApi).createClusterCustomObject({
  group: 'karpenter.sh',
  version: 'v1alpha1',
  plural: 'nodeoverlays',
  body: reservedInstance('m5.xlarge', 'us-west-2'),
});
await new KarpenterSim(admin).launch({ name: 'live-1', claimName: 'live-1-claim', instanceType: 'm5.xlarge' });

const dir = mkdtempSync(join(tmpdir(), 'vnw-cli-kubeconfig-'));
function kubeconfig(path: string, cluster: string, user: string, extra: Record<string, unknown> = {}): string {
  writeFileSync(
    path,
    JSON.stringify({
      apiVersion: 'v1',
      kind: 'Config',
      clusters: [
        {
          name: cluster,
          cluster: { server: cp.server, 'certificate-authority-data': Buffer.from(cp.caPem).toString('base64') },
        },
      ],
      users: [{ name: user, user: { token: cp.tokenFor(user), ...extra } }],
      contexts: [{ name: `${user}@${cluster}`, context: { cluster, user } }],
      'current-context': `${user}@${cluster}`,
    }),
  );
  return path;
}
const fromKubeconfig = kubeconfig(join(dir, 'kubeconfig'), 'from-kubeconfig', WATCHER_USER);
const home = join(dir, 'home');
mkdirSync(join(home, '.kube'), { recursive: true });
kubeconfig(join(home, '.kube', 'config'), 'from-home', STRANGER);

/** The CLI with exactly these variables for finding a cluster, whatever the test runner's are. */
const run = (args: string[], vars: Record<string, string>) => {
  const childEnv: NodeJS.ProcessEnv = { ...process.env, HOME: home, ...vars };
  for (const name of ['KUBECONFIG', 'KUBERNETES_SERVICE_HOST', 'KUBERNETES_SERVICE_PORT'])
    if (!(name in vars)) delete childEnv[name];
  return promisify(execFile)(process.execPath, [cli, ...args], { env: childEnv }).then(
    (r) => ({ code: 0, out: r.stdout, err: r.stderr }),
    (e: { code: number; stdout: string; stderr: string }) => ({ code: e.code, out: e.stdout, err: e.stderr }),
  );
};

t.test('KUBECONFIG comes before ~/.kube/config, for explain and report alike', async (t) => {
  const explained = await run(['explain', 'live-1', '-o', 'json'], { KUBECONFIG: fromKubeconfig });
  t.equal(explained.code, 0, explained.err);
  t.match(JSON.parse(explained.out), [
    { node: 'live-1', outcome: 'influenced', overlay: 'cost-aware-ri-m5.xlarge-us-west-2' },
  ] as Partial<Explanation>[]);
  const reported = await run(['report', '-o', 'json'], { KUBECONFIG: fromKubeconfig });
  t.equal(reported.code, 0, reported.err);
  t.match(JSON.parse(reported.out), {
    overlays: [{ overlay: 'cost-aware-ri-m5.xlarge-us-west-2', won: 1 }],
    totals: { onDemandNodes: 1 },
  } as Partial<Report>);
  // Without KUBECONFIG the same HOME is read: the first two answers did not come from it.
  const fromHome = await run(['explain', 'live-1'], {});
  t.equal(fromHome.code, 1);
  t.match(
    fromHome.err,
    /^veneer-node-watcher explain: 403 .*User "stranger" cannot/m,
    '~/.kube/config, when nothing else names a cluster',
  );
  const reportFromHome = await run(['report'], {});
  t.match(reportFromHome.err, /^veneer-node-watcher report: 403 .*User "stranger" cannot/m);
});

t.test(
  'in a pod, its ServiceAccount comes before ~/.kube/config',
  { skip: existsSync(SERVICE_ACCOUNT_DIR) && `${SERVICE_ACCOUNT_DIR} exists on this machine` },
  async (t) => {
    const r = await run(['explain', 'live-1'], {
      KUBERNETES_SERVICE_HOST: '127.0.0.1',
      KUBERNETES_SERVICE_PORT: String(cp.port),
    });
    t.equal(r.code, 1);
    t.match(
      r.err,
      /^veneer-node-watcher explain: cannot read \/var\/run\/secrets\/kubernetes\.io\/serviceaccount\/token/m,
      "the ServiceAccount's token is looked for, not ~/.kube/config's user",
    );
  },
);

t.test('impersonation in the kubeconfig is refused, in the words serve refuses it with', async (t) => {
  const impersonating = kubeconfig(join(dir, 'impersonating'), 'from-kubeconfig', STRANGER, { as: 'admin' });
  const refusal = 'impersonation (as, as-groups) in a kubeconfig is not supported by serve, explain or report';
  const explained = await run(['explain', 'live-1'], { KUBECONFIG: impersonating });
  t.equal(explained.code, 1);
  t.equal(explained.err, `veneer-node-watcher explain: ${refusal}\n`);
  const reported = await run(['report'], { KUBECONFIG: impersonating });
  t.equal(reported.err, `veneer-node-watcher report: ${refusal}\n`);
  const served = await run(['serve'], { KUBECONFIG: impersonating });
  t.equal(served.code, 1);
  t.match(served.err, `veneer-node-watcher: ${refusal}\n`, 'serve refuses the same file with the same reason');
});

t.test('a node that is not there names the cluster that was asked', async (t) => {
  const r = await run(['explain', 'no-such-node'], { KUBECONFIG: fromKubeconfig });
  t.equal(r.code, 1);
  t.equal(
    r.err,
    `veneer-node-watcher explain: node "no-such-node" not found at ${cp.server} (404 nodes "no-such-node" not found)\n`,
  );
});

t.test('every node, a page of 500 at a time; EC2NodeClasses the reader may not list count as none', async (t) => {
  const core = admin.makeApiClient(k8s.CoreV1Api);
  const names = Array.from({ length: 520 }, (_, i) => `paged-${String(i).padStart(3, '0')}`);
  for (let i = 0; i < names.length; i += 40) {
    await Promise.all(
      names
        .slice(i, i + 40)
        .map((name) => core.createNode({ body: karpenterNode({ name, instanceType: 'm5.xlarge' }) as k8s.V1Node })),
    );
  }
  // The watcher's rights without ec2nodeclasses: the list answers 403.
  const rbac = admin.makeApiClient(k8s.RbacAuthorizationV1Api);
  await rbac.createClusterRole({
    body: {
      metadata: { name: NO_AWS },
      rules: [
        { apiGroups: [''], resources: ['nodes'], verbs: ['get', 'list'] },
        { apiGroups: ['karpenter.sh'], resources: ['nodeoverlays', 'nodepools', 'nodeclaims'], verbs: ['get', 'list'] },
      ],
    },
  });
  await rbac.createClusterRoleBinding({
    body: {
      metadata: { name: NO_AWS },
      roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: NO_AWS },
      subjects: [{ kind: 'User', name: NO_AWS, apiGroup: 'rbac.authorization.k8s.io' }],
    },
  });
  const r = await run(['report', '-o', 'json'], {
    KUBECONFIG: kubeconfig(join(dir, 'no-aws'), 'from-kubeconfig', NO_AWS),
  });
  t.equal(r.code, 0, r.err);
  t.equal(
    (JSON.parse(r.out) as Report).totals.onDemandNodes,
    names.length + 1,
    'more nodes than one page holds, each counted once',
  );
  const nodeLists = cp
    .auditEvents()
    .filter((e) => e.verb === 'list' && e.objectRef?.resource === 'nodes') as (AuditEvent & { requestURI: string })[];
  // None has a record yet, so the recorded nodes' metadata is one empty page; the nodes that may
  // still need a record are read whole, in two pages.
  const undecided = nodeLists.filter((e) => e.requestURI.includes('%21veneer.io%2Foverlay-influenced'));
  t.equal(nodeLists.length - undecided.length, 1, "one page of the recorded nodes' metadata");
  t.equal(undecided.length, 2, 'two pages of the nodes without a record');
  t.match(undecided[0]?.requestURI, /[?&]limit=500(&|$)/);
  t.match(undecided[1]?.requestURI, /[?&]continue=[^&]+/, "the second with the first one's continue token");
});

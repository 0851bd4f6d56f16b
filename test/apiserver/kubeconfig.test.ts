// How `serve` finds the apiserver and proves who it is, against the real apiserver: tokens and
// client certificates from files that rotate, the pod's own ServiceAccount, a credential plugin,
// and kubeconfig files merged as kubectl merges them. The apiserver says who each one is
// (SelfSubjectReview), so a credential that was not sent, or not rotated, cannot pass.
import t from 'tap';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ControlPlane } from '../../kit/control-plane.ts';
import { KubeClient } from '../../src/kube/client.ts';
import {
  inClusterAccess,
  kubeconfigAccess,
  loadClusterAccess,
  mergeKubeconfigs,
  REREAD_MS,
} from '../../src/kube/kubeconfig.ts';

/** The user the client authenticates as, as the apiserver says (SelfSubjectReview). */
async function whoAmI(client: KubeClient): Promise<string | undefined> {
  const answer = await client.call<{ status?: { userInfo?: { username?: string } } }>(
    'POST',
    '/apis/authentication.k8s.io/v1/selfsubjectreviews',
    { body: { apiVersion: 'authentication.k8s.io/v1', kind: 'SelfSubjectReview', spec: {} } },
  );
  return answer.status?.userInfo?.username;
}

const cp = await ControlPlane.start({ users: [{ name: 'alice' }, { name: 'bob' }] });
t.teardown(() => cp.stop());
const dir = mkdtempSync(join(tmpdir(), 'vnw-kubeconfig-'));
const caFile = join(dir, 'ca.crt');
writeFileSync(caFile, cp.caPem);

/** A clock the test moves, so that "a minute later" takes no minute. */
let clock = 0;
const now = () => clock;

function kubeconfig(
  user: Record<string, unknown>,
  cluster: Record<string, unknown> = { server: cp.server, 'certificate-authority': 'ca.crt' },
) {
  return mergeKubeconfigs([
    {
      path: join(dir, 'config'),
      text: JSON.stringify({
        clusters: [{ name: 'c', cluster }],
        users: [{ name: 'u', user }],
        contexts: [{ name: 'x', context: { cluster: 'c', user: 'u' } }],
        'current-context': 'x',
      }),
    },
  ]);
}

async function identity(client: KubeClient): Promise<string | undefined> {
  try {
    return await whoAmI(client);
  } finally {
    await client.close();
  }
}

t.test('a token file is read again as it rotates, at most once a minute', async (t) => {
  writeFileSync(join(dir, 'token'), `${cp.tokenFor('alice')}\n`);
  const client = new KubeClient(kubeconfigAccess(kubeconfig({ tokenFile: 'token' }), undefined, now));
  t.teardown(() => client.close());
  t.equal(await whoAmI(client), 'alice', "a relative tokenFile, taken from the kubeconfig's directory");
  writeFileSync(join(dir, 'token'), cp.tokenFor('bob'));
  clock += REREAD_MS - 1;
  t.equal(await whoAmI(client), 'alice', 'not read again within the minute');
  clock += 1;
  t.equal(await whoAmI(client), 'bob', 'the rotated token, a minute later');
});

t.test('client certificates from files: a renewed one opens new connections', async (t) => {
  const first = await cp.clientCertificate('alice');
  const second = await cp.clientCertificate('bob');
  writeFileSync(join(dir, 'client.crt'), readFileSync(first.certPath));
  writeFileSync(join(dir, 'client.key'), readFileSync(first.keyPath));
  const access = kubeconfigAccess(
    kubeconfig({ 'client-certificate': 'client.crt', 'client-key': 'client.key' }),
    undefined,
    now,
  );
  const client = new KubeClient(access);
  t.teardown(() => client.close());
  t.equal(await whoAmI(client), 'alice');
  const material = access.tls();
  clock += REREAD_MS;
  t.equal(access.tls(), material, 'unchanged files: the same material, the same connections');
  writeFileSync(join(dir, 'client.crt'), readFileSync(second.certPath));
  writeFileSync(join(dir, 'client.key'), readFileSync(second.keyPath));
  clock += REREAD_MS;
  t.equal(await whoAmI(client), 'bob', 'the renewed certificate is presented on a new connection');
});

t.test('certificate data inline, and a server name that differs from the address', async (t) => {
  const cert = await cp.clientCertificate('alice', ['team']);
  const inline = (path: string) => readFileSync(path).toString('base64');
  const user = { 'client-certificate-data': inline(cert.certPath), 'client-key-data': inline(cert.keyPath) };
  t.equal(
    await identity(
      new KubeClient(
        kubeconfigAccess(
          kubeconfig(user, {
            server: cp.server,
            'certificate-authority-data': Buffer.from(cp.caPem).toString('base64'),
            'tls-server-name': 'kubernetes.default.svc',
          }),
        ),
      ),
    ),
    'alice',
  );
  const wrongName = new KubeClient(
    kubeconfigAccess(
      kubeconfig(user, {
        server: cp.server,
        'certificate-authority': 'ca.crt',
        'tls-server-name': 'elsewhere.example',
      }),
    ),
  );
  await t.rejects(
    identity(wrongName),
    /elsewhere\.example/,
    'the server name is checked against the serving certificate',
  );
  const unverified = kubeconfig({ token: cp.tokenFor('bob') }, { server: cp.server, 'insecure-skip-tls-verify': true });
  t.equal(
    await identity(new KubeClient(kubeconfigAccess(unverified))),
    'bob',
    'insecure-skip-tls-verify, when a kubeconfig asks for it',
  );
  await t.rejects(
    identity(new KubeClient(kubeconfigAccess(kubeconfig({ token: cp.tokenFor('bob') }, { server: cp.server })))),
    /self-signed|unable to verify|certificate/,
    "no CA: the cluster's certificate is not trusted",
  );
});

t.test("in a pod: the ServiceAccount's token and CA, at KUBERNETES_SERVICE_HOST", async (t) => {
  const sa = mkdtempSync(join(tmpdir(), 'vnw-sa-'));
  writeFileSync(join(sa, 'token'), await cp.serviceAccountToken('veneer', 'node-watcher'));
  writeFileSync(join(sa, 'ca.crt'), cp.caPem);
  const env = { KUBERNETES_SERVICE_HOST: '127.0.0.1', KUBERNETES_SERVICE_PORT: String(cp.port) };
  t.equal(await identity(new KubeClient(loadClusterAccess(env, dir, sa))), 'system:serviceaccount:veneer:node-watcher');
  t.equal(
    inClusterAccess({ KUBERNETES_SERVICE_HOST: 'fd00::1', KUBERNETES_SERVICE_PORT: '443' }, sa).server,
    'https://[fd00::1]:443',
    'an IPv6 service address in brackets',
  );
  t.throws(() => inClusterAccess({}, sa), /not in a cluster/);
  t.throws(
    () => inClusterAccess(env, mkdtempSync(join(tmpdir(), 'vnw-empty-'))),
    /cannot read .*token/,
    'no token file: a clear error at start-up',
  );
});

t.test('a credential plugin (exec), as EKS kubeconfigs use, through @kubernetes/client-node', async (t) => {
  const plugin = join(dir, 'credential-plugin.mjs');
  writeFileSync(
    plugin,
    `process.stdout.write(JSON.stringify({ apiVersion: 'client.authentication.k8s.io/v1', kind: 'ExecCredential', status: { token: ${JSON.stringify(cp.tokenFor('bob'))} } }));\n`,
  );
  const user = {
    exec: {
      apiVersion: 'client.authentication.k8s.io/v1',
      command: process.execPath,
      args: [plugin],
      interactiveMode: 'Never',
    },
  };
  t.equal(await identity(new KubeClient(kubeconfigAccess(kubeconfig(user)))), 'bob');
});

t.test('KUBECONFIG: files merged as kubectl does, the first to name an entry wins', async (t) => {
  const file = (name: string, doc: object) => {
    writeFileSync(join(dir, name), JSON.stringify(doc));
    return join(dir, name);
  };
  const first = file('first', {
    'current-context': 'x',
    contexts: [{ name: 'x', context: { cluster: 'c', user: 'u' } }],
    users: [{ name: 'u', user: { token: cp.tokenFor('alice') } }],
  });
  const second = file('second', {
    'current-context': 'y',
    clusters: [{ name: 'c', cluster: { server: cp.server, 'certificate-authority': 'ca.crt' } }],
    users: [{ name: 'u', user: { token: cp.tokenFor('bob') } }],
  });
  t.equal(
    await identity(
      new KubeClient(loadClusterAccess({ KUBECONFIG: `${first}:${join(dir, 'missing')}:${second}` }, dir)),
    ),
    'alice',
    'context and user from the first file, the cluster from the second, a missing file skipped',
  );
  t.throws(() => loadClusterAccess({ KUBECONFIG: join(dir, 'missing') }, dir), /KUBECONFIG names no file that exists/);
  const home = mkdtempSync(join(tmpdir(), 'vnw-home-'));
  t.throws(() => loadClusterAccess({}, home), /no cluster to talk to/);
  const kube = join(home, '.kube');
  (await import('node:fs')).mkdirSync(kube);
  writeFileSync(
    join(kube, 'config'),
    JSON.stringify({
      ...kubeconfig({ token: cp.tokenFor('bob') }),
      clusters: [{ name: 'c', cluster: { server: cp.server, 'certificate-authority': caFile } }],
    }),
  );
  t.equal(
    await identity(new KubeClient(loadClusterAccess({}, home))),
    'bob',
    '~/.kube/config when there is nothing else',
  );
});

t.test('what a kubeconfig cannot be: each refused with the reason', async (t) => {
  const doc = kubeconfig({ token: 'x' });
  t.throws(() => kubeconfigAccess({ ...doc, 'current-context': '' }), /no current-context/);
  t.throws(() => kubeconfigAccess(doc, 'elsewhere'), /no context "elsewhere"/);
  t.throws(() => kubeconfigAccess({ ...doc, clusters: [] }), /no cluster "c" with a server/);
  t.throws(
    () => kubeconfigAccess(kubeconfig({ token: 'x' }, { server: cp.server, 'proxy-url': 'socks5://127.0.0.1:1080' })),
    /only http and https proxies/,
  );
  t.throws(() => kubeconfigAccess(kubeconfig({ token: 'x', as: 'someone-else' })), /impersonation/);
  t.throws(() => kubeconfigAccess(kubeconfig({ 'client-certificate': 'no-such.crt' })), /cannot read .*no-such\.crt/);
  const basic = await kubeconfigAccess(kubeconfig({ username: 'u', password: 'p' })).authorization();
  t.equal(
    basic,
    `Basic ${Buffer.from('u:p').toString('base64')}`,
    'basic credentials, for the clusters that still have them',
  );
  t.equal(await kubeconfigAccess(kubeconfig({})).authorization(), undefined, 'no credentials: none sent');
});

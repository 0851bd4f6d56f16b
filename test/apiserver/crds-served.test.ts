// A cluster without Karpenter's CRDs: the watcher stays unready and says why (the /readyz body,
// veneer_nodewatcher_crd_served, one error line per CRD); once the CRDs are installed it becomes
// ready on its own, and a CRD deleted later makes it unready again, said again.
import * as k8s from '@kubernetes/client-node';
import t from 'tap';
import { clientFor } from '../../kit/control-plane.ts';
import { until } from '../../kit/fleet.ts';
import { crdFiles, installKarpenterCRDs } from '../../kit/karpenter-crds.ts';
import { startClusterEnv, WATCHER_USER, watcherFlags } from '../../kit/watcher-env.ts';
import { startWatcher } from '../../src/commands/serve.ts';
import { loadConfig } from '../../src/config/load.ts';
import { createLogger } from '../../src/log.ts';

const env = await startClusterEnv({ installCRDs: async () => {} });
t.teardown(() => env.cp.stop());

const lines: { level: number; msg: string; crd?: string }[] = [];
const log = createLogger('info', { write: (s: string) => void lines.push(JSON.parse(s)) });
const { config } = loadConfig({ flags: await watcherFlags(env.certs) });
const watcher = await startWatcher({
  config,
  client: clientFor(env.cp.userKubeConfig(WATCHER_USER)),
  log,
  host: '127.0.0.1',
  certPollMs: 200,
  identity: WATCHER_USER,
});
t.teardown(() => watcher.stop());

const readyz = async () => {
  const res = await fetch(`http://127.0.0.1:${watcher.healthPort}/readyz`);
  return { status: res.status, body: await res.text() };
};
const served = async () =>
  Object.fromEntries(
    [
      ...(await watcher.metrics.registry.metrics()).matchAll(
        /^veneer_nodewatcher_crd_served\{crd="([^"]+)",required="(true|false)"\} ([01])$/gm,
      ),
    ].map((m) => [`${m[1]} ${m[2]}`, Number(m[3])]),
  );
const said = (level: number, crd: string) => lines.filter((l) => l.level === level && l.crd === crd).length;

const KARPENTER = ['nodeoverlays.karpenter.sh', 'nodepools.karpenter.sh', 'nodeclaims.karpenter.sh'];
const HINT_OVERLAYS = '(is Karpenter installed with its CRDs, at a version that has NodeOverlay?)';

t.test('no Karpenter CRDs: unready, and /readyz, the gauge and the log say which', async (t) => {
  await until('every Karpenter CRD answered', async () => (await readyz()).body.split('is not served').length === 4);
  const r = await readyz();
  t.equal(r.status, 503);
  t.equal(
    r.body,
    `not ready: the CRD nodeoverlays.karpenter.sh is not served ${HINT_OVERLAYS}; the CRD nodepools.karpenter.sh is not served (is Karpenter installed?); the CRD nodeclaims.karpenter.sh is not served (is Karpenter installed?)\n`,
  );
  t.comment(r.body.trim());
  t.same(await served(), {
    'nodeoverlays.karpenter.sh true': 0,
    'nodepools.karpenter.sh true': 0,
    'nodeclaims.karpenter.sh true': 0,
    'ec2nodeclasses.karpenter.k8s.aws false': 0,
  });
  // The lists are retried with back-off (0.5 s, 1 s, 2 s, ...): wait out a few retries.
  await new Promise((r) => setTimeout(r, 4000));
  for (const crd of KARPENTER) t.equal(said(50, crd), 1, `${crd}: one error, however many retries`);
  t.comment(JSON.stringify(lines.find((l) => l.level === 50)));
  t.notOk(
    lines.some((l) => l.level === 40 && l.msg === 'list/watch failed; retrying'),
    'no warning at each retry of a missing CRD',
  );
  t.equal(said(50, 'ec2nodeclasses.karpenter.k8s.aws'), 0, 'the optional EC2NodeClass is no error');
});

t.test('the CRDs installed: ready on its own, the gauge 1, the log says so once', async (t) => {
  await installKarpenterCRDs(env.cp);
  const t0 = Date.now();
  await until('ready', async () => (await readyz()).status === 200, 60_000);
  t.comment(`ready ${Date.now() - t0} ms after the CRDs were served`);
  t.equal((await readyz()).body, 'ok');
  t.same(await served(), {
    'nodeoverlays.karpenter.sh true': 1,
    'nodepools.karpenter.sh true': 1,
    'nodeclaims.karpenter.sh true': 1,
    'ec2nodeclasses.karpenter.k8s.aws false': 0,
  });
  for (const crd of KARPENTER) t.equal(said(30, crd), 1, `${crd}: "served now", once`);
});

t.test('a Karpenter CRD deleted: unready again, said again', async (t) => {
  const api = env.admin.makeApiClient(k8s.ApiextensionsV1Api);
  t.ok(crdFiles.some((f) => f.endsWith('karpenter.sh_nodeoverlays.yaml')));
  await api.deleteCustomResourceDefinition({ name: 'nodeoverlays.karpenter.sh' });
  await until('unready', async () => (await readyz()).status === 503, 60_000);
  t.equal((await readyz()).body, `not ready: the CRD nodeoverlays.karpenter.sh is not served ${HINT_OVERLAYS}\n`);
  t.equal((await served())['nodeoverlays.karpenter.sh true'], 0);
  t.equal(said(50, 'nodeoverlays.karpenter.sh'), 2, 'the change said: a second error line');
  t.equal(said(50, 'nodepools.karpenter.sh'), 1, 'the others unchanged');
});

// Upgrading a release of the last released chart (kept in test/fixtures/charts) to this one, with
// the real helm against the real apiserver: the way the docs say (--reset-then-reuse-values, or
// -f with the values file) renders this chart's defaults under the values given and moves every
// object; --reuse-values renders this chart's templates with the old chart's defaults and fails.
// With pods and nodes being created during it: test/_real-node/node.test.ts.
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t, { type Test } from 'tap';
import * as k8s from '@kubernetes/client-node';
import { ControlPlane } from '../../kit/control-plane.ts';
import { installKarpenterCRDs } from '../../kit/karpenter-crds.ts';
import { CHART, helm, NS, PREVIOUS_CHART } from '../support/chart.ts';
import { installExternalCRDs } from '../support/external-crds.ts';

const cp = await ControlPlane.start();
t.teardown(() => cp.stop());
const admin = cp.adminKubeConfig();
await installKarpenterCRDs(cp);
await installExternalCRDs(admin);
const home = mkdtempSync(join(tmpdir(), 'vnw-helm-'));
const env = {
  ...process.env,
  KUBECONFIG: cp.writeKubeConfig(),
  HELM_CACHE_HOME: home,
  HELM_CONFIG_HOME: home,
  HELM_DATA_HOME: home,
};
const run = (args: string[]) => helm(args, env);
const registrations = admin.makeApiClient(k8s.AdmissionregistrationV1Api);
const core = admin.makeApiClient(k8s.CoreV1Api);
const configMaps = async () =>
  (await core.listNamespacedConfigMap({ namespace: NS })).items
    .filter((c) => c.data?.['config.yaml'] !== undefined)
    .map((c) => c.metadata?.name);

/** A release of 0.1.0 as its docs installed it, with a value of the user's. */
async function installPrevious(t: Test, name: string): Promise<void> {
  const r = run([
    'install',
    name,
    PREVIOUS_CHART,
    '-n',
    NS,
    '--create-namespace',
    '--set',
    'nodeWatcher.enabled=true',
    '--set',
    'nodeWatcher.logLevel=debug',
  ]);
  t.equal(r.status, 0, r.stderr);
}

t.test('--reuse-values: the old chart defaults under the new templates, and the upgrade fails', async (t) => {
  await installPrevious(t, 'reused');
  const r = run(['upgrade', 'reused', CHART, '-n', NS, '--reuse-values']);
  t.not(r.status, 0, 'helm upgrade --reuse-values fails');
  t.match(r.stderr, /nil pointer|serviceAccount\.name|can't evaluate field/, r.stderr);
  t.comment(r.stderr.trim().split('\n').at(-1) ?? '');
  t.equal(run(['uninstall', 'reused', '-n', NS]).status, 0);
});

for (const how of [['--reset-then-reuse-values'], ['-f', 'VALUES']] as const)
  t.test(`helm upgrade ${how[0]}: every object moves to this chart, the user's value kept`, async (t) => {
    await installPrevious(t, 'upgraded');
    t.equal((await registrations.listValidatingWebhookConfiguration()).items.length, 1, "0.1.0's validating webhook");
    t.same(await configMaps(), ['upgraded-veneer-node-watcher'], "0.1.0's ConfigMap, its name fixed");
    const dir = mkdtempSync(join(tmpdir(), 'vnw-values-'));
    writeFileSync(join(dir, 'values.yaml'), 'nodeWatcher:\n  enabled: true\n  logLevel: debug\n');
    const flags = how[0] === '-f' ? ['-f', join(dir, 'values.yaml')] : [...how];
    const r = run(['upgrade', 'upgraded', CHART, '-n', NS, ...flags]);
    t.equal(r.status, 0, r.stderr);
    t.same((await registrations.listValidatingWebhookConfiguration()).items, [], 'the validating webhook is gone');
    t.equal((await registrations.listValidatingAdmissionPolicy()).items.length, 1, 'the guard is the policy now');
    t.equal((await registrations.listMutatingWebhookConfiguration()).items.length, 1, 'the mutating webhook stays');
    const names = await configMaps();
    t.match(names, [/^upgraded-veneer-node-watcher-[0-9a-f]{10}$/], 'one ConfigMap, named by its content');
    const config = (await core.readNamespacedConfigMap({ name: names[0]!, namespace: NS })).data?.['config.yaml'];
    t.match(config, /logLevel: debug/, "the user's value kept");
    t.match(config, /mode: record/, "this chart's new defaults under it");
    t.equal(run(['uninstall', 'upgraded', '-n', NS]).status, 0);
  });

// karpenterProvider set explicitly against what the NodeClaims show: the watcher runs with
// `--karpenter-provider aws` beside real Karpenter with its KWOK provider, whose NodeClaims name
// spec.nodeClassRef.group karpenter.kwok.sh. Before, every on-demand node was then recorded
// overlay-influenced=false, silently (an overlay on karpenter.kwok.sh/instance-family is undefined
// for AWS's keys). Now it is loud: one warning, the gauge's matches_setting="false" series, every
// record with basis approximate and the reason, and `report` and `explain` say so. (With the
// default, auto, the other real-Karpenter tests prove that the same NodeClaims pick KWOK's keys.)
import { execFile } from 'node:child_process';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import { promisify } from 'node:util';
import t from 'tap';
import * as k8s from '@kubernetes/client-node';
import type { Explanation } from '../../src/engine/index.ts';
import type { DecisionStory } from '../../src/engine/record.ts';
import { createLogger } from '../../src/log.ts';
import { counter, until } from '../../kit/fleet.ts';
import { createPendingPods, startKarpenterEnv } from '../../kit/karpenter.ts';
import { computeSavingsPlan } from '../../kit/veneer.ts';
import { launchWatcher, registerWebhooksAt, WATCHER_USER } from '../../kit/watcher-env.ts';
import { promtool } from '../support/prometheus.ts';
import { expectOverlaysCounted } from '../support/expectations.ts';

t.setTimeout(180_000);
const cli = join(import.meta.dirname, '..', '..', 'src', 'cli.ts');
const NODES = 3;

const env = await startKarpenterEnv();
t.teardown(() => env.cp.stop());
const logs: { level: number; msg: string; provider?: string; group?: string; karpenterProvider?: string }[] = [];
const log = createLogger(
  'info',
  new Writable({
    write(chunk, _e, done) {
      for (const line of String(chunk).split('\n').filter(Boolean)) logs.push(JSON.parse(line));
      done();
    },
  }),
);
const { watcher } = await launchWatcher(env.cp, env.certs, WATCHER_USER, { '--karpenter-provider': 'aws' }, { log });
t.teardown(() => watcher.stop());
await registerWebhooksAt(env.admin, { caPem: env.certs.caPem, port: watcher.webhookPort! });
const custom = env.admin.makeApiClient(k8s.CustomObjectsApi);
const core = env.admin.makeApiClient(k8s.CoreV1Api);
// Exists on karpenter.kwok.sh/instance-family: Karpenter prices every on-demand launch with it.
const COMPUTE = computeSavingsPlan('kwok');
await expectOverlaysCounted({ custom, overlays: [COMPUTE], metrics: () => watcher.metrics.registry.metrics() });

const pods = Array.from({ length: NODES }, (_, i) => ({
  name: `od-${i}`,
  instanceType: 'm5.xlarge',
  capacityType: 'on-demand' as const,
}));
await createPendingPods(env.admin, pods, env.karpenter.catalog);
const recorded = async () =>
  (await core.listNode()).items.filter((n) => n.metadata?.labels?.['veneer.io/overlay-influenced'] !== undefined);
await until('every node recorded', async () => (await recorded()).length === NODES, 60_000);
const claimsOf = async () =>
  (
    (await custom.listClusterCustomObject({ group: 'karpenter.sh', version: 'v1', plural: 'nodeclaims' })) as {
      items: { spec: { nodeClassRef: { group: string } } }[];
    }
  ).items;
const kubeconfig = env.cp.writeKubeConfig();
const cliRun = (args: string[]) =>
  promisify(execFile)(process.execPath, [cli, ...args], { env: { ...process.env, KUBECONFIG: kubeconfig } });

t.test('real KWOK NodeClaims name karpenter.kwok.sh', async (t) => {
  t.same([...new Set((await claimsOf()).map((c) => c.spec.nodeClassRef.group))], ['karpenter.kwok.sh']);
});

t.test('every record: basis approximate, and why, never a confident false', async (t) => {
  for (const n of await recorded()) {
    const name = n.metadata?.name ?? '';
    const story = JSON.parse(n.metadata?.annotations?.['veneer.io/overlay-decision'] ?? '{}') as DecisionStory;
    t.equal(
      n.metadata?.labels?.['veneer.io/overlay-influenced'],
      'false',
      `${name}: AWS's keys leave karpenter.kwok.sh/instance-family undefined`,
    );
    t.match(
      story,
      {
        basis: 'approximate',
        provider: 'aws',
        providerFrom: 'setting',
        providerWarning:
          /^karpenterProvider is aws, but (NodeClaim \S+ belongs to kwok \(nodeClassRef\.group karpenter\.kwok\.sh\)|the node's labels are kwok's \(karpenter\.kwok\.sh\/\.\.\.\) and its NodeClaim is unknown): Karpenter compared kwok's keys, this decision used aws's$/,
      },
      `${name}: decided by the ${story.decidedBy}`,
    );
  }
});

t.test('one warning, and the gauge\'s matches_setting="false" series, which promtool accepts', async (t) => {
  const warnings = logs.filter((l) => l.level === 40 && /karpenterProvider/.test(l.msg));
  t.equal(warnings.length, 1, 'logged once, however many NodeClaims');
  t.match(warnings[0], {
    karpenterProvider: 'aws',
    provider: 'kwok',
    group: 'karpenter.kwok.sh',
    msg: /^karpenterProvider is aws, but NodeClaims belong to kwok .*set karpenterProvider to auto or kwok$/,
  });
  const text = await watcher.metrics.registry.metrics();
  t.equal(
    counter(text, 'veneer_nodewatcher_karpenter_provider_nodeclaims', { provider: 'kwok', matches_setting: 'false' }),
    (await claimsOf()).length,
  );
  t.equal(
    counter(text, 'veneer_nodewatcher_karpenter_provider_nodeclaims', { provider: 'aws', matches_setting: 'true' }),
    0,
  );
  t.equal(
    counter(text, 'veneer_nodewatcher_karpenter_provider_nodeclaims', {
      provider: 'unknown',
      matches_setting: 'false',
    }),
    0,
  );
  const check = promtool(['check', 'metrics'], text);
  t.equal(check.status, 0, check.stderr);
  t.equal(check.stdout.trim(), '', 'promtool has nothing to say');
});

t.test("report and explain, live: the setting warned about; with auto, KWOK's keys and the overlay", async (t) => {
  const wrong = (await cliRun(['report', '--karpenter-provider', 'aws'])).stdout;
  t.match(
    wrong,
    new RegExp(
      `^Karpenter provider: aws, set by karpenterProvider \\(NodeClaims: kwok ${NODES} \\(not karpenterProvider\\)\\)$`,
      'm',
    ),
  );
  t.match(wrong, new RegExp(`^WARNING: ${NODES} on-demand Karpenter nodes are judged with a provider in doubt`, 'm'));
  const auto = (await cliRun(['report'])).stdout;
  t.match(
    auto,
    new RegExp(
      `^Karpenter provider: auto, from each NodeClaim's nodeClassRef\\.group \\(NodeClaims: kwok ${NODES}\\)$`,
      'm',
    ),
  );
  t.notMatch(auto, /WARNING/);
  const [first] = await recorded();
  const explained = JSON.parse(
    (await cliRun(['explain', first?.metadata?.name ?? '', '-o', 'json'])).stdout,
  ) as Explanation[];
  t.match(
    explained[0],
    {
      outcome: 'influenced',
      overlay: COMPUTE.metadata.name,
      provider: { name: 'kwok', from: 'nodeclaim', group: 'karpenter.kwok.sh' },
      existingRecord: { 'veneer.io/overlay-influenced': 'false' },
    },
    'what the record would have been with auto',
  );
});

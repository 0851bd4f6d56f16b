// `veneer-node-watcher serve` as a real process: start-up, readiness, disabled mode and bad
// config. SIGTERM under load is in test/faults/under-load.test.ts.
import { type ChildProcess, spawn } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import t from 'tap';
import { freePort } from '../../kit/control-plane.ts';
import { grantMetricsReader, registerWebhooksAt, startClusterEnv } from '../../kit/watcher-env.ts';
import { waitReady } from '../../kit/fleet.ts';
import { scrape } from '../../kit/scrape.ts';
import { nodeReview, post } from '../support/reviews.ts';

const env = await startClusterEnv();
t.teardown(() => env.cp.stop());
const kubeconfig = env.cp.writeKubeConfig(env.cp.userKubeConfig('veneer-watcher'), 'watcher-kubeconfig');
const cli = join(import.meta.dirname, '..', '..', 'src', 'cli.ts');

interface Proc {
  child: ChildProcess;
  output: () => string;
  exited: Promise<number | null>;
}

function run(args: string[], extraEnv: Record<string, string> = {}, nodeArgs: string[] = []): Proc {
  const child = spawn(process.execPath, [...nodeArgs, cli, ...args], {
    env: { ...process.env, KUBECONFIG: kubeconfig, ...extraEnv },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  child.stdout?.on('data', (c) => (out += c));
  child.stderr?.on('data', (c) => (out += c));
  const exited = new Promise<number | null>((r) => child.once('exit', (code) => r(code)));
  t.teardown(() => void child.kill('SIGKILL'));
  return { child, output: () => out, exited };
}

t.test('disabled (the default): says so, serves probes and secure metrics, writes nothing', async (t) => {
  const [healthPort, metricsPort] = [await freePort(), await freePort()];
  const p = run([
    'serve',
    '--health-port',
    String(healthPort),
    '--metrics-port',
    String(metricsPort),
    '--webhook-cert-file',
    env.certs.serving.certPath,
    '--webhook-key-file',
    env.certs.serving.keyPath,
  ]);
  await waitReady(healthPort, '/healthz');
  t.match(p.output(), /Node watcher disabled \(set nodeWatcher\.enabled=true to enable\)/);
  t.equal((await fetch(`http://127.0.0.1:${healthPort}/readyz`)).status, 200, 'probes: plain HTTP, no token');
  const anonymous = await scrape(metricsPort, { caPem: env.certs.caPem });
  t.equal(anonymous.status, 401, 'metrics: HTTPS, and nothing without a token');
  t.equal(anonymous.headers['www-authenticate'], 'Bearer realm="veneer-node-watcher"');
  p.child.kill('SIGTERM');
  t.equal(await p.exited, 0, 'SIGTERM: clean exit');
});

t.test('metrics.secure=false: /metrics over plain HTTP to anyone, for scrapers inside a mesh', async (t) => {
  const [healthPort, metricsPort] = [await freePort(), await freePort()];
  const p = run(['serve', '--health-port', String(healthPort), '--metrics-port', String(metricsPort)], {
    VENEER_NODE_WATCHER_METRICS_SECURE: 'false',
  });
  await waitReady(healthPort, '/healthz');
  const res = await fetch(`http://127.0.0.1:${metricsPort}/metrics`);
  t.equal(res.status, 200);
  const text = await res.text();
  t.match(text, /^# TYPE veneer_nodewatcher_nodes_labeled_total counter$/m);
  t.match(
    text,
    /^veneer_nodewatcher_records_held\{reason="disabled"\} 1$/m,
    'disabled (the default here): records_held says why nothing is written, for the alerts to hold their peace',
  );
  t.equal((await fetch(`http://127.0.0.1:${metricsPort}/healthz`)).status, 404, 'only /metrics on the metrics port');
  p.child.kill('SIGTERM');
  t.equal(await p.exited, 0);
});

t.test(
  "serve does not load @kubernetes/client-node, unless the kubeconfig's credentials come from a plugin",
  async (t) => {
    const hook = ['--import', join(import.meta.dirname, '..', 'support', 'report-client-node.mjs')];
    const plugin = join(env.cp.dir, 'credential-plugin.mjs');
    writeFileSync(
      plugin,
      `process.stdout.write(JSON.stringify({ apiVersion: 'client.authentication.k8s.io/v1', kind: 'ExecCredential', status: { token: ${JSON.stringify(env.cp.tokenFor('veneer-watcher'))} } }));\n`,
    );
    const viaPlugin = JSON.parse(readFileSync(kubeconfig, 'utf8')) as { users: { user: Record<string, unknown> }[] };
    viaPlugin.users[0]!.user = {
      exec: {
        apiVersion: 'client.authentication.k8s.io/v1',
        command: process.execPath,
        args: [plugin],
        interactiveMode: 'Never',
      },
    };
    const pluginKubeconfig = join(env.cp.dir, 'plugin-kubeconfig');
    writeFileSync(pluginKubeconfig, JSON.stringify(viaPlugin));
    for (const [what, extraEnv, loads] of [
      ['a token', {}, false],
      ['a credential plugin', { KUBECONFIG: pluginKubeconfig }, true],
    ] as const) {
      const [healthPort, metricsPort] = [await freePort(), await freePort()];
      const p = run(
        [
          'serve',
          '--enabled',
          'true',
          '--leader-election-enabled',
          'false',
          '--metrics-secure',
          'false',
          '--health-port',
          String(healthPort),
          '--metrics-port',
          String(metricsPort),
          '--webhook-port',
          String(await freePort()),
          '--webhook-cert-file',
          env.certs.serving.certPath,
          '--webhook-key-file',
          env.certs.serving.keyPath,
        ],
        extraEnv,
        hook,
      );
      await waitReady(healthPort);
      t.match(
        await (await fetch(`http://127.0.0.1:${metricsPort}/metrics`)).text(),
        /^veneer_nodewatcher_cache_refresh_total [1-9]/m,
        `${what}: ready, with the overlays listed`,
      );
      t.equal(
        /@kubernetes\/client-node loaded/.test(p.output()),
        loads,
        `${what}: client-node ${loads ? 'loaded for the plugin' : 'never loaded'}`,
      );
      p.child.kill('SIGTERM');
      t.equal(await p.exited, 0);
    }
  },
);

/** An AdmissionReview POSTed as the apiserver posts it: HTTPS, verified against the CA. */
function review(host: string, port: number, uid: string): Promise<{ status: number; body: string }> {
  return post({ host, port, caPem: env.certs.caPem }, '/mutate-node?timeout=10s', nodeReview(uid));
}

t.test('by default every listener answers at [::1] and at 127.0.0.1 on the same port (`::`, dual-stack)', async (t) => {
  const [healthPort, metricsPort, webhookPort] = [await freePort(), await freePort(), await freePort()];
  const p = run([
    'serve',
    '--enabled',
    'true',
    '--leader-election-enabled',
    'false',
    '--health-port',
    String(healthPort),
    '--metrics-port',
    String(metricsPort),
    '--webhook-port',
    String(webhookPort),
    '--webhook-cert-file',
    env.certs.serving.certPath,
    '--webhook-key-file',
    env.certs.serving.keyPath,
  ]);
  await waitReady(healthPort);
  t.notMatch(p.output(), /no IPv6/, 'this machine has IPv6: no fallback said');
  await grantMetricsReader(env.admin, [{ kind: 'ServiceAccount', name: 'prometheus', namespace: 'monitoring' }]);
  const token = await env.cp.serviceAccountToken('monitoring', 'prometheus');
  for (const host of ['::1', '127.0.0.1']) {
    const at = host.includes(':') ? `[${host}]` : host;
    t.equal((await fetch(`http://${at}:${healthPort}/healthz`)).status, 200, `/healthz at ${at}`);
    t.equal((await fetch(`http://${at}:${healthPort}/readyz`)).status, 200, `/readyz at ${at}`);
    const scraped = await scrape(metricsPort, { caPem: env.certs.caPem, token, host });
    t.equal(scraped.status, 200, `/metrics at ${at}, over HTTPS with a reader's token`);
    t.match(scraped.body, /^# TYPE veneer_nodewatcher_admission_requests_total counter$/m);
    const answered = await review(host, webhookPort, `uid-${host}`);
    t.equal(answered.status, 200, `an AdmissionReview at ${at}`);
    t.match(JSON.parse(answered.body), { kind: 'AdmissionReview', response: { uid: `uid-${host}`, allowed: true } });
  }
  // The apiserver, told the webhook is at [::1], calls it there: records appear on dry-run creates.
  const unregister = await registerWebhooksAt(env.admin, { caPem: env.certs.caPem, port: webhookPort, address: '::1' });
  t.pass("the apiserver's webhook calls reach the watcher at [::1]");
  await unregister();
  p.child.kill('SIGTERM');
  t.equal(await p.exited, 0);
});

t.test('a serving certificate that cannot be read stops start-up when metrics are secure', async (t) => {
  const p = run([
    'serve',
    '--health-port',
    String(await freePort()),
    '--metrics-port',
    String(await freePort()),
    '--webhook-cert-file',
    '/nonexistent/tls.crt',
  ]);
  t.equal(await p.exited, 1);
  t.match(p.output(), /cannot read serving certificate \/nonexistent\/tls.crt: ENOENT/);
});

t.test('a bad configuration stops start-up with exit code 2 and says what is wrong', async (t) => {
  const p = run(['serve', '--max-concurrent-reconciles', '0'], { VENEER_NODE_WATCHER_LABEL_NAMESPACE: 'Not Valid' });
  t.equal(await p.exited, 2);
  t.match(
    p.output(),
    /nodeWatcher\.labelNamespace = "Not Valid" \(from environment variable VENEER_NODE_WATCHER_LABEL_NAMESPACE\): must be a DNS subdomain/,
  );
  t.match(
    p.output(),
    /nodeWatcher\.maxConcurrentReconciles = 0 \(from flag --max-concurrent-reconciles\): must be >= 1/,
  );
  const nowhere = run(
    [
      'serve',
      '--health-port',
      String(await freePort()),
      '--metrics-port',
      String(await freePort()),
      '--metrics-secure',
      'false',
    ],
    { KUBECONFIG: '', HOME: env.cp.dir },
  );
  t.equal(await nowhere.exited, 1);
  t.match(
    nowhere.output(),
    /no cluster to talk to: set KUBECONFIG, run in a pod, or create ~\/\.kube\/config/,
    'no cluster configuration: says where it looked',
  );
  const unknown = run(['launch']);
  t.equal(await unknown.exited, 2);
  t.match(unknown.output(), /unknown command "launch"/);
});

t.test(
  'version skew: a config file of a newer chart starts this version, which warns of each key it does not know',
  async (t) => {
    // What a later chart may render: this one's file, and settings this version has never heard of.
    const file = join(env.cp.dir, 'newer-config.yaml');
    writeFileSync(
      file,
      'nodeWatcher:\n  enabled: false\n  logLevel: info\n  aSettingOfTheNextVersion: true\n  metrics:\n    secure: false\n    newKnob: 3\n',
    );
    const check = run(['check-config', '--config', file]);
    t.equal(await check.exited, 0, 'check-config: valid');
    t.match(
      check.output(),
      /nodeWatcher\.aSettingOfTheNextVersion \(from .* line 4\) is not a setting of this version: ignored/,
    );
    const [healthPort, metricsPort] = [await freePort(), await freePort()];
    const p = run([
      'serve',
      '--config',
      file,
      '--health-port',
      String(healthPort),
      '--metrics-port',
      String(metricsPort),
    ]);
    await waitReady(healthPort, '/readyz');
    t.match(
      p.output(),
      /"level":40.*"warning":"nodeWatcher\.metrics\.newKnob \(from .* line 7\) is not a setting of this version: ignored"/,
    );
    t.match(p.output(), /"level":40.*nodeWatcher\.aSettingOfTheNextVersion/, 'each key, in the log at warn');
    p.child.kill('SIGTERM');
    t.equal(await p.exited, 0, 'it ran, and stops cleanly');
  },
);

t.test('--help, --version and check-config through the real entry point', async (t) => {
  const help = run(['--help']);
  t.equal(await help.exited, 0);
  t.match(help.output(), /Usage: veneer-node-watcher/);
  t.match(help.output(), /--overlay-cache-ttl\s+The most stale the overlay cache may be/);
  const version = run(['--version']);
  t.equal(await version.exited, 0);
  t.match(version.output(), /^\d+\.\d+\.\d+\n$/);
  const check = run(['check-config', '--overlay-cache-ttl=30s'], { VENEER_NODE_WATCHER_ENABLED: 'true' });
  t.equal(await check.exited, 0);
  t.match(check.output(), /^configuration is valid$/m);
  t.match(check.output(), /^nodeWatcher\.enabled\s+true\s+environment variable VENEER_NODE_WATCHER_ENABLED$/m);
  t.match(check.output(), /^nodeWatcher\.overlayCacheTTL\s+"30s"\s+flag --overlay-cache-ttl$/m);
  t.match(check.output(), /^nodeWatcher\.labelNamespace\s+"veneer.io"\s+default$/m);
  t.match(check.output(), /^nodeWatcher\.metrics\.secure\s+true\s+default$/m);
  t.match(check.output(), /^nodeWatcher\.health\.port\s+8081\s+default$/m);
  const dangling = run(['check-config', '--config']);
  t.equal(await dangling.exited, 2);
  t.match(dangling.output(), /flag --config needs a value/);
});

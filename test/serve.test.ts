// `veneer-node-watcher serve` as a real process: start-up, readiness, disabled mode and bad
// config. SIGTERM under load is in test/reliability/under-load.test.ts.
import { type ChildProcess, spawn } from 'node:child_process';
import { join } from 'node:path';
import t from 'tap';
import { freePort } from './support/control-plane.ts';
import { startClusterEnv } from './support/watcher-env.ts';
import { waitReady } from './support/fleet.ts';

const env = await startClusterEnv();
t.teardown(() => env.cp.stop());
const kubeconfig = env.cp.writeKubeConfig(env.cp.userKubeConfig('veneer-watcher'), 'watcher-kubeconfig');
const cli = join(import.meta.dirname, '..', 'src', 'cli.ts');

interface Proc {
  child: ChildProcess;
  output: () => string;
  exited: Promise<number | null>;
}

function run(args: string[], extraEnv: Record<string, string> = {}): Proc {
  const child = spawn(process.execPath, [cli, ...args], { env: { ...process.env, KUBECONFIG: kubeconfig, ...extraEnv }, stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  child.stdout?.on('data', (c) => (out += c));
  child.stderr?.on('data', (c) => (out += c));
  const exited = new Promise<number | null>((r) => child.once('exit', (code) => r(code)));
  t.teardown(() => void child.kill('SIGKILL'));
  return { child, output: () => out, exited };
}

t.test('disabled (the default): says so, serves health and metrics, writes nothing', async (t) => {
  const metricsPort = await freePort();
  const p = run(['serve', '--metrics-port', String(metricsPort)]);
  await waitReady(metricsPort, '/healthz');
  t.match(p.output(), /Node watcher disabled \(set nodeWatcher\.enabled=true to enable\)/);
  t.equal((await fetch(`http://127.0.0.1:${metricsPort}/metrics`)).status, 200);
  p.child.kill('SIGTERM');
  t.equal(await p.exited, 0, 'SIGTERM: clean exit');
});

t.test('a bad configuration stops start-up with exit code 2 and says what is wrong', async (t) => {
  const p = run(['serve', '--max-concurrent-reconciles', '0'], { VENEER_NODE_WATCHER_LABEL_NAMESPACE: 'Not Valid' });
  t.equal(await p.exited, 2);
  t.match(p.output(), /nodeWatcher\.labelNamespace = "Not Valid" \(from environment variable VENEER_NODE_WATCHER_LABEL_NAMESPACE\): must be a DNS subdomain/);
  t.match(p.output(), /nodeWatcher\.maxConcurrentReconciles = 0 \(from flag --max-concurrent-reconciles\): must be >= 1/);
  const unknown = run(['launch']);
  t.equal(await unknown.exited, 2);
  t.match(unknown.output(), /unknown command "launch"/);
});

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
  const dangling = run(['check-config', '--config']);
  t.equal(await dangling.exited, 2);
  t.match(dangling.output(), /flag --config needs a value/);
});

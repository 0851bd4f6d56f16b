// No Docker engine here: this runs the Dockerfile's own steps (COPY, RUN, WORKDIR, per stage)
// in clean temporary directories and starts the runtime stage's entrypoint, so a broken
// Dockerfile fails CI. The base images are the one part that cannot run here: the build
// stage's commands run with this machine's npm, and the runtime stage's node is Node 24 from
// the npm package `node`, standing in for distroless's /nodejs/bin/node.
import { execSync, spawn } from 'node:child_process';
import { cpSync, existsSync, mkdirSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t from 'tap';
import { RUNTIME_NODE_FLAGS } from '../kit/node-flags.ts';
import { freePort } from '../kit/control-plane.ts';
import { scrape } from '../kit/scrape.ts';
import { makeWebhookCerts } from '../kit/watcher-env.ts';

const root = join(import.meta.dirname, '..');
const lines = readFileSync(join(root, 'Dockerfile'), 'utf8')
  .split('\n')
  .map((l) => l.trim())
  .filter((l) => l && !l.startsWith('#'));
const work = mkdtempSync(join(tmpdir(), 'vnw-docker-'));
t.teardown(() => execSync(`rm -rf ${work}`));

interface Stage {
  name: string;
  dir: string;
  workdir: string;
  user?: string;
  entrypoint?: string[];
  cmd?: string[];
}
const stages: Stage[] = [];
// As in a container: none of the test runner's loaders, coverage or npm settings. tap
// re-injects its variables into every child it sees spawned, so the shell drops them itself.
const CLEAN =
  'for v in $(compgen -e | grep -E "^(npm_|NODE_OPTIONS|NODE_V8_COVERAGE|_TAPJS|TAP)"); do unset "$v"; done; export PATH=/usr/local/bin:/usr/bin:/bin:/usr/local/go/bin;';
const at = (s: Stage, p: string) => join(s.dir, p.startsWith('/') ? p : join(s.workdir, p));

for (const line of lines) {
  const [instruction = '', ...rest] = line.split(/\s+/);
  const args = rest.join(' ');
  const stage = stages.at(-1);
  switch (instruction.toUpperCase()) {
    case 'FROM': {
      const name = /\bAS\s+(\S+)/i.exec(args)?.[1] ?? `stage${stages.length}`;
      stages.push({ name, dir: join(work, name), workdir: '/' });
      mkdirSync(join(work, name), { recursive: true });
      break;
    }
    case 'WORKDIR':
      stage!.workdir = args;
      mkdirSync(at(stage!, '.'), { recursive: true });
      break;
    case 'COPY': {
      const parts = rest.filter((p) => !p.startsWith('--'));
      const from = /--from=(\S+)/.exec(args)?.[1];
      const dest = parts.pop()!;
      for (const src of parts) {
        const source = from ? at(stages.find((s) => s.name === from)!, src) : join(root, src);
        const target =
          dest.endsWith('/') || parts.length > 1 ? join(at(stage!, dest), src.split('/').pop()!) : at(stage!, dest);
        cpSync(source, target, { recursive: true });
      }
      break;
    }
    case 'RUN':
      execSync(`${CLEAN} ${args}`, { cwd: at(stage!, '.'), stdio: 'pipe', shell: '/bin/bash', timeout: 240_000 });
      break;
    case 'USER':
      stage!.user = args;
      break;
    case 'ENTRYPOINT':
      stage!.entrypoint = JSON.parse(args) as string[];
      break;
    case 'CMD':
      stage!.cmd = JSON.parse(args) as string[];
      break;
  }
}
const runtime = stages.at(-1)!;

t.test('the runtime stage: production dependencies only, non-root, exec-form entrypoint', async (t) => {
  t.equal(stages.length, 2, 'multi-stage');
  t.ok(existsSync(at(runtime, 'dist/cli.js')), 'the build output');
  t.ok(existsSync(at(runtime, 'node_modules/@kubernetes/client-node')), 'runtime dependencies');
  for (const dev of ['typescript', 'tap', 'node', 'fast-check'])
    t.notOk(existsSync(at(runtime, `node_modules/${dev}`)), `no ${dev}`);
  t.match(runtime.user, /^65532/);
  t.same(
    runtime.entrypoint,
    ['/nodejs/bin/node', ...RUNTIME_NODE_FLAGS, 'dist/cli.js'],
    'the V8 flags the benchmarks measured',
  );
  t.same(runtime.cmd, ['serve']);
});

t.test("the image's entrypoint starts, serves health, and exits cleanly on SIGTERM as PID 1 would", async (t) => {
  const [, ...entryArgs] = runtime.entrypoint ?? [];
  const [healthPort, metricsPort] = [await freePort(), await freePort()];
  // Secure metrics (the default) need the serving certificate the chart mounts.
  const certs = await makeWebhookCerts(join(work, 'certs'));
  const argv = [
    process.execPath,
    ...entryArgs,
    ...(runtime.cmd ?? []),
    '--health-port',
    String(healthPort),
    '--metrics-port',
    String(metricsPort),
    '--webhook-cert-file',
    certs.serving.certPath,
    '--webhook-key-file',
    certs.serving.keyPath,
  ];
  // A pod always has a cluster to talk to; a disabled watcher never calls it before a token needs reviewing.
  const kubeconfig = join(work, 'kubeconfig');
  writeFileSync(
    kubeconfig,
    JSON.stringify({
      clusters: [{ name: 'c', cluster: { server: 'https://127.0.0.1:1' } }],
      contexts: [{ name: 'c', context: { cluster: 'c' } }],
      'current-context': 'c',
    }),
  );
  const child = spawn(
    'bash',
    ['-c', `${CLEAN} export KUBECONFIG='${kubeconfig}'; exec ${argv.map((a) => `'${a}'`).join(' ')}`],
    { cwd: at(runtime, '.'), stdio: ['ignore', 'pipe', 'pipe'] },
  );
  let out = '';
  child.stdout.on('data', (c) => (out += c));
  const exited = new Promise<number | null>((r) => child.once('exit', (code) => r(code)));
  let healthy = false;
  for (let i = 0; i < 100 && !healthy; i++) {
    healthy = await fetch(`http://127.0.0.1:${healthPort}/healthz`).then(
      (r) => r.ok,
      () => false,
    );
    if (!healthy) await new Promise((r) => setTimeout(r, 100));
  }
  t.ok(healthy, '/healthz answers');
  t.equal(
    (await scrape(metricsPort, { caPem: certs.caPem })).status,
    401,
    '/metrics: HTTPS, and nothing without a token',
  );
  t.match(out, /Node watcher disabled/);
  child.kill('SIGTERM');
  t.equal(await exited, 0);
});

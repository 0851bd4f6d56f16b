// No Docker engine here: this runs the Dockerfile's own steps (COPY, RUN, WORKDIR, per stage,
// kit/dockerfile.ts) in clean temporary directories and starts the runtime stage's entrypoint, so
// a broken Dockerfile fails CI. The base images are the one part that cannot run here: the build
// stage's commands run with this machine's npm, and the runtime stage's node is Node 24 from the
// npm package `node`, standing in for distroless's /nodejs/bin/node. The OCI image the real node
// runs (kit/node/image.ts, test/node.test.ts) is assembled from the same replay: checked here to
// be the image this Dockerfile describes.
import { execSync, spawn } from 'node:child_process';
import { existsSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t from 'tap';
import { RUNTIME_NODE_FLAGS } from '../kit/node-flags.ts';
import { freePort } from '../kit/control-plane.ts';
import { CLEAN_ENV, inStage, replay } from '../kit/dockerfile.ts';
import { configOf, watcherImage } from '../kit/node/image.ts';
import { scrape } from '../kit/scrape.ts';
import { makeWebhookCerts } from '../kit/watcher-env.ts';

const work = mkdtempSync(join(tmpdir(), 'vnw-docker-'));
t.teardown(() => execSync(`rm -rf ${work}`));
const stages = replay(work);
const runtime = stages.at(-1)!;

t.test('the runtime stage: production dependencies only, non-root, exec-form entrypoint', async (t) => {
  t.equal(stages.length, 2, 'multi-stage');
  t.ok(existsSync(inStage(runtime, 'dist/cli.js')), 'the build output');
  t.ok(existsSync(inStage(runtime, 'node_modules/@kubernetes/client-node')), 'runtime dependencies');
  for (const dev of ['typescript', 'tap', 'node', 'fast-check'])
    t.notOk(existsSync(inStage(runtime, `node_modules/${dev}`)), `no ${dev}`);
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
    ['-c', `${CLEAN_ENV} export KUBECONFIG='${kubeconfig}'; exec ${argv.map((a) => `'${a}'`).join(' ')}`],
    { cwd: inStage(runtime, '.'), stdio: ['ignore', 'pipe', 'pipe'] },
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

t.test('the OCI image the real node runs is the image this Dockerfile describes', async (t) => {
  const image = watcherImage(stages);
  const config = configOf(image.tar);
  t.same(
    config,
    {
      user: runtime.user,
      workdir: runtime.workdir,
      entrypoint: runtime.entrypoint,
      cmd: runtime.cmd,
      exposed: [...runtime.exposed].sort(),
    },
    "USER, WORKDIR, ENTRYPOINT, CMD and EXPOSE are the Dockerfile's runtime stage's",
  );
  const files = new Set(imageFiles(image.tar));
  for (const path of [
    'nodejs/bin/node',
    'app/package.json',
    'app/dist/cli.js',
    'app/node_modules/fastify/package.json',
  ])
    t.ok(files.has(path), `the image holds /${path}`);
  for (const dev of ['typescript', 'tap', 'node', '@biomejs/biome'])
    t.notOk(files.has(`app/node_modules/${dev}/package.json`), `no ${dev}`);
  t.notOk(
    [...files].some((f) => f.startsWith('app/src/')),
    'no TypeScript source: the runtime stage copies only the build',
  );
  t.same(
    [...files].filter((f) => f.startsWith('app/dist/')).sort(),
    execSync('find dist -type f', { cwd: inStage(runtime, '.'), encoding: 'utf8' })
      .trim()
      .split('\n')
      .map((f) => `app/${f}`)
      .sort(),
    "the build output, file for file, is the replayed runtime stage's",
  );
});

/** Every regular file of the image's layers (a docker-archive holds each layer as a tar). */
function imageFiles(tar: string): string[] {
  const manifest = JSON.parse(execSync(`tar -xOf ${tar} manifest.json`, { encoding: 'utf8' })) as {
    Layers: string[];
  }[];
  return manifest[0]!.Layers.flatMap((layer) =>
    execSync(`tar -xOf ${tar} ${layer} | tar -tvf -`, { encoding: 'utf8', maxBuffer: 1 << 26 })
      .split('\n')
      .filter((l) => l.startsWith('-'))
      .map((l) =>
        l
          .split(/\s+/)
          .slice(5)
          .join(' ')
          .replace(/^\.?\//, ''),
      ),
  );
}

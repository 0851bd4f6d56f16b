// No Docker engine here: this runs the Dockerfile's own steps (COPY, RUN, WORKDIR, per stage,
// kit/dockerfile.ts) in clean temporary directories and starts the runtime stage's entrypoint, so
// a broken Dockerfile fails CI. The base images are the one part that cannot run here: the build
// stage's commands run with this machine's npm, and the runtime stage's node is Node 24 from the
// npm package `node`, standing in for distroless's /nodejs/bin/node. The OCI image the real node
// runs (kit/node/image.ts, test/_real-node/node.test.ts) is assembled from the same replay: checked here to
// be the image this Dockerfile describes. The release builds it for two platforms with the build
// stage on the builder's own: what that takes of the Dockerfile is checked here too.
import { execSync, spawn } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t from 'tap';
import { RUNTIME_NODE_FLAGS } from '../../kit/node-flags.ts';
import { freePort } from '../../kit/control-plane.ts';
import { CLEAN_ENV, hostPlatform, inStage, plan, replay } from '../../kit/dockerfile.ts';
import { configOf, watcherImage } from '../../kit/node/image.ts';
import { scrape } from '../../kit/scrape.ts';
import { makeWebhookCerts } from '../../kit/watcher-env.ts';

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

const foreign = hostPlatform() === 'linux/arm64' ? 'linux/amd64' : 'linux/arm64';

t.test('built for another platform: only the runtime stage is of the target, and it runs nothing', async (t) => {
  for (const target of [hostPlatform(), foreign]) {
    const [build, run] = plan({ target });
    t.equal(build?.platform, hostPlatform(), `${target}: the build stage on the build platform`);
    t.same(
      build?.args,
      { TARGETOS: 'linux', TARGETARCH: target.split('/')[1] },
      `${target}: the build stage sees the target it prunes for`,
    );
    t.equal(run?.platform, target, `${target}: the runtime stage is the target's`);
    t.same(
      run?.instructions.filter((i) => i.instruction === 'RUN'),
      [],
      `${target}: no RUN in the runtime stage, so no emulation (QEMU) for a foreign target`,
    );
  }
});

t.test('the replay resolves platforms and ARGs as BuildKit does, and refuses to emulate', async (t) => {
  const dir = mkdtempSync(join(work, 'args-'));
  const stageOne = [
    'ARG BASE=node:24-bookworm-slim',
    // biome-ignore lint/suspicious/noTemplateCurlyInString: the Dockerfile's own syntax
    'FROM --platform=$BUILDPLATFORM ${BASE} AS one',
    'ARG TARGETARCH',
    'ARG GREETING=hello-$TARGETARCH',
    'WORKDIR /out',
    // Undeclared in the stage, BUILDARCH and BASE are not in its environment.
    // biome-ignore lint/suspicious/noTemplateCurlyInString: the shell's own syntax
    'RUN echo "$TARGETARCH $GREETING ${BUILDARCH:-unset} ${BASE:-unset}" > seen',
  ];
  const one = join(dir, 'Dockerfile.one');
  writeFileSync(one, stageOne.join('\n'));
  const both = join(dir, 'Dockerfile.both');
  writeFileSync(both, [...stageOne, 'FROM scratch AS two', 'RUN \\', '  true'].join('\n'));

  const [planned, two] = plan({ dockerfile: both, target: foreign });
  t.equal(planned?.base, 'node:24-bookworm-slim', 'a global ARG in FROM');
  t.equal(planned?.platform, hostPlatform(), 'FROM --platform=$BUILDPLATFORM');
  t.equal(two?.platform, foreign, 'no --platform: the target');
  t.same(two?.instructions, [{ instruction: 'RUN', args: 'true' }], 'a continued line is one instruction');

  const [ran] = replay(join(dir, 'work-one'), { dockerfile: one, target: foreign });
  const arch = foreign.split('/')[1];
  t.equal(
    readFileSync(inStage(ran!, 'seen'), 'utf8'),
    `${arch} hello-${arch} unset unset\n`,
    'a RUN sees the ARGs its stage declared, and only those',
  );
  t.throws(
    () => replay(join(dir, 'work-both'), { dockerfile: both, target: foreign }),
    /stage two: RUN for linux\/\w+ would need emulation/,
  );
});

t.test("the build stage's prune keeps the target's platform packages (npm's x64 is Docker's amd64)", async (t) => {
  const prune = plan()[0]?.instructions.find((i) => i.instruction === 'RUN' && i.args.includes('npm prune'));
  t.ok(prune, 'the build stage prunes');
  const command = prune!.args.replace(/^npm run build && /, '');
  // A package with one optional package per platform; the project has it, so npm's cache does.
  const biome = (
    JSON.parse(readFileSync(join(import.meta.dirname, '..', '..', 'package.json'), 'utf8')) as {
      devDependencies: Record<string, string>;
    }
  ).devDependencies['@biomejs/biome'];
  for (const [arch, expected] of [
    ['amd64', 'cli-linux-x64'],
    ['arm64', 'cli-linux-arm64'],
  ] as const) {
    const dir = join(work, `prune-${arch}`);
    mkdirSync(dir);
    writeFileSync(
      join(dir, 'package.json'),
      JSON.stringify({ name: 'p', version: '1.0.0', dependencies: { '@biomejs/biome': biome } }),
    );
    const npm = (c: string, env: Record<string, string> = {}) =>
      execSync(`${CLEAN_ENV} ${c}`, { cwd: dir, shell: '/bin/bash', stdio: 'pipe', env: { ...process.env, ...env } });
    npm('npm install --prefer-offline --no-audit --no-fund --ignore-scripts');
    npm(command, { TARGETOS: 'linux', TARGETARCH: arch });
    const installed = execSync('ls', { cwd: join(dir, 'node_modules', '@biomejs'), encoding: 'utf8' })
      .trim()
      .split('\n');
    t.same(
      installed.filter((p) => p.startsWith('cli-')),
      [expected],
      `TARGETARCH=${arch}`,
    );
  }
});

t.test(
  'no production dependency has native code or an install script, which would be built for the build platform',
  async (t) => {
    const lock = JSON.parse(readFileSync(join(import.meta.dirname, '..', '..', 'package-lock.json'), 'utf8')) as {
      packages: Record<
        string,
        { dev?: boolean; os?: string[]; cpu?: string[]; hasInstallScript?: boolean; gypfile?: boolean }
      >;
    };
    const production = Object.entries(lock.packages).filter(([path, p]) => path !== '' && !p.dev);
    t.ok(production.length > 10, `${production.length} production packages`);
    t.same(
      production.filter(([, p]) => p.os || p.cpu || p.hasInstallScript || p.gypfile).map(([path]) => path),
      [],
    );
  },
);

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

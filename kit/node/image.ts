// OCI images assembled on this machine (no Docker engine, no registry): the watcher's as the
// Dockerfile describes it (kit/dockerfile.ts carries out its stages) and the sandbox's pause. Each
// is a docker-archive tar that containerd imports; the watcher's is cached by what goes into it.
import { createHash } from 'node:crypto';
import { execFileSync } from 'node:child_process';
import {
  chmodSync,
  copyFileSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  realpathSync,
  renameSync,
  rmSync,
  statSync,
  writeFileSync,
} from 'node:fs';
import { homedir, tmpdir } from 'node:os';
import { dirname, join, relative } from 'node:path';
import { binary } from '../binaries.ts';
import { isAlive } from '../process.ts';
import { instructions, REPO_ROOT, replay, type Stage } from '../dockerfile.ts';

/** What an image runs, as its OCI config says. */
export interface ImageConfig {
  user?: string;
  workdir?: string;
  entrypoint?: string[];
  cmd?: string[];
  exposed?: string[];
}

export interface Image {
  /** The name containerd knows it by. */
  ref: string;
  /** A docker-archive tar for `ctr images import`. */
  tar: string;
  config: ImageConfig;
}

const CACHE = join(
  process.env.VENEER_CACHE_DIR ?? join(process.env.XDG_CACHE_HOME ?? join(homedir(), '.cache'), 'veneer-node-watcher'),
  'images',
);
export const PAUSE_REF = 'kit.local/pause:1';
/** The runtime stage's base: distroless Node 24, stood in for by Node 24 of the npm package `node`. */
const DISTROLESS_NODE = 'gcr.io/distroless/nodejs24-debian12:nonroot';
const NODE_BINARY = join(REPO_ROOT, 'node_modules', 'node', 'bin', 'node');

/** A root file system made into a one-layer image with `config`, written as a docker-archive tar. */
function assemble(rootfs: string, ref: string, config: ImageConfig, tar: string): void {
  const work = mkdtempSync(join(tmpdir(), 'vnw-image-'));
  try {
    const image = `${join(work, 'layout')}:${ref.split(':').pop()}`;
    const umoci = (...args: string[]) => execFileSync('umoci', args, { stdio: 'pipe' });
    umoci('init', '--layout', join(work, 'layout'));
    umoci('new', '--image', image);
    umoci('insert', '--image', image, rootfs, '/');
    umoci(
      'config',
      '--image',
      image,
      '--os',
      'linux',
      '--architecture',
      'amd64',
      ...(config.user ? ['--config.user', config.user] : []),
      ...(config.workdir ? ['--config.workingdir', config.workdir] : []),
      ...(config.entrypoint ?? []).flatMap((a) => ['--config.entrypoint', a]),
      ...(config.cmd ?? []).flatMap((a) => ['--config.cmd', a]),
      ...(config.exposed ?? []).flatMap((p) => ['--config.exposedports', p]),
    );
    mkdirSync(dirname(tar), { recursive: true });
    rmSync(`${tar}.tmp`, { force: true });
    execFileSync('skopeo', ['copy', '--quiet', `oci:${image}`, `docker-archive:${tar}.tmp:${ref}`], { stdio: 'pipe' });
    renameSync(`${tar}.tmp`, tar);
  } finally {
    rmSync(work, { recursive: true, force: true });
  }
}

/** The OCI config of a docker-archive tar, as containerd will read it. */
export function configOf(tar: string): ImageConfig {
  const list = (member: string) => execFileSync('tar', ['-xOf', tar, member], { maxBuffer: 1 << 24 }).toString();
  const manifest = JSON.parse(list('manifest.json')) as { Config: string }[];
  const { config } = JSON.parse(list(manifest[0]!.Config)) as {
    config: { User?: string; WorkingDir?: string; Entrypoint?: string[]; Cmd?: string[]; ExposedPorts?: object };
  };
  return {
    user: config.User,
    workdir: config.WorkingDir,
    entrypoint: config.Entrypoint,
    cmd: config.Cmd,
    exposed: Object.keys(config.ExposedPorts ?? {}).sort(),
  };
}

export function pauseImage(): Image {
  return programImage(
    'pause',
    PAUSE_REF,
    { '/pause': binary('pause') },
    { user: '65535:65535', entrypoint: ['/pause'] },
  );
}

/**
 * Prometheus and prometheus-operator's config reloader, as their own images lay them out (the
 * program in /bin, run as nobody): the operator names them in the Prometheus StatefulSet it makes.
 */
export function prometheusImages(): { prometheus: Image; configReloader: Image } {
  const nobody = '65534:65534';
  return {
    prometheus: programImage(
      'prometheus',
      'kit.local/prometheus',
      { '/bin/prometheus': binary('prometheus') },
      { user: nobody, workdir: '/prometheus', entrypoint: ['/bin/prometheus'], exposed: ['9090/tcp'] },
    ),
    configReloader: programImage(
      'prometheus-config-reloader',
      'kit.local/prometheus-config-reloader',
      { '/bin/prometheus-config-reloader': binary('prometheusConfigReloader') },
      { user: nobody, entrypoint: ['/bin/prometheus-config-reloader'] },
    ),
  };
}

/**
 * A one-layer image of static programs (`files`: path in the image -> program here), cached by
 * their content; `ref` without a tag gets the content's hash as its tag.
 */
function programImage(name: string, ref: string, files: Record<string, string>, config: ImageConfig): Image {
  const key = hashFiles(Object.values(files));
  const tagged = ref.includes(':') ? ref : `${ref}:${key}`;
  const tar = join(CACHE, `${name}-${key}.tar`);
  return whileHolding(join(CACHE, `${name}.lock`), () => {
    if (existsSync(tar)) return { ref: tagged, tar, config };
    const rootfs = mkdtempSync(join(tmpdir(), `vnw-${name}-`));
    try {
      for (const [path, program] of Object.entries(files)) {
        mkdirSync(dirname(join(rootfs, path)), { recursive: true });
        copyFileSync(program, join(rootfs, path));
        chmodSync(join(rootfs, path), 0o755);
      }
      if (config.workdir) mkdirSync(join(rootfs, config.workdir), { recursive: true });
      assemble(rootfs, tagged, config, tar);
      for (const old of readdirSync(CACHE))
        if (new RegExp(`^${name}-[0-9a-f]{12}\\.tar$`).test(old) && old !== `${name}-${key}.tar`)
          rmSync(join(CACHE, old), { force: true });
    } finally {
      rmSync(rootfs, { recursive: true, force: true });
    }
    return { ref: tagged, tar, config };
  });
}

/**
 * The watcher's image, as the Dockerfile describes it: its stages carried out, the runtime stage
 * on the distroless stand-in, its USER, WORKDIR, ENTRYPOINT, CMD and EXPOSE as the config. Built
 * once per content of what the Dockerfile copies from the repository (and Node itself).
 */
export function watcherImage(replayed?: Stage[]): Image {
  const { key, ref, tar } = watcherImageName();
  // Tests running side by side may all want it: one builds, the others wait and take it.
  return whileHolding(join(CACHE, 'watcher.lock'), () => {
    if (existsSync(tar)) return { ref, tar, config: configOf(tar) };
    const work = mkdtempSync(join(tmpdir(), 'vnw-dockerfile-'));
    try {
      // A replay made already (the Dockerfile's test) saves doing it again; its runtime stage gets the stand-in base.
      const stages = replayed ?? replay(work, { onFrom: standIn });
      const runtime = stages.at(-1)!;
      if (replayed) standIn(runtime);
      const config = {
        user: runtime.user,
        workdir: runtime.workdir,
        entrypoint: runtime.entrypoint,
        cmd: runtime.cmd,
        exposed: runtime.exposed,
      };
      assemble(runtime.dir, ref, config, tar);
      for (const old of readdirSync(CACHE))
        if (old.startsWith('watcher-') && old.endsWith('.tar') && old !== `watcher-${key}.tar`)
          rmSync(join(CACHE, old), { force: true });
      return { ref, tar, config };
    } finally {
      rmSync(work, { recursive: true, force: true });
    }
  });
}

/**
 * The watcher's image as watcherImage() left it, for code in a network namespace of its own (the
 * real node's): the Dockerfile's `npm ci` needs the registry, which cannot be reached from there.
 */
export function builtWatcherImage(): Image {
  const { ref, tar } = watcherImageName();
  if (!existsSync(tar))
    throw new Error(`the watcher's image (${ref}) is not built: call watcherImage() before entering the namespace`);
  return { ref, tar, config: configOf(tar) };
}

function watcherImageName(): { key: string; ref: string; tar: string } {
  const key = hashFiles([join(REPO_ROOT, 'Dockerfile'), NODE_BINARY, import.meta.filename, ...contextFiles()]);
  return { key, ref: `kit.local/veneer-node-watcher:${key}`, tar: join(CACHE, `watcher-${key}.tar`) };
}

/** Runs `fn` holding a lock directory (taken over from a holder that died), waiting for it. */
function whileHolding<T>(lock: string, fn: () => T): T {
  mkdirSync(dirname(lock), { recursive: true });
  const pause = new Int32Array(new SharedArrayBuffer(4));
  const deadline = Date.now() + 15 * 60_000;
  for (;;) {
    try {
      mkdirSync(lock);
      break;
    } catch {
      const holder = Number(readFileIfAny(join(lock, 'pid')));
      if (holder > 0 && !isAlive(holder)) rmSync(lock, { recursive: true, force: true });
      else if (Date.now() > deadline) throw new Error(`${lock} is held by pid ${holder} for too long`);
      else Atomics.wait(pause, 0, 0, 250);
    }
  }
  try {
    writeFileSync(join(lock, 'pid'), String(process.pid));
    return fn();
  } finally {
    rmSync(lock, { recursive: true, force: true });
  }
}

function readFileIfAny(path: string): string {
  try {
    return readFileSync(path, 'utf8').trim();
  } catch {
    return '';
  }
}

/** Lays down what a base image would hold; the build stage's base is this machine itself. */
function standIn(stage: Stage): void {
  if (stage.base.startsWith('node:')) return;
  // Pinned by digest in the Dockerfile: the stand-in is for the image, whichever digest.
  if (stage.base.split('@')[0] !== DISTROLESS_NODE) throw new Error(`no stand-in for the base image ${stage.base}`);
  const at = (p: string) => join(stage.dir, p);
  mkdirSync(at('nodejs/bin'), { recursive: true });
  copyFileSync(NODE_BINARY, at('nodejs/bin/node'));
  chmodSync(at('nodejs/bin/node'), 0o755);
  // The shared libraries Node links, at the paths the loader looks for them.
  const ldd = execFileSync('ldd', [NODE_BINARY], { encoding: 'utf8' });
  for (const path of ldd.matchAll(/(\/\S+\.so[.\d]*)/g)) {
    const library = path[1]!;
    mkdirSync(dirname(at(library)), { recursive: true });
    copyFileSync(realpathSync(library), at(library));
  }
  mkdirSync(at('etc'), { recursive: true });
  writeFileSync(
    at('etc/passwd'),
    'root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n',
  );
  writeFileSync(at('etc/group'), 'root:x:0:\nnonroot:x:65532:\n');
  mkdirSync(at('home/nonroot'), { recursive: true });
  mkdirSync(at('tmp'), { recursive: true });
  chmodSync(at('tmp'), 0o1777);
}

/** Every repository file the Dockerfile copies from the build context. */
function contextFiles(): string[] {
  const files: string[] = [];
  const walk = (p: string): void => {
    if (statSync(p).isDirectory()) for (const e of readdirSync(p).sort()) walk(join(p, e));
    else files.push(p);
  };
  for (const { instruction, args } of instructions())
    if (instruction === 'COPY' && !args.includes('--from='))
      for (const src of args.split(/\s+/).slice(0, -1)) walk(join(REPO_ROOT, src));
  return files;
}

function hashFiles(files: string[]): string {
  const hash = createHash('sha256');
  for (const f of files) hash.update(relative(REPO_ROOT, f)).update(readFileSync(f));
  return hash.digest('hex').slice(0, 12);
}

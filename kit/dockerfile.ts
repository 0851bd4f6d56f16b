// The Dockerfile, read and carried out without a Docker engine: each stage's COPY, RUN and WORKDIR
// in a directory of its own, and its USER, ENTRYPOINT, CMD and EXPOSE kept as the image's config.
// The base images are the one part that cannot be pulled here: the build stage's commands run with
// this machine's npm, and the runtime stage's distroless Node is assembled by kit/node/image.ts.
// The Dockerfile users build and the image the real node runs are the same description.
// Platforms as BuildKit has them: this machine is the build platform, the target is this machine
// unless asked otherwise, `FROM --platform=` and the automatic platform ARGs resolve as in a
// `docker buildx build --platform <target>`; a RUN in a stage of another platform than this
// machine's would need emulation, which is refused rather than faked.
import { execSync } from 'node:child_process';
import { cpSync, mkdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';

export const REPO_ROOT = join(import.meta.dirname, '..');

export interface Stage {
  name: string;
  /** The image reference after FROM, its variables expanded. */
  base: string;
  /** os/arch the stage is built for. */
  platform: string;
  /** Where the stage's file system is. */
  dir: string;
  workdir: string;
  /** The ARGs the stage declared, with their values: a RUN sees them as environment variables. */
  args: Record<string, string>;
  user?: string;
  entrypoint?: string[];
  cmd?: string[];
  exposed: string[];
}

export interface Instruction {
  instruction: string;
  args: string;
}

/** The Dockerfile's instructions, comments and blank lines dropped, continued lines joined. */
export function instructions(dockerfile = join(REPO_ROOT, 'Dockerfile')): Instruction[] {
  return readFileSync(dockerfile, 'utf8')
    .split('\n')
    .map((l) => l.trim())
    .filter((l) => l && !l.startsWith('#'))
    .join('\n')
    .replace(/\\\n/g, ' ')
    .split('\n')
    .map((line) => {
      const [instruction = '', ...rest] = line.split(/\s+/);
      return { instruction: instruction.toUpperCase(), args: rest.join(' ') };
    });
}

/** This machine as a Docker platform (Node's x64 is Docker's amd64). */
export function hostPlatform(): string {
  const arch = { x64: 'amd64', ia32: '386', arm: 'arm' }[process.arch as string] ?? process.arch;
  return `linux/${arch}`;
}

/** BuildKit's automatic platform ARGs for a build on `build` for `target`. */
export function platformArgs(build: string, target: string): Record<string, string> {
  const [buildOs = '', buildArch = '', buildVariant = ''] = build.split('/');
  const [targetOs = '', targetArch = '', targetVariant = ''] = target.split('/');
  return {
    BUILDPLATFORM: build,
    BUILDOS: buildOs,
    BUILDARCH: buildArch,
    BUILDVARIANT: buildVariant,
    TARGETPLATFORM: target,
    TARGETOS: targetOs,
    TARGETARCH: targetArch,
    TARGETVARIANT: targetVariant,
  };
}

/** `$NAME` and `${NAME}` (and `${NAME:-default}`) as the Dockerfile expands them outside RUN. */
export function expand(text: string, vars: Record<string, string>): string {
  return text.replace(
    /\$(?:\{(\w+)(?::-([^}]*))?\}|(\w+))/g,
    (_, braced: string | undefined, fallback: string | undefined, bare: string | undefined) => {
      const value = vars[(braced ?? bare)!];
      return value !== undefined && value !== '' ? value : (fallback ?? '');
    },
  );
}

/** `NAME` or `NAME=default`, for each name an ARG declares. */
const declared = (args: string) =>
  args
    .split(/\s+/)
    .filter(Boolean)
    .map((a) => {
      const eq = a.indexOf('=');
      return eq < 0
        ? { name: a, value: undefined }
        : { name: a.slice(0, eq), value: a.slice(eq + 1).replace(/^"(.*)"$/, '$1') };
    });

// As in a container: none of the test runner's loaders, coverage or npm settings. tap
// re-injects its variables into every child it sees spawned, so the shell drops them itself.
export const CLEAN_ENV =
  'for v in $(compgen -e | grep -E "^(npm_|NODE_OPTIONS|NODE_V8_COVERAGE|_TAPJS|TAP)"); do unset "$v"; done; export PATH=/usr/local/bin:/usr/bin:/bin:/usr/local/go/bin;';

/** A path of a stage's file system, relative paths from its WORKDIR. */
export const inStage = (s: Stage, p: string) => join(s.dir, p.startsWith('/') ? p : join(s.workdir, p));

export interface ReplayOptions {
  dockerfile?: string;
  /** The platform to build for, os/arch as `docker buildx build --platform` takes it; this machine's by default. */
  target?: string;
  /** Lays down the stage's base image, before its first instruction. */
  onFrom?: (stage: Stage) => void;
}

/** A stage as read, before anything is carried out: its platform, ARGs and instructions. */
export interface PlannedStage extends Omit<Stage, 'dir' | 'workdir' | 'exposed'> {
  instructions: Instruction[];
}

/** The stages the Dockerfile describes for `target`, each with the ARGs and platform it resolves to. */
export function plan(opts: Omit<ReplayOptions, 'onFrom'> = {}): PlannedStage[] {
  const globals: Record<string, string> = platformArgs(hostPlatform(), opts.target ?? hostPlatform());
  const automatic = new Set(Object.keys(globals));
  const stages: PlannedStage[] = [];
  for (const ins of instructions(opts.dockerfile)) {
    const stage = stages.at(-1);
    if (ins.instruction === 'FROM') {
      const words = ins.args.split(/\s+/);
      const flags = words.filter((w) => w.startsWith('--'));
      const [ref = '', ...rest] = words.filter((w) => !w.startsWith('--'));
      const platform = flags.find((f) => f.startsWith('--platform='))?.slice('--platform='.length);
      stages.push({
        name: /^AS$/i.test(rest[0] ?? '') && rest[1] ? rest[1] : `stage${stages.length}`,
        base: expand(ref, globals),
        platform: platform === undefined ? globals.TARGETPLATFORM! : expand(platform, globals),
        args: {},
        instructions: [],
      });
    } else if (ins.instruction === 'ARG') {
      // Before the first FROM an ARG serves the FROM lines; in a stage it must be declared again,
      // the automatic platform ones included, to be seen there.
      for (const { name, value } of declared(ins.args)) {
        if (!stage) {
          if (!automatic.has(name)) globals[name] = expand(value ?? '', globals);
          continue;
        }
        const inherited = globals[name];
        if (value !== undefined && !automatic.has(name))
          stage.args[name] = expand(value, { ...globals, ...stage.args });
        else if (inherited !== undefined) stage.args[name] = inherited;
      }
    } else if (!stage) throw new Error(`${ins.instruction} before FROM`);
    else stage.instructions.push(ins);
  }
  return stages;
}

/** Carries out every stage in `work` (one directory per stage) and returns them in order. */
export function replay(work: string, opts: ReplayOptions = {}): Stage[] {
  const host = hostPlatform();
  const stages: Stage[] = [];
  for (const planned of plan(opts)) {
    const { instructions: steps, ...rest } = planned;
    const stage: Stage = { ...rest, dir: join(work, planned.name), workdir: '/', exposed: [] };
    stages.push(stage);
    mkdirSync(stage.dir, { recursive: true });
    opts.onFrom?.(stage);
    const vars = (args: string) => expand(args, stage.args);
    for (const { instruction, args } of steps) {
      switch (instruction) {
        case 'WORKDIR':
          stage.workdir = vars(args);
          mkdirSync(inStage(stage, '.'), { recursive: true });
          break;
        case 'COPY': {
          const parts = vars(args)
            .split(/\s+/)
            .filter((p) => !p.startsWith('--'));
          const from = /--from=(\S+)/.exec(args)?.[1];
          const dest = parts.pop()!;
          for (const src of parts) {
            const source = from ? inStage(stages.find((s) => s.name === from)!, src) : join(REPO_ROOT, src);
            const target =
              dest.endsWith('/') || parts.length > 1
                ? join(inStage(stage, dest), src.split('/').pop()!)
                : inStage(stage, dest);
            cpSync(source, target, { recursive: true });
          }
          break;
        }
        case 'RUN':
          if (stage.platform !== host)
            throw new Error(
              `stage ${stage.name}: RUN for ${stage.platform} would need emulation on this ${host} machine (${args})`,
            );
          execSync(`${CLEAN_ENV} ${args}`, {
            cwd: inStage(stage, '.'),
            stdio: 'pipe',
            shell: '/bin/bash',
            timeout: 300_000,
            env: { ...process.env, ...stage.args },
          });
          break;
        case 'USER':
          stage.user = vars(args);
          break;
        case 'ENTRYPOINT':
          stage.entrypoint = JSON.parse(args) as string[];
          break;
        case 'CMD':
          stage.cmd = JSON.parse(args) as string[];
          break;
        case 'EXPOSE':
          stage.exposed.push(
            ...vars(args)
              .split(/\s+/)
              .map((p) => (p.includes('/') ? p : `${p}/tcp`)),
          );
          break;
      }
    }
  }
  return stages;
}

// The Dockerfile, read and carried out without a Docker engine: each stage's COPY, RUN and WORKDIR
// in a directory of its own, and its USER, ENTRYPOINT, CMD and EXPOSE kept as the image's config.
// The base images are the one part that cannot be pulled here: the build stage's commands run with
// this machine's npm, and the runtime stage's distroless Node is assembled by kit/node/image.ts.
// The Dockerfile users build and the image the real node runs are the same description.
import { execSync } from 'node:child_process';
import { cpSync, mkdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';

export const REPO_ROOT = join(import.meta.dirname, '..');

export interface Stage {
  name: string;
  /** The image reference after FROM. */
  base: string;
  /** Where the stage's file system is. */
  dir: string;
  workdir: string;
  user?: string;
  entrypoint?: string[];
  cmd?: string[];
  exposed: string[];
}

export interface Instruction {
  instruction: string;
  args: string;
}

/** The Dockerfile's instructions, comments and blank lines dropped. */
export function instructions(dockerfile = join(REPO_ROOT, 'Dockerfile')): Instruction[] {
  return readFileSync(dockerfile, 'utf8')
    .split('\n')
    .map((l) => l.trim())
    .filter((l) => l && !l.startsWith('#'))
    .map((line) => {
      const [instruction = '', ...rest] = line.split(/\s+/);
      return { instruction: instruction.toUpperCase(), args: rest.join(' ') };
    });
}

// As in a container: none of the test runner's loaders, coverage or npm settings. tap
// re-injects its variables into every child it sees spawned, so the shell drops them itself.
export const CLEAN_ENV =
  'for v in $(compgen -e | grep -E "^(npm_|NODE_OPTIONS|NODE_V8_COVERAGE|_TAPJS|TAP)"); do unset "$v"; done; export PATH=/usr/local/bin:/usr/bin:/bin:/usr/local/go/bin;';

/** A path of a stage's file system, relative paths from its WORKDIR. */
export const inStage = (s: Stage, p: string) => join(s.dir, p.startsWith('/') ? p : join(s.workdir, p));

export interface ReplayOptions {
  dockerfile?: string;
  /** Lays down the stage's base image, before its first instruction. */
  onFrom?: (stage: Stage) => void;
}

/** Carries out every stage in `work` (one directory per stage) and returns them in order. */
export function replay(work: string, opts: ReplayOptions = {}): Stage[] {
  const stages: Stage[] = [];
  for (const { instruction, args } of instructions(opts.dockerfile)) {
    const stage = stages.at(-1);
    if (instruction === 'FROM') {
      const name = /\bAS\s+(\S+)/i.exec(args)?.[1] ?? `stage${stages.length}`;
      const base = args.split(/\s+/)[0] ?? '';
      const stage: Stage = { name, base, dir: join(work, name), workdir: '/', exposed: [] };
      stages.push(stage);
      mkdirSync(stage.dir, { recursive: true });
      opts.onFrom?.(stage);
      continue;
    }
    if (!stage) throw new Error(`${instruction} before FROM`);
    switch (instruction) {
      case 'WORKDIR':
        stage.workdir = args;
        mkdirSync(inStage(stage, '.'), { recursive: true });
        break;
      case 'COPY': {
        const parts = args.split(/\s+/).filter((p) => !p.startsWith('--'));
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
        execSync(`${CLEAN_ENV} ${args}`, {
          cwd: inStage(stage, '.'),
          stdio: 'pipe',
          shell: '/bin/bash',
          timeout: 300_000,
        });
        break;
      case 'USER':
        stage.user = args;
        break;
      case 'ENTRYPOINT':
        stage.entrypoint = JSON.parse(args) as string[];
        break;
      case 'CMD':
        stage.cmd = JSON.parse(args) as string[];
        break;
      case 'EXPOSE':
        stage.exposed.push(...args.split(/\s+/).map((p) => (p.includes('/') ? p : `${p}/tcp`)));
        break;
    }
  }
  return stages;
}

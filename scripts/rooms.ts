// `node scripts/rooms.ts [ROOT]`: the rooms of src/ and what each may import, checked on every
// file of ROOT/src (ROOT defaults to this repository). Prints one line per violation,
// `file -> import: rule`, and exits 1; or one OK line and exits 0. Part of `npm run lint`.
//
// Imports are read by a small tokenizer (scripts/imports-of.ts; comments, strings, template literals and regular
// expressions are skipped properly), not by TypeScript: static, type-only, re-exports, side-effect
// and `import('...')` (in code or in types) all count. Relative imports are resolved to files, so a
// rule never depends on how many `../` a specifier has.
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { isBuiltin } from 'node:module';
import { dirname, join, relative, resolve, sep } from 'node:path';
import { importsOf } from './imports-of.ts';

/**
 * The rooms of src/. `holds`: the room's files (a name ending in `/` is a folder of src/, with
 * everything under it). `door`: the only files of the room that other rooms may import (empty: any
 * file). The engine's second door is its provider key tables, plain data: the configuration's
 * schema lists the providers from them without loading the engine (the CLI's --help starts in
 * about 40 ms instead of 64). `may`: the rooms it may import besides its own, `npm` for any npm package; `node:`
 * built-ins are open to every room. This table is the single source: docs/development.md quotes it.
 */
// biome-ignore format: a table, one room a line
export const ROOMS: readonly Room[] = [
  { room: 'engine',      holds: 'engine/',                  door: 'index.ts providers.ts', may: '' },
  { room: 'kube',        holds: 'kube/',                    door: '',         may: 'npm' },
  { room: 'config',      holds: 'config/',                  door: '',         may: 'engine npm' },
  { room: 'loose',       holds: 'cli.ts log.ts metrics.ts', door: '',         may: 'commands config engine npm' },
  { room: 'prices',      holds: 'prices/',                  door: '',         may: 'loose engine config npm' },
  { room: 'state',       holds: 'state/',                   door: '',         may: 'engine kube npm' },
  { room: 'server',      holds: 'server/',                  door: '',         may: 'loose kube config npm' },
  { room: 'admission',   holds: 'admission/',               door: '',         may: 'loose engine server config npm' },
  { room: 'controllers', holds: 'controllers/',             door: '',         may: 'loose engine kube state npm' },
  { room: 'commands',    holds: 'commands/',                door: '',         may: 'loose engine kube config prices state server admission controllers npm' },
];

/**
 * Folders inside a room that another folder of the same room must not import: the boundaries a
 * room keeps inside. The engine's launch replay (`effect/`) knows nothing of Karpenter's disruption
 * (`disruption/`), which builds on it.
 */
// biome-ignore format: a table, one boundary a line
export const INNER: readonly Inner[] = [
  { from: 'engine/effect/', never: 'engine/disruption/' },
];

/**
 * Rooms whose folders, each taken as one, and loose files must import each other without a cycle:
 * a file of the room that a folder imports never imports back into that folder.
 */
export const FOLDER_CYCLES_IN = ['engine/'];

/** At most this many .ts files directly in src/. */
export const MAX_LOOSE_FILES = 4;
/** At most this many lines in one .ts file of src/. */
export const MAX_LINES = 350;
/** npm packages that at most one file of src/ may import: the one adapter around each. */
export const ONE_ADAPTER = ['@kubernetes/client-node'];

export interface Room {
  room: string;
  holds: string;
  door: string;
  may: string;
}

export interface Inner {
  from: string;
  never: string;
}

export interface Report {
  /** `file -> import: rule` or `file: rule`, sorted by file. */
  violations: string[];
  /** The .ts files of src/ read. */
  files: number;
  rooms: number;
}

function packageOf(specifier: string): string {
  const parts = specifier.split('/');
  return specifier.startsWith('@') ? parts.slice(0, 2).join('/') : parts[0]!;
}

/** Where a relative specifier points: the file, or undefined if none is there. */
function resolveRelative(from: string, specifier: string): string | undefined {
  const target = resolve(dirname(from), specifier);
  const candidates = [target, target.replace(/\.js$/, '.ts'), `${target}.ts`, join(target, 'index.ts')];
  return candidates.find((c) => existsSync(c) && statSync(c).isFile());
}

function filesUnder(dir: string): string[] {
  const out: string[] = [];
  for (const e of readdirSync(dir, { withFileTypes: true })) {
    const p = join(dir, e.name);
    if (e.isDirectory()) out.push(...filesUnder(p));
    else if (e.isFile()) out.push(p);
  }
  return out.sort();
}

/** Checks ROOT/src against ROOMS. */
export function checkRooms(root: string, rooms: readonly Room[] = ROOMS, inner: readonly Inner[] = INNER): Report {
  const src = join(root, 'src');
  const all = filesUnder(src);
  const tsFiles = all.filter((f) => f.endsWith('.ts') && !f.endsWith('.d.ts'));
  const name = (f: string): string => relative(root, f).split(sep).join('/');
  const inSrc = (f: string): string => relative(src, f).split(sep).join('/');
  const roomOf = (f: string): Room | undefined => {
    const p = inSrc(f);
    return rooms.find((r) => r.holds.split(' ').some((h) => (h.endsWith('/') ? p.startsWith(h) : p === h)));
  };
  const violations: string[] = [];
  const edges = new Map<string, string[]>();
  const adapters = new Map<string, string[]>(ONE_ADAPTER.map((p) => [p, []]));

  for (const file of tsFiles) {
    const source = readFileSync(file, 'utf8');
    const lines = source.split('\n').length - (source.endsWith('\n') ? 1 : 0);
    if (lines > MAX_LINES) violations.push(`${name(file)}: ${lines} lines, over ${MAX_LINES}`);
    const room = roomOf(file);
    if (!room) violations.push(`${name(file)}: in no room (the rooms are in scripts/rooms.ts)`);
    const may = new Set(room?.may.split(' ').filter(Boolean));
    const out: string[] = [];
    for (const specifier of new Set(importsOf(source))) {
      if (specifier.startsWith('.') || specifier.startsWith('/')) {
        const target = resolveRelative(file, specifier);
        if (!target) {
          violations.push(`${name(file)} -> ${specifier}: resolves to no file`);
          continue;
        }
        const shown = `${name(file)} -> ${name(target)}`;
        if (relative(src, target).startsWith('..')) {
          violations.push(`${shown}: src/ imports nothing outside src/`);
          continue;
        }
        if (target.endsWith('.ts')) out.push(target);
        const to = roomOf(target);
        for (const boundary of inner)
          if (inSrc(file).startsWith(boundary.from) && inSrc(target).startsWith(boundary.never))
            violations.push(`${shown}: ${boundary.from} never imports ${boundary.never}`);
        if (!room || !to || to === room) continue;
        if (!may.has(to.room)) violations.push(`${shown}: ${room.room} may import ${mayText(room)}`);
        else if (to.door && !to.door.split(' ').some((door) => inSrc(target) === to.holds + door)) {
          const doors = to.door.split(' ').map((door) => `src/${to.holds}${door}`);
          violations.push(`${shown}: ${to.room} is entered only by ${doors.join(' or ')}`);
        }
      } else if (specifier.startsWith('node:') || isBuiltin(specifier)) {
        // open to every room
      } else {
        adapters.get(packageOf(specifier))?.push(name(file));
        if (room && !may.has('npm')) {
          violations.push(`${name(file)} -> ${specifier}: ${room.room} may import ${mayText(room)}`);
        }
      }
    }
    edges.set(file, out);
  }

  const loose = tsFiles.filter((f) => dirname(f) === src);
  if (loose.length > MAX_LOOSE_FILES) {
    violations.push(
      `src: ${loose.length} loose .ts files (${loose.map(inSrc).join(', ')}), at most ${MAX_LOOSE_FILES}`,
    );
  }
  for (const [pkg, importers] of adapters) {
    if (importers.length <= 1) continue;
    for (const f of importers) {
      violations.push(`${f} -> ${pkg}: imported by ${importers.length} files of src/, at most one`);
    }
  }
  for (const prefix of FOLDER_CYCLES_IN) {
    for (const cycle of cycles(folderEdges(edges, (f) => inSrc(f), prefix))) {
      violations.push(
        `src/${cycle[0]}: import cycle between the folders and files of src/${prefix}: ${cycle.join(', ')}`,
      );
    }
  }
  for (const cycle of cycles(edges)) {
    const path = shortestCycle(cycle, edges);
    const also = cycle.length > path.length - 1 ? ` (one of ${cycle.length} files importing each other)` : '';
    violations.push(`${name(path[0]!)} -> ${name(path[1]!)}: import cycle ${path.map(name).join(' -> ')}${also}`);
  }
  return { violations: violations.sort(), files: tsFiles.length, rooms: rooms.length };
}

/**
 * The imports between the folders and the loose files under `prefix` (paths relative to src/): a
 * folder is one node (`engine/effect/`), a loose file its own (`engine/node.ts`); imports within a
 * folder, and to or from outside `prefix`, are left out.
 */
function folderEdges(
  edges: ReadonlyMap<string, readonly string[]>,
  inSrc: (file: string) => string,
  prefix: string,
): Map<string, string[]> {
  const nodeOf = (file: string): string | undefined => {
    const p = inSrc(file);
    if (!p.startsWith(prefix)) return undefined;
    const rest = p.slice(prefix.length);
    const slash = rest.indexOf('/');
    return slash < 0 ? p : `${prefix}${rest.slice(0, slash + 1)}`;
  };
  const out = new Map<string, string[]>();
  for (const [file, targets] of edges) {
    const from = nodeOf(file);
    if (from === undefined) continue;
    const list = out.get(from) ?? [];
    for (const target of targets) {
      const to = nodeOf(target);
      if (to !== undefined && to !== from && !list.includes(to)) list.push(to);
    }
    out.set(from, list);
  }
  return out;
}

function mayText(room: Room): string {
  const may = room.may.split(' ').filter(Boolean);
  return `only ${[room.room, ...may].join(', ')} and node:`;
}

/**
 * The strongly connected components of more than one file, or of one file importing itself
 * (Tarjan's algorithm, iterative so that no chain of imports is too long for the stack).
 */
export function cycles(edges: ReadonlyMap<string, readonly string[]>): string[][] {
  const index = new Map<string, number>();
  const low = new Map<string, number>();
  const stack: string[] = [];
  const onStack = new Set<string>();
  const found: string[][] = [];
  let next = 0;
  for (const start of edges.keys()) {
    if (index.has(start)) continue;
    // Each frame: a file and how many of its imports have been visited.
    const frames: [string, number][] = [[start, 0]];
    index.set(start, next);
    low.set(start, next++);
    stack.push(start);
    onStack.add(start);
    while (frames.length > 0) {
      const frame = frames.at(-1)!;
      const [v, k] = frame;
      const targets = edges.get(v) ?? [];
      if (k < targets.length) {
        frame[1]++;
        const w = targets[k]!;
        if (!index.has(w)) {
          index.set(w, next);
          low.set(w, next++);
          stack.push(w);
          onStack.add(w);
          frames.push([w, 0]);
        } else if (onStack.has(w)) {
          low.set(v, Math.min(low.get(v)!, index.get(w)!));
        }
        continue;
      }
      frames.pop();
      const parent = frames.at(-1);
      if (parent) low.set(parent[0], Math.min(low.get(parent[0])!, low.get(v)!));
      if (low.get(v) !== index.get(v)) continue;
      const component: string[] = [];
      let w: string;
      do {
        w = stack.pop()!;
        onStack.delete(w);
        component.push(w);
      } while (w !== v);
      if (component.length > 1 || targets.includes(v)) found.push(component.sort());
    }
  }
  return found;
}

/** The shortest cycle through the first file of a component: [a, b, ..., a]. */
function shortestCycle(component: readonly string[], edges: ReadonlyMap<string, readonly string[]>): string[] {
  const inside = new Set(component);
  const first = component[0]!;
  const cameFrom = new Map<string, string>();
  const queue = [first];
  for (let q = 0; q < queue.length; q++) {
    const v = queue[q]!;
    for (const w of edges.get(v) ?? []) {
      if (!inside.has(w)) continue;
      if (w === first) {
        const path = [v];
        while (path[0] !== first) path.unshift(cameFrom.get(path[0]!)!);
        return [...path, first];
      }
      if (!cameFrom.has(w)) {
        cameFrom.set(w, v);
        queue.push(w);
      }
    }
  }
  return [first, first];
}

if (import.meta.main) {
  const root = resolve(process.argv[2] ?? process.env.ROOMS_ROOT ?? join(import.meta.dirname, '..'));
  const report = checkRooms(root);
  for (const v of report.violations) console.log(v);
  if (report.violations.length > 0) {
    console.log(`rooms: ${report.violations.length} violations in ${report.files} files of src/`);
    process.exit(1);
  }
  console.log(`rooms: OK, ${report.files} files of src/ in ${report.rooms} rooms`);
}

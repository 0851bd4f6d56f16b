// What the real node does to the machine beyond its own directory, and how it is undone: the node's
// interface and the DNAT that stands in for kube-proxy (both die with the test's network
// namespace), and the host paths, pod network namespaces, mounts and cgroups that the kubelet and
// containerd make at fixed places. One node at a time per machine: they would share those paths.
import { execFileSync } from 'node:child_process';
import {
  existsSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  realpathSync,
  rmdirSync,
  rmSync,
  writeFileSync,
} from 'node:fs';
import { join } from 'node:path';
import { isAlive, sleep } from '../process.ts';

const LOCK = '/run/lock/veneer-real-node';
/** The directory name every kit node's own directory is under (in the system's temporary directory). */
export const NODE_ROOT_NAME = 'veneer-real-node';
/** Made by the kubelet or containerd wherever their directories are configured. */
const FIXED_PATHS = ['/var/lib/kubelet', '/var/log/containers', '/var/log/pods', '/run/containerd', '/var/lib/cni'];
const CGROUP_ROOT = '/sys/fs/cgroup';

const run = (cmd: string, ...args: string[]) => execFileSync(cmd, args, { stdio: 'pipe', encoding: 'utf8' });

/**
 * Waits for the machine's one real node to be free. A holder that died (SIGKILL leaves pods
 * running: containerd's shims outlive it) is swept first. A kubelet that is not the kit's makes
 * the fixed paths someone else's: refused.
 */
export async function lockNode(timeoutMs = 30 * 60_000): Promise<() => void> {
  const foreign = run('ps', '-eo', 'pid=,comm=')
    .split('\n')
    .filter((l) => /\skubelet$/.test(l));
  if (foreign.length > 0 && !existsSync(LOCK))
    throw new Error(
      `a kubelet already runs on this machine (pid ${foreign[0]!.trim()}): the kit's node would share its paths`,
    );
  mkdirSync('/run/lock', { recursive: true });
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    try {
      mkdirSync(LOCK);
      writeFileSync(join(LOCK, 'pid'), String(process.pid));
      return () => rmSync(LOCK, { recursive: true, force: true });
    } catch {
      const holder = Number(readFileSync(join(LOCK, 'pid'), 'utf8').trim() || 0);
      if (holder && !isAlive(holder)) {
        sweep(NOTHING_BEFORE);
        rmSync(LOCK, { recursive: true, force: true });
        continue;
      }
      if (Date.now() > deadline) throw new Error(`the real node is held by pid ${holder} for too long`);
      await sleep(1000);
    }
  }
}

/** What existed before the node, so that teardown removes only what it made. */
export class HostState {
  readonly paths: string[] = FIXED_PATHS.filter((p) => existsSync(p));
  readonly netns = new Set<string>(existsSync('/run/netns') ? readdirSync('/run/netns') : []);
}

const NOTHING_BEFORE: HostState = { paths: [], netns: new Set() };

/**
 * The node's address on an interface of the test's network namespace (a veth pair kept inside it:
 * there is no dummy device here), and the DNAT by which pods reach the apiserver at the
 * `kubernetes` Service's ClusterIP, as kube-proxy would.
 */
export function setUpNetwork(address: string, apiserverPort: number, clusterIP = '10.0.0.1', address6?: string): void {
  run('ip', 'link', 'add', 'nodeif0', 'type', 'veth', 'peer', 'name', 'nodeif1');
  run('ip', 'link', 'set', 'nodeif0', 'up');
  run('ip', 'link', 'set', 'nodeif1', 'up');
  run('ip', 'addr', 'add', `${address}/24`, 'dev', 'nodeif0');
  // nodad: usable at once (the kubelet checks its --node-ip is a local address), not after DAD.
  if (address6) run('ip', '-6', 'addr', 'add', `${address6}/64`, 'dev', 'nodeif0', 'nodad');
  // A default route is how the kubelet finds its interface; nothing answers at the gateway.
  run('ip', 'route', 'add', 'default', 'via', address.replace(/\.\d+$/, '.254'), 'dev', 'nodeif0');
  for (const chain of ['PREROUTING', 'OUTPUT'])
    run(
      'iptables',
      '-t',
      'nat',
      '-A',
      chain,
      '-d',
      `${clusterIP}/32`,
      '-p',
      'tcp',
      '--dport',
      '443',
      '-j',
      'DNAT',
      '--to-destination',
      `${address}:${apiserverPort}`,
    );
}

/** Mounts under `dir` (overlay roots, Secret volumes), deepest first. */
export function unmountUnder(dir: string): void {
  const mounts = readFileSync('/proc/self/mountinfo', 'utf8')
    .split('\n')
    .map((l) => l.split(' ')[4] ?? '')
    .filter((m) => m === dir || m.startsWith(`${dir}/`))
    .sort((a, b) => b.length - a.length);
  for (const m of mounts) {
    try {
      run('umount', '-l', m);
    } catch {
      // Gone with its parent already.
    }
  }
}

/**
 * Undoes what the node made outside its directory: processes left in its pods' cgroups, pod network
 * namespaces, kubepods cgroups, host paths.
 */
export function sweep(before: HostState): void {
  const hierarchies = new Set(
    readdirSync(CGROUP_ROOT)
      .map((h) => realpathSync(join(CGROUP_ROOT, h)))
      .filter((h) => existsSync(join(h, 'kubepods'))),
  );
  for (const h of hierarchies) killIn(join(h, 'kubepods'));
  // containerd's shims outlive it (they are reparented); the kit's are known by its directory.
  try {
    run('pkill', '-KILL', '-f', `^\\S*containerd-shim\\S* .*${NODE_ROOT_NAME}`);
  } catch {
    // None left.
  }
  if (existsSync('/run/netns'))
    for (const ns of readdirSync('/run/netns'))
      if (ns.startsWith('cni-') && !before.netns.has(ns)) {
        try {
          run('umount', join('/run/netns', ns));
        } catch {
          // Not mounted any more.
        }
        rmSync(join('/run/netns', ns), { force: true });
      }
  for (const h of hierarchies) removeCgroup(join(h, 'kubepods'));
  for (const p of FIXED_PATHS) if (!before.paths.includes(p)) rmSync(p, { recursive: true, force: true });
}

function killIn(cgroup: string): void {
  for (const entry of readdirSync(cgroup, { withFileTypes: true }))
    if (entry.isDirectory()) killIn(join(cgroup, entry.name));
  for (const pid of readFileSync(join(cgroup, 'cgroup.procs'), 'utf8').split('\n').filter(Boolean))
    try {
      process.kill(Number(pid), 'SIGKILL');
    } catch {
      // Gone already.
    }
}

function removeCgroup(dir: string): void {
  for (const entry of readdirSync(dir, { withFileTypes: true }))
    if (entry.isDirectory()) removeCgroup(join(dir, entry.name));
  try {
    rmdirSync(dir);
  } catch {
    // A cgroup with a process left in it; the next node's sweep tries again.
  }
}

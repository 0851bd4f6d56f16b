// Runs a script inside a network namespace of its own, where a pod-like address can be used: the
// apiserver routes a webhook's Service to its EndpointSlice, and an EndpointSlice may not point at
// 127.0.0.0/8. Inside there is only loopback, holding 127.0.0.1 and POD_IP; nothing sent there can
// leave the namespace, and nothing else on the machine can reach in. Everything that speaks an AWS
// API (moto, Karpenter's AWS provider, the SDK) runs in one too (aws/netns.ts checks it does): the
// tests (test/aws, test/install), the demo's --aws mode (scripts/demo-aws.ts) and the aws bench
// suite (bench/aws.ts) re-run their bodies through runInOwnNetworkNamespace.
import { spawn, spawnSync } from 'node:child_process';

export const POD_IP = '10.244.0.10';

// Loopback is down in a new namespace; `ip` brings it up and gives it the pod address.
const SETUP = `ip link set lo up && ip addr add ${POD_IP}/32 dev lo && exec "$@"`;

function unshareArgs(): string[] {
  // As root a network namespace needs nothing else; otherwise a user namespace grants the right.
  return ['--net', ...(process.getuid?.() === 0 ? [] : ['--map-root-user'])];
}

/** Why the kernel refuses this process a network namespace, or undefined if it grants one. */
export function networkNamespaceRefusal(): string | undefined {
  const probe = spawnSync('unshare', [...unshareArgs(), '--', 'true'], { encoding: 'utf8' });
  if (probe.status === 0) return undefined;
  return `unshare ${unshareArgs().join(' ')}: ${(probe.error?.message ?? probe.stderr).trim()}`;
}

export interface NamespaceRunOptions {
  /** Arguments after the script. */
  args?: string[];
  /** Added to this process's environment. */
  env?: NodeJS.ProcessEnv;
  /**
   * When the kernel refuses a network namespace: `skip` (tests; the default) prints a TAP plan
   * that skips and resolves 0; `throw` (the demo, the bench) rejects with the reason.
   */
  ifRefused?: 'skip' | 'throw';
}

/**
 * Runs `script` with this Node (and its flags, so tap's coverage follows) in a new network
 * namespace; its output is this process's. Resolves with its exit code.
 */
export async function runInOwnNetworkNamespace(script: string, opts: NamespaceRunOptions = {}): Promise<number> {
  const refused = networkNamespaceRefusal();
  if (refused !== undefined) {
    if (opts.ifRefused === 'throw')
      throw new Error(
        `the kernel refused a network namespace (${refused}); this needs root or unprivileged user namespaces`,
      );
    // Only the kernel's refusal skips; any other failure below fails the test.
    console.log(
      `1..0 # SKIP the kernel refused a network namespace (${refused}); this test needs root or unprivileged user namespaces`,
    );
    console.error(`SKIPPED ${script}: no network namespace (${refused})`);
    return 0;
  }
  // setpriv: the script (the same process through unshare's and sh's exec) dies with this one.
  const child = spawn(
    'setpriv',
    [
      '--pdeathsig',
      'KILL',
      '--',
      'unshare',
      ...unshareArgs(),
      '--',
      'sh',
      '-c',
      SETUP,
      'sh',
      process.execPath,
      ...process.execArgv,
      script,
      ...(opts.args ?? []),
    ],
    {
      stdio: 'inherit',
      env: { ...process.env, ...opts.env, VENEER_POD_IP: POD_IP },
    },
  );
  // tap stops a test that runs too long with SIGTERM, a user the demo with Ctrl-C: pass either on,
  // so the script cleans up, and wait for it (the script may see a Ctrl-C twice: it reaches the
  // whole process group as well).
  const forward = (signal: NodeJS.Signals) => void child.kill(signal);
  process.on('SIGTERM', forward);
  process.on('SIGINT', forward);
  const code = await new Promise<number>((resolve) =>
    child.once('exit', (c, signal) => resolve(c ?? (signal ? 128 : 1))),
  );
  process.off('SIGTERM', forward);
  process.off('SIGINT', forward);
  return code;
}

/** Throws unless this process runs inside the namespace made by runInOwnNetworkNamespace. */
export function assertInOwnNetworkNamespace(): void {
  if (process.env.VENEER_POD_IP !== POD_IP)
    throw new Error('run this script through runInOwnNetworkNamespace: it binds the pod address');
}

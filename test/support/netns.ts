// Runs a test script inside a network namespace of its own, where a pod-like address can be
// used: the apiserver routes a webhook's Service to its EndpointSlice, and an EndpointSlice may
// not point at 127.0.0.0/8. Inside there is only loopback, holding 127.0.0.1 and POD_IP;
// nothing sent there can leave the namespace, and nothing else on the machine can reach in.
import { spawn, spawnSync } from 'node:child_process';

export const POD_IP = '10.244.0.10';

// Loopback is down in a new namespace; `ip` brings it up and gives it the pod address.
const SETUP = `ip link set lo up && ip addr add ${POD_IP}/32 dev lo && exec "$@"`;

function unshareArgs(): string[] {
  // As root a network namespace needs nothing else; otherwise a user namespace grants the right.
  return ['--net', ...(process.getuid?.() === 0 ? [] : ['--map-root-user'])];
}

/**
 * Runs `script` with this Node (and its flags, so tap's coverage follows) in a new network
 * namespace; its TAP output is this process's. Resolves with its exit code.
 */
export async function runInOwnNetworkNamespace(script: string): Promise<number> {
  const probe = spawnSync('unshare', [...unshareArgs(), '--', 'true'], { encoding: 'utf8' });
  if (probe.status !== 0) {
    const why = (probe.error?.message ?? probe.stderr).trim();
    // Only the kernel's refusal skips; any other failure below fails the test.
    console.log(`1..0 # SKIP the kernel refused a network namespace (unshare ${unshareArgs().join(' ')}: ${why}); this test needs root or unprivileged user namespaces`);
    console.error(`SKIPPED ${script}: no network namespace (${why})`);
    return 0;
  }
  // setpriv: the script (the same process through unshare's and sh's exec) dies with this one.
  const child = spawn('setpriv', ['--pdeathsig', 'KILL', '--', 'unshare', ...unshareArgs(), '--', 'sh', '-c', SETUP, 'sh', process.execPath, ...process.execArgv, script], {
    stdio: 'inherit',
    env: { ...process.env, VENEER_POD_IP: POD_IP },
  });
  // tap stops a test that runs too long with SIGTERM: pass it on, so the script cleans up.
  const forward = () => void child.kill('SIGTERM');
  process.once('SIGTERM', forward);
  const code = await new Promise<number>((resolve) => child.once('exit', (c, signal) => resolve(c ?? (signal ? 128 : 1))));
  process.off('SIGTERM', forward);
  return code;
}

/** Throws unless this process runs inside the namespace made by runInOwnNetworkNamespace. */
export function assertInOwnNetworkNamespace(): void {
  if (process.env.VENEER_POD_IP !== POD_IP) throw new Error('run this script through runInOwnNetworkNamespace: it binds the pod address');
}

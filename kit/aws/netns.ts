// The network rule for everything that speaks an AWS API (moto, Karpenter's AWS provider, the AWS
// SDK): it runs in a network namespace that has only loopback, so that neither AWS nor the instance
// metadata service can be reached, by construction rather than by configuration.
import { readFileSync } from 'node:fs';

/**
 * The interfaces of this process's network namespace. Not /sys/class/net: sysfs shows the
 * namespace it was mounted in, so after a bare `unshare --net` it still lists the host's.
 */
export function networkInterfaces(): string[] {
  // Two header lines, then one `name: counters...` line per interface.
  return readFileSync('/proc/self/net/dev', 'utf8')
    .split('\n')
    .slice(2)
    .map((line) => line.split(':')[0]?.trim() ?? '')
    .filter((name) => name !== '');
}

/** Throws unless this process's network namespace has no interface but `lo`. */
export function assertLoopbackOnly(): void {
  const names = networkInterfaces();
  if (names.length !== 1 || names[0] !== 'lo') {
    throw new Error(
      `refusing to speak an AWS API: this network namespace has interfaces ${names.join(', ')}; run inside one with only loopback (unshare --net, then ip link set lo up)`,
    );
  }
}

// The rules that span settings, checked once each setting is valid on its own.
import { formatDuration, parseDuration } from './duration.ts';
import type { SettingPath } from './schema.ts';

/** A setting's value once validated (given or default) and where it came from, for cross-field rules. */
export type Effective = (p: SettingPath) => { value: unknown; from: string };

/** client-go's rule: leaseDuration > renewDeadline > retryPeriod, or two leaders can overlap. */
export function leaderElectionProblems(get: Effective): string[] {
  const ms = (p: SettingPath) => {
    const { value, from } = get(p);
    return { ms: parseDuration(String(value)) ?? 0, from };
  };
  const lease = ms('leaderElection.leaseDuration');
  const renew = ms('leaderElection.renewDeadline');
  const retry = ms('leaderElection.retryPeriod');
  const out: string[] = [];
  if (lease.ms <= renew.ms)
    out.push(
      `nodeWatcher.leaderElection.leaseDuration (${formatDuration(lease.ms)}, from ${lease.from}) must be longer than renewDeadline (${formatDuration(renew.ms)}, from ${renew.from})`,
    );
  if (renew.ms <= retry.ms)
    out.push(
      `nodeWatcher.leaderElection.renewDeadline (${formatDuration(renew.ms)}, from ${renew.from}) must be longer than retryPeriod (${formatDuration(retry.ms)}, from ${retry.from})`,
    );
  return out;
}

/** Two listeners on one port: the second would fail to bind, later and less clearly. */
export function portProblems(get: Effective): string[] {
  const ports = (['webhook.port', 'metrics.port', 'health.port'] as const).map((path) => ({ path, ...get(path) }));
  const out: string[] = [];
  for (const [i, a] of ports.entries()) {
    for (const b of ports.slice(i + 1)) {
      if (a.value === b.value)
        out.push(
          `nodeWatcher.${a.path} (${a.value}, from ${a.from}) and nodeWatcher.${b.path} (${b.value}, from ${b.from}) must differ`,
        );
    }
  }
  return out;
}

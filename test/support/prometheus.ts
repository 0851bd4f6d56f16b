// promtool, built from the Go module proxy by scripts/control-plane.sh, and the series a
// Prometheus would have stored from scrapes of the watcher's /metrics.
import { spawnSync } from 'node:child_process';
import { binary } from '../../kit/control-plane.ts';

export const promtool = (args: string[], input?: string) =>
  spawnSync(binary('promtool'), args, { encoding: 'utf8', ...(input === undefined ? {} : { input }) });

export interface Scrape {
  minute: number;
  /** A text exposition, as served on /metrics. */
  text: string;
}

/**
 * The input series of a `promtool test rules` file for `metric`, one sample a minute from
 * minute 0 to the last scrape: each series missing ('_') until its first scrape, then holding
 * its last scraped value. Scrapes taken only where the counters changed (after each phase of a
 * test) thus give what a Prometheus scraping every minute would have stored.
 */
export function inputSeries(scrapes: Scrape[], metric: string): { series: string; values: string }[] {
  const sorted = [...scrapes].sort((a, b) => a.minute - b.minute);
  const samples = sorted.map(
    (s) =>
      new Map(
        s.text
          .split('\n')
          .filter((l) => l.startsWith(`${metric}{`))
          .map((l) => {
            const cut = l.lastIndexOf(' ');
            return [l.slice(0, cut), l.slice(cut + 1)] as const;
          }),
      ),
  );
  const names = [...new Set(samples.flatMap((m) => [...m.keys()]))].sort();
  const last = sorted.at(-1)?.minute ?? 0;
  return names.map((series) => {
    const values: string[] = [];
    for (let minute = 0, i = -1; minute <= last; minute++) {
      while (i + 1 < sorted.length && sorted[i + 1]!.minute <= minute) i++;
      values.push((i >= 0 ? samples[i]!.get(series) : undefined) ?? '_');
    }
    return { series, values: values.join(' ') };
  });
}

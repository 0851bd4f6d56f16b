// The one bound of every metric whose label values come from the cluster's data (overlay names,
// the capacity types and instance families Veneer labels its overlays with): at most `max`
// series each (metrics.maxOverlaySeries), the ones that matter most named, the rest summed under
// `other`. A scrape stays bounded whatever is in the cluster.
import type { Counter, LabelValues } from 'prom-client';

export const OTHER = 'other';

type Series<L extends string> = Record<L, string> & { value: number };

/** A stable order of label sets: the same cluster gives the same series. */
const byLabels = <L extends string>(names: readonly L[]) => {
  return (a: Record<L, string>, b: Record<L, string>) => {
    for (const n of names) if (a[n] !== b[n]) return a[n] < b[n] ? -1 : 1;
    return 0;
  };
};

/**
 * Gauges, computed whole at each scrape: at most `max` series, the biggest kept, the rest summed
 * into one whose `folded` labels are all `other`.
 */
export function foldSeries<L extends string, S extends Series<L>>(all: S[], max: number, folded: readonly L[]): S[] {
  if (all.length <= max) return all;
  const order = byLabels(folded);
  all.sort((a, b) => b.value - a.value || order(a, b));
  const kept = all.slice(0, max - 1);
  const sum = all.slice(max - 1).reduce((n, s) => n + s.value, 0);
  const other = Object.fromEntries(folded.map((n) => [n, OTHER])) as Record<L, string>;
  return [...kept, { ...other, value: sum } as S];
}

/**
 * A counter whose series are named by how much they counted, not by which came first. Counts are
 * held until the scrape; then the label sets with the most counted since the process started keep
 * their labels (at most max - 1), and what the others counted goes to the series whose `folded`
 * labels are `other` (the rest of the labels, a fixed set such as the writing path, are kept). A
 * series that drops out of the named ones is removed, never moved into `other`; one that comes
 * back resumes at the value it ended at, so that Prometheus, which joins a series' samples across
 * a gap, sees only what it counted since: no count is ever seen twice, or lost.
 */
export class RankedCounter<L extends string> {
  private readonly counter: Counter<L>;
  private readonly max: number;
  private readonly folded: readonly L[];
  /** Per label set: counted since the start, held until the scrape, and its named series' value. */
  private readonly entries = new Map<
    string,
    { labels: Record<L, string>; total: number; pending: number; exported: number }
  >();
  private named = new Set<string>();

  constructor(counter: Counter<L>, max: number, folded: readonly L[]) {
    this.counter = counter;
    this.max = max;
    this.folded = folded;
  }

  /** Counts `n` for `labels` (0: the series is there from 0, as every active overlay's is). */
  add(labels: Record<L, string>, n = 1): void {
    const key = JSON.stringify(labels);
    const entry = this.entries.get(key);
    if (entry) {
      entry.total += n;
      entry.pending += n;
    } else this.entries.set(key, { labels, total: n, pending: n, exported: 0 });
  }

  /** At scrape: who is named now, and every count held since the last scrape, into its series. */
  flush(): void {
    const order = byLabels(Object.keys([...this.entries.values()][0]?.labels ?? {}) as L[]);
    const ranked = [...this.entries.entries()].sort(([, a], [, b]) => b.total - a.total || order(a.labels, b.labels));
    const room = ranked.length <= this.max ? ranked.length : this.max - 1;
    const named = new Set(ranked.slice(0, room).map(([key]) => key));
    for (const key of this.named)
      if (!named.has(key)) this.counter.remove(this.entries.get(key)!.labels as LabelValues<L>);
    for (const [key, entry] of ranked) {
      if (named.has(key)) {
        // A series that was not named at the last scrape starts where it ended (0 the first time).
        const resumed = this.named.has(key) ? 0 : entry.exported;
        this.counter.inc(entry.labels as LabelValues<L>, resumed + entry.pending);
        entry.exported += entry.pending;
      } else if (entry.pending > 0) this.counter.inc(this.fold(entry.labels) as LabelValues<L>, entry.pending);
      entry.pending = 0;
    }
    this.named = named;
  }

  private fold(labels: Record<L, string>): Record<L, string> {
    const out = { ...labels };
    for (const n of this.folded) out[n] = OTHER;
    return out;
  }
}

// The one series cap of the label values that come from cluster data: gauges fold their smallest
// series, counters name what counted most, and, as Prometheus reads a counter (a series that ends
// is gone, one that restarts lower is a reset), nothing counted is ever seen twice or lost.
import t from 'tap';
import fc from 'fast-check';
import { Counter, Registry } from 'prom-client';
import { foldSeries, OTHER, RankedCounter } from '../../src/controllers/series-cap.ts';

t.test('a gauge: the biggest series kept, the rest summed under other, ties by name', async (t) => {
  const all = [
    { capacity_type: 'b', value: 2 },
    { capacity_type: 'a', value: 2 },
    { capacity_type: 'c', value: 5 },
    { capacity_type: 'd', value: 1 },
  ];
  t.same(foldSeries([...all], 3, ['capacity_type']), [
    { capacity_type: 'c', value: 5 },
    { capacity_type: 'a', value: 2 },
    { capacity_type: OTHER, value: 3 },
  ]);
  t.equal(foldSeries([...all], 4, ['capacity_type']).length, 4, 'at the cap: nothing folded');
});

/**
 * What Prometheus' increase() over the whole run adds up: a series' samples joined across any gap
 * (a range vector drops staleness markers), a lower value a reset, a series' first sample its start.
 */
function prometheusIncrease(scrapes: Map<string, number>[]): number {
  let total = 0;
  const last = new Map<string, number>();
  for (const scrape of scrapes) {
    for (const [series, value] of scrape) {
      const before = last.get(series);
      total += before === undefined || value < before ? value : value - before;
      last.set(series, value);
    }
  }
  return total;
}

t.test('a counter: at most the cap, and every count seen exactly once however names change', async (t) => {
  fc.assert(
    fc.asyncProperty(
      fc.integer({ min: 1, max: 4 }),
      fc.array(
        fc.oneof(
          fc.constantFrom('scrape'),
          fc.record({
            overlay: fc.constantFrom('a', 'b', 'c', 'd', 'e'),
            source: fc.constantFrom('webhook', 'reconciler'),
          }),
        ),
        { maxLength: 60 },
      ),
      async (max, steps) => {
        const registry = new Registry();
        const counter = new Counter({
          name: 'c_total',
          help: 'h',
          labelNames: ['overlay', 'source'],
          registers: [registry],
        });
        const ranked = new RankedCounter<'overlay' | 'source'>(counter, max, ['overlay']);
        const scrapes: Map<string, number>[] = [];
        let counted = 0;
        const scrape = async () => {
          ranked.flush();
          const values = (await counter.get()).values;
          const perSource = new Map<string, number>();
          for (const v of values)
            if (v.labels.overlay !== OTHER)
              perSource.set(String(v.labels.source), (perSource.get(String(v.labels.source)) ?? 0) + 1);
          for (const n of perSource.values()) if (n > max) throw new Error(`${n} named series past a cap of ${max}`);
          scrapes.push(new Map(values.map((v) => [JSON.stringify(v.labels), v.value])));
        };
        for (const step of steps) {
          if (step === 'scrape') await scrape();
          else {
            ranked.add(step);
            counted++;
          }
        }
        await scrape();
        if (prometheusIncrease(scrapes) !== counted)
          throw new Error(`counted ${counted}, Prometheus would see ${prometheusIncrease(scrapes)}`);
      },
    ),
    { numRuns: 500 },
  );
  t.pass('500 runs of random counts and scrapes');
});

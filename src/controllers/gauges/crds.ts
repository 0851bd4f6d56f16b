// veneer_nodewatcher_crd_served{crd,required}: whether the apiserver serves each CRD the caches
// read, 1 or 0, read at every scrape. Every CRD has a series from the start (0 until it answers).
import type { Metrics } from '../../metrics.ts';
import type { CrdState } from '../../state/caches.ts';

export function exportCrdsServed(metrics: Metrics, crds: () => readonly CrdState[]): void {
  metrics.atScrape.crds = () => {
    for (const c of crds())
      metrics.crdServed.set({ crd: c.crd, required: String(c.required) }, c.served === true ? 1 : 0);
  };
}

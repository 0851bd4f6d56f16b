// veneer_nodewatcher_watch_last_event_age_seconds{resource}: how long ago each watch last heard
// from the apiserver (a list, an event or a bookmark), read at every scrape.
import type { Metrics } from '../../metrics.ts';
import type { Watch } from '../../state/caches.ts';

export function exportWatchAges(metrics: Metrics, watches: readonly Watch[]): void {
  metrics.atScrape.watchAges = () => {
    for (const w of watches) metrics.watchLastEventAge.set({ resource: w.resource }, w.lastEventAgeSeconds());
  };
}

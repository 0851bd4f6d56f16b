// How long ago each watch last heard from the apiserver, read at every scrape, one series per
// resource.
import t from 'tap';
import { exportWatchAges } from '../../../src/controllers/gauges/watches.ts';
import { createMetrics } from '../../../src/metrics.ts';

t.test('each watch its age, as it is at the scrape', async (t) => {
  const metrics = createMetrics();
  let nodes = 3;
  exportWatchAges(metrics, [
    { resource: 'nodes', lastEventAgeSeconds: () => nodes },
    { resource: 'nodeoverlays', lastEventAgeSeconds: () => 0.5 },
  ]);
  const age = (text: string, resource: string) =>
    new RegExp(`^veneer_nodewatcher_watch_last_event_age_seconds\\{resource="${resource}"\\} (\\S+)$`, 'm').exec(
      text,
    )?.[1];
  let text = await metrics.registry.metrics();
  t.equal(age(text, 'nodes'), '3');
  t.equal(age(text, 'nodeoverlays'), '0.5');
  nodes = 42;
  text = await metrics.registry.metrics();
  t.equal(age(text, 'nodes'), '42', 'read again at the next scrape');
});

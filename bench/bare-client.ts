// The reference of `scale-100k`'s memory: a bare list+watch client of nodes, as one is written
// without thought for size. It lists whole nodes a page of 500 at a time (client-go's reflector's
// page), parses every page and every watch event and keeps nothing, on Node's default V8 settings
// and the watcher's own HTTP client. It says on stderr when its list is done and when a watch
// ends; a watch that ends is resumed from the last resourceVersion it saw.
import { KubeClient } from '../src/kube/client.ts';
import { loadClusterAccess } from '../src/kube/kubeconfig.ts';

const client = new KubeClient(loadClusterAccess());
const started = performance.now();
let token: string | undefined;
let rv = '';
let items = 0;
do {
  const page = await client.call<{ metadata: { resourceVersion: string; continue?: string }; items: unknown[] }>(
    'GET',
    '/api/v1/nodes',
    { query: { limit: 500, continue: token } },
  );
  items += page.items.length;
  token = page.metadata.continue || undefined;
  rv = page.metadata.resourceVersion;
} while (token);
process.stderr.write(`listed ${items} nodes in ${Math.round(performance.now() - started)} ms\n`);

for (;;) {
  const body = await client.stream(
    '/api/v1/nodes',
    { watch: true, allowWatchBookmarks: true, resourceVersion: rv },
    'application/json',
    new AbortController().signal,
  );
  await new Promise<void>((resolve) => {
    let rest = '';
    body.on('data', (chunk: Buffer) => {
      const lines = (rest + chunk.toString()).split('\n');
      rest = lines.pop() ?? '';
      for (const line of lines) {
        const event = JSON.parse(line) as { object?: { metadata?: { resourceVersion?: string } } };
        rv = event.object?.metadata?.resourceVersion ?? rv;
      }
    });
    body.once('close', () => resolve());
    body.once('error', () => resolve());
  });
  process.stderr.write('watch ended; watching again\n');
}

// The floor of `scale`'s CPU per status update: a process that watches node metadata exactly as
// the watcher does (same client, same connection per watch, same Accept) and does nothing with
// the events but find their ends. Run beside the watcher on the same events, it tells what
// Node's TLS and HTTP stack costs per event on this machine, apart from anything the watcher does.
// A watch the apiserver ends is opened again from the current resourceVersion (a list of one node
// says it): the floor needs what events cost, not every event, and a watch from an older
// resourceVersion, or from "0", replays many events at once, which got it cut over and over.
import { KubeClient } from '../src/kube/client.ts';
import { loadClusterAccess } from '../src/kube/kubeconfig.ts';
import { PARTIAL_METADATA, PARTIAL_METADATA_LIST } from '../src/kube/watch-stream.ts';

const client = new KubeClient(loadClusterAccess());
let lines = 0;
for (;;) {
  const now = await client.call<{ metadata: { resourceVersion: string } }>('GET', '/api/v1/nodes', {
    query: { limit: 1 },
    accept: PARTIAL_METADATA_LIST,
  });
  const body = await client.stream(
    '/api/v1/nodes',
    { watch: true, allowWatchBookmarks: true, resourceVersion: now.metadata.resourceVersion },
    PARTIAL_METADATA,
    new AbortController().signal,
  );
  await new Promise<void>((resolve) => {
    body.on('data', (chunk: Buffer) => {
      for (let nl = chunk.indexOf(10); nl !== -1; nl = chunk.indexOf(10, nl + 1)) lines++;
    });
    body.once('close', () => resolve());
    body.once('error', () => resolve());
  });
  process.stderr.write(`watch ended after ${lines} events; watching again\n`);
}

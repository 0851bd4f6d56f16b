// The floor of `scale`'s CPU per status update: a process that watches node metadata exactly as
// the watcher does (same client, same connection per watch, same Accept) and does nothing with
// the events but find their ends. Run beside the watcher on the same events, it tells what
// Node's TLS and HTTP stack costs per event on this machine, apart from anything the watcher does.
// A watch the apiserver ends is resumed from the last resourceVersion seen, as any client does: a
// new watch from "0" would first replay every node.
import { KubeClient } from '../src/kube/client.ts';
import { loadClusterAccess } from '../src/kube/kubeconfig.ts';
import { PARTIAL_METADATA } from '../src/kube/watch-stream.ts';

const client = new KubeClient(loadClusterAccess());
let lines = 0;
let resourceVersion = '0';
for (;;) {
  const body = await client.stream('/api/v1/nodes', { watch: true, allowWatchBookmarks: true, resourceVersion }, PARTIAL_METADATA, new AbortController().signal);
  let last: Buffer | undefined;
  await new Promise<void>((resolve) => {
    body.on('data', (chunk: Buffer) => {
      for (let nl = chunk.indexOf(10); nl !== -1; nl = chunk.indexOf(10, nl + 1)) lines++;
      last = chunk;
    });
    body.once('close', () => resolve());
    body.once('error', () => resolve());
  });
  // The last chunk holds the end of the last event; an event split across chunks only costs an
  // older resourceVersion. One too old for the apiserver's cache (410 Gone) starts again from "0".
  const tail = last?.toString('latin1') ?? '';
  resourceVersion = /"code":410/.test(tail) ? '0' : /"resourceVersion":"(\d+)"(?!.*"resourceVersion":")/s.exec(tail)?.[1] ?? resourceVersion;
  process.stderr.write(`watch ended after ${lines} events; resuming from ${resourceVersion}\n`);
}

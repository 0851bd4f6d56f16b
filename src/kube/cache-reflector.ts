// A cache's Reflector: the client, metrics, log, clock and watchdog every cache of the watcher
// shares come from its deps, so that a cache says only what is its own.
import type { Logger } from 'pino';
import type { KubeClient } from './client.ts';
import { lister } from './list.ts';
import { Reflector } from './reflector.ts';
import type { ReflectorOptions, WatchMetrics } from './reflector-options.ts';

/** What every cache built on a Reflector needs from the watcher. */
export interface CacheDeps {
  client: KubeClient;
  metrics: WatchMetrics;
  log: Logger;
  now: () => number;
  watchdogMs?: number;
  /** Whether the apiserver serves each cache's resource, as it changes (ReflectorOptions.servedChanged). */
  servedChanged?(resource: string, served: boolean): void;
}

/** What a cache's Reflector says of itself; the client, metrics, log and clock come from the cache's deps. */
type CacheReflectorOptions<T> = Omit<
  ReflectorOptions<T>,
  'client' | 'watchPath' | 'listPage' | 'metrics' | 'log' | 'now' | 'watchdogMs' | 'servedChanged'
> & {
  /** The list's Accept header, where it differs from the watch's (a metadata-only view lists a List). */
  listAccept?: string;
};

/** The key a cache of cluster-scoped objects keeps them by: their name. */
export const nameOf = (obj: unknown): string => (obj as { metadata?: { name?: string } }).metadata?.name ?? '';

/** A Reflector that lists and watches `path` with what every cache shares (`deps`). */
export function cacheReflector<T>(deps: CacheDeps, path: string, o: CacheReflectorOptions<T>): Reflector<T> {
  const { listAccept, ...own } = o;
  const accept = listAccept ?? o.accept;
  return new Reflector({
    // Every cache lists through a streaming list where the apiserver serves one.
    streamingList: true,
    ...own,
    client: deps.client,
    watchPath: path,
    listPage: lister(deps.client, path, {
      ...(accept ? { accept } : {}),
      ...(o.labelSelector ? { labelSelector: o.labelSelector } : {}),
      ...(o.fieldSelector ? { fieldSelector: o.fieldSelector } : {}),
    }),
    metrics: deps.metrics,
    log: deps.log,
    now: deps.now,
    ...(deps.watchdogMs ? { watchdogMs: deps.watchdogMs } : {}),
    ...(deps.servedChanged ? { servedChanged: (served: boolean) => deps.servedChanged?.(o.resource, served) } : {}),
  });
}

// Streaming lists (KEP-3157, the WatchList feature): a watch asked for with sendInitialEvents
// begins with an ADDED event for every object, as of a consistent read, and a bookmark annotated
// k8s.io/initial-events-end says the list is complete; then it goes on as a watch. The collection
// is never one response, however large: one object at a time.
import { httpStatus } from './failures.ts';

/** What a streaming list adds to a watch's query. */
export const STREAMING_LIST_QUERY = { sendInitialEvents: true, resourceVersionMatch: 'NotOlderThan' } as const;

const INITIAL_EVENTS_END = 'k8s.io/initial-events-end';

/** A watch that was asked for a streaming list and did not give one. */
export class StreamingListRefused extends Error {}

/**
 * Whether the apiserver does not serve streaming lists: one without the WatchList feature
 * (Kubernetes 1.30 and 1.31 by default, 1.33 too) refuses sendInitialEvents as invalid (422); one
 * that does not know the parameter at all would start a plain watch, whose first bookmark then
 * lacks the annotation.
 */
export function streamingListRefused(err: unknown): boolean {
  const code = httpStatus(err);
  return err instanceof StreamingListRefused || code === 422 || code === 400;
}

/** A streaming list under way: the keys its initial events named, until its closing bookmark. */
export class InitialEvents {
  readonly seen = new Set<string>();
  done = false;

  /** A bookmark of the watch: true when it closes the list; throws when the watch is no streaming list. */
  bookmark(object: unknown): boolean {
    if (this.done) return false;
    const annotations = (object as { metadata?: { annotations?: Record<string, string> } } | undefined)?.metadata
      ?.annotations;
    if (annotations?.[INITIAL_EVENTS_END] !== 'true')
      throw new StreamingListRefused('a bookmark came before the end of the initial events');
    this.done = true;
    return true;
  }
}

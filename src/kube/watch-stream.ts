// Watches read as raw bytes, on a connection of their own (client.ts says why).
//
// @kubernetes/client-node's Watch goes through fetch, a web stream and readline, and parses
// every event into an object before anyone may look at it. At kubelet heartbeat rates that
// parse is most of the watcher's CPU (an EKS node is ~20 KB as served, its metadata ~7 KB),
// and a consumer that falls behind is cut by the apiserver. Here each event's bytes are handed
// over as they arrive, so that the caller can skip events it already knows the answer to.
import type { KubeClient, Query } from './client.ts';

/** Metadata only: labels, annotations, owners and timestamps, without spec and status. */
export const PARTIAL_METADATA = 'application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1';
export const PARTIAL_METADATA_LIST = 'application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1';

export interface StreamRequest {
  path: string;
  query: Query;
  accept?: string;
  signal: AbortSignal;
  inactivityMs: number;
}

/**
 * Streams a watch, calling `onLine` with each event's JSON bytes as they arrive (a view valid only
 * during the call: decode what you keep). Resolves when the server ends the watch; rejects on a
 * transport error, on abort (with the abort's reason), or with a TimeoutError when nothing
 * arrives for `inactivityMs`. Plain 'data' events and a coarse inactivity check keep the cost per
 * event low: at kubelet heartbeat rates a promise and a timer per chunk showed in profiles.
 */
export async function streamLines(
  client: KubeClient,
  req: StreamRequest,
  onLine: (line: Buffer) => void,
): Promise<void> {
  const inactivity = new AbortController();
  const signal = AbortSignal.any([req.signal, inactivity.signal]);
  let lastData = Date.now();
  const check = setInterval(
    () => {
      if (Date.now() - lastData >= req.inactivityMs)
        inactivity.abort(new DOMException('no watch event within the watchdog period', 'TimeoutError'));
    },
    Math.max(10, Math.min(1000, req.inactivityMs / 4)),
  );
  check.unref();
  try {
    const body = await client.stream(req.path, req.query, req.accept ?? 'application/json', signal);
    await new Promise<void>((resolve, reject) => {
      const lines = new LineSplitter();
      let ended = false;
      const onAbort = () => body.destroy(signal.reason);
      signal.addEventListener('abort', onAbort, { once: true });
      // Aborted while the response was on its way: no 'abort' event is coming.
      if (signal.aborted) onAbort();
      const settle = (err?: unknown) => {
        signal.removeEventListener('abort', onAbort);
        if (signal.aborted) reject(signal.reason);
        else if (err) reject(err);
        else if (!ended) reject(new Error('the watch connection closed before the response ended'));
        else resolve();
      };
      body.on('data', (chunk: Buffer) => {
        lastData = Date.now();
        lines.push(chunk, onLine);
      });
      body.once('end', () => (ended = true));
      body.once('error', settle);
      body.once('close', () => settle());
    });
  } catch (err) {
    // An abort surfaces as the reason it was given, so callers can tell a watchdog from a stop.
    if (signal.aborted) throw signal.reason;
    throw err;
  } finally {
    clearInterval(check);
  }
}

/**
 * Cuts a stream's chunks into newline-delimited lines, each handed over as a view valid only
 * during the call. An event that spans chunks is gathered in one buffer kept from event to event:
 * a new buffer for each such event was garbage the size of the event, at heartbeat rates.
 */
export class LineSplitter {
  private static readonly KEPT_BYTES = 256 * 1024;
  private pending = Buffer.allocUnsafe(0);
  private pendingLength = 0;

  push(chunk: Buffer, onLine: (line: Buffer) => void): void {
    let start = 0;
    if (this.pendingLength > 0) {
      const nl = chunk.indexOf(10);
      if (nl === -1) {
        this.gather(chunk, 0, chunk.length);
        return;
      }
      this.gather(chunk, 0, nl);
      onLine(this.pending.subarray(0, this.pendingLength));
      this.pendingLength = 0;
      // One outsized event (a node with thousands of images) does not keep its buffer for good.
      if (this.pending.length > LineSplitter.KEPT_BYTES) this.pending = Buffer.allocUnsafe(0);
      start = nl + 1;
    }
    for (let nl = chunk.indexOf(10, start); nl !== -1; nl = chunk.indexOf(10, start)) {
      if (nl > start) onLine(chunk.subarray(start, nl));
      start = nl + 1;
    }
    if (start < chunk.length) this.gather(chunk, start, chunk.length);
  }

  private gather(chunk: Buffer, from: number, to: number): void {
    const needed = this.pendingLength + (to - from);
    if (needed > this.pending.length) {
      const grown = Buffer.allocUnsafe(Math.max(needed, 2 * this.pending.length, 16 * 1024));
      this.pending.copy(grown, 0, 0, this.pendingLength);
      this.pending = grown;
    }
    chunk.copy(this.pending, this.pendingLength, from, to);
    this.pendingLength = needed;
  }
}

/** A watch event as the apiserver sends it, with the resourceVersion it moves the watch to. */
export interface ParsedEvent {
  type: string;
  object?: unknown;
  resourceVersion?: string;
}

export function parseEvent(line: Buffer): ParsedEvent {
  const event = JSON.parse(line.toString('utf8')) as {
    type: string;
    object?: { metadata?: { resourceVersion?: string } };
  };
  return { type: event.type, object: event.object, resourceVersion: event.object?.metadata?.resourceVersion };
}

// The Events controller: an observer of every node's metadata that hands each record it sees
// written to the process's one EventRecorder, which posts while this replica leads.
import type { ControllerContext } from '../context.ts';
import type { EventRecorder } from './recorder.ts';

export function events(ctx: ControllerContext): EventRecorder {
  ctx.caches.nodes.onMetadata((node) => ctx.events.seen(node));
  return ctx.events;
}

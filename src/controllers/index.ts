// The controllers of `serve`, listed as Karpenter's NewControllers lists its own: adding one is
// a folder exporting a factory from the ControllerContext to a Runnable (a LeaderRunnable if it
// works only while this replica leads), and a line here. The Manager starts them in this order
// after the caches, leads them in this order, and follows and stops them in reverse.
import type { Runnable } from '../kube/manager.ts';
import type { ControllerContext } from './context.ts';
import { disruptions } from './disruptions/counter.ts';
import { events } from './events/controller.ts';
import { EventRecorder, postEvent } from './events/recorder.ts';
import { gauges } from './gauges/controller.ts';
import { launches } from './launches/counter.ts';
import { recorder } from './recorder/reconciler.ts';

export type ControllerFactory = (ctx: ControllerContext) => Runnable;

export const CONTROLLERS: readonly ControllerFactory[] = [gauges, recorder, launches, disruptions, events];

/** Observe mode writes nothing: the controllers that only read and count. */
export const OBSERVING: readonly ControllerFactory[] = CONTROLLERS.filter((c) => c !== recorder && c !== events);

/** The controllers, sharing one EventRecorder (the reportingInstance is this replica). */
export function makeControllers(
  deps: Omit<ControllerContext, 'events'>,
  list: readonly ControllerFactory[] = CONTROLLERS,
): Runnable[] {
  const { caches, settings, options, metrics, log, now } = deps;
  const recorder = new EventRecorder({
    post: postEvent(deps.client),
    known: () => caches.nodes.nodes(),
    keys: settings.keys,
    enabled: options.events.enabled,
    ratePerSecond: options.events.ratePerSecond,
    instance: deps.identity,
    metrics,
    log,
    now,
  });
  const ctx = { ...deps, events: recorder };
  return list.map((make) => make(ctx));
}

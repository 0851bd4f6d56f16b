// What every controller of `serve` is made from (controllers/index.ts makes them): the caches it
// reads, the client it writes with, the settings it needs, and what the process shares between
// controllers, as controller-runtime's Manager hands each controller its client, cache and event
// recorder.
import type { Logger } from 'pino';
import type { EngineSettings, LaunchKnowledge, PriceBook } from '../engine/index.ts';
import type { KubeClient } from '../kube/client.ts';
import type { Metrics } from '../metrics.ts';
import type { ClusterCaches } from '../state/caches.ts';
import type { EventRecorder } from './events/recorder.ts';

/** The settings the controllers read, in the configuration's shape (config/load.ts). */
interface ControllerSettings {
  maxConcurrentReconciles: number;
  /** maxOverlaySeries: the bound of every per-overlay family. */
  metrics: { maxOverlaySeries: number };
  events: { enabled: boolean; ratePerSecond: number };
}

export interface ControllerContext {
  caches: ClusterCaches;
  client: KubeClient;
  settings: EngineSettings;
  options: ControllerSettings;
  /** What the effect's replay reads beyond the NodeClaim: the prices, the NodeClasses' zones. */
  launch: LaunchKnowledge;
  prices: {
    current(): PriceBook | undefined;
    /** Prices that were due came, or stopped being waited for. */
    onDueEnded(listener: () => void): void;
  };
  /** This replica: the Lease's holder, the Events' reportingInstance. */
  identity: string;
  /** Why records may not be written now (observe mode, or no overlay selected), and when they may again. */
  hold: { reason(): string | undefined; onLift(listener: () => void): void };
  /** One recorder, so that every Event the watcher posts shares one rate and one leader. */
  events: EventRecorder;
  metrics: Metrics;
  log: Logger;
  now: () => number;
}

// Each record written, counted once, by the leader, when its watch of every node's metadata first
// shows it (whoever wrote it: the webhook inline, or the reconciler), from what the record says:
// veneer_nodewatcher_nodes_labeled_total{capacity_type, instance_family, source} (source: the
// story's decidedBy), effects_total{effect}, effect_unknown_total{reason}, and for a record that
// names an overlay launches_total{overlay, effect}. Counted from what was written, not from the
// webhook's answers: an answer anyone can ask the webhook port for writes nothing.
//
// Once per cluster: only the leader counts, and only records written (their labeled-at, to the
// second) since it became leader, so that a new leader, or the same one restarted, never counts
// what was there before it. A record counted is remembered while its labeled-at is within
// WINDOW_MS; one older than that is never counted (a relist shows every node again). Across a
// leader change, a record written in the hand-over (after the old leader stopped counting,
// before the new one started) is not counted, and one written within the second the new leader
// started in may be counted by both. Every active overlay has its series from 0 on every
// replica, so that PromQL's increase() sees the first launch of each.
import { EFFECTS, fromBasicTimestamp, recordedEffect, type NodeView, type RecordKeys } from '../../engine/index.ts';
import type { LeaderRunnable } from '../../kube/manager.ts';
import type { Metrics } from '../../metrics.ts';
import type { ControllerContext } from '../context.ts';
import { RankedCounter } from '../series-cap.ts';

/** Records older than this are history: a relist or a label change shows them again, and they are not counted. */
export const WINDOW_MS = 60 * 60_000;

/** What a record written is counted by. */
interface Written {
  /** labeled-at, epoch ms (to the second). */
  writtenAt: number;
  /** The record's matching-overlay value, when it names one. */
  overlay?: string;
  /** The effect its labels carry, when they carry one (a record of an older watcher may not). */
  effect?: string;
  capacityType: string;
  instanceFamily: string;
  /** The path that wrote it, as its story tells; `unknown` when the story cannot be read. */
  source: string;
  /** Why its effect is unknown, as its story tells. */
  effectReason?: string;
}

/** What a record is counted by; undefined for a node without one, or whose labeled-at is not the watcher's. */
export function writtenOf(node: NodeView, keys: RecordKeys): Written | undefined {
  const influenced = node.labels[keys.influenced];
  if (influenced !== 'true' && influenced !== 'false') return undefined;
  const writtenAt = fromBasicTimestamp(node.labels[keys.labeledAt]);
  if (writtenAt === undefined) return undefined;
  const overlay = influenced === 'true' ? node.labels[keys.matchingOverlay] : undefined;
  return {
    writtenAt,
    ...(overlay ? { overlay } : {}),
    ...(node.labels[keys.effect] !== undefined ? { effect: recordedEffect(node.labels, keys) } : {}),
    capacityType: node.labels[keys.copied['capacity-type']] ?? 'none',
    instanceFamily: node.labels[keys.copied['instance-family']] ?? 'none',
    source: node.told?.decidedBy ?? 'unknown',
    ...(node.told?.effectReason !== undefined ? { effectReason: node.told.effectReason } : {}),
  };
}

interface LaunchCounterOptions {
  metrics: Metrics;
  keys: RecordKeys;
  /** metrics.maxOverlaySeries. */
  max: number;
  /** The matching-overlay values of the active selected overlays: each has its series from 0. */
  active: () => Iterable<string>;
  now?: () => number;
}

/** The counter, fed by every node's metadata; every overlay that counts has its series from 0. */
export function launches(ctx: ControllerContext): LaunchCounter {
  const { caches, now } = ctx;
  const counter = new LaunchCounter({
    metrics: ctx.metrics,
    keys: ctx.settings.keys,
    max: ctx.options.metrics.maxOverlaySeries,
    active: () => caches.overlays.counting(now()).map((o) => o.nameLabelValue),
    now,
  });
  caches.nodes.onMetadata((node) => counter.seen(node));
  return counter;
}

export class LaunchCounter implements LeaderRunnable {
  readonly name = 'launches';
  private readonly o: LaunchCounterOptions;
  private readonly now: () => number;
  private readonly launches: RankedCounter<'overlay' | 'effect'>;
  private readonly labeled: RankedCounter<'capacity_type' | 'instance_family' | 'source'>;
  /** The second this replica became leader (epoch ms); undefined while it follows. */
  private since: number | undefined;
  /** Node key -> labeled-at of the records counted, while within WINDOW_MS. */
  private readonly counted = new Map<string, number>();

  constructor(opts: LaunchCounterOptions) {
    this.o = opts;
    this.now = opts.now ?? Date.now;
    const { metrics, max } = opts;
    this.launches = new RankedCounter(metrics.launches, max, ['overlay', 'effect']);
    this.labeled = new RankedCounter<'capacity_type' | 'instance_family' | 'source'>(metrics.nodesLabeled, max, [
      'capacity_type',
      'instance_family',
    ]);
    metrics.atScrape.recordsWritten = () => {
      for (const overlay of opts.active()) for (const effect of EFFECTS) this.launches.add({ overlay, effect }, 0);
      this.launches.flush();
      this.labeled.flush();
    };
  }

  /** A node as the metadata watch shows it now. */
  seen(node: NodeView): void {
    if (this.since === undefined) return;
    const written = writtenOf(node, this.o.keys);
    if (!written) return;
    const key = node.uid ?? node.name;
    const now = this.now();
    if (this.counted.has(key) || written.writtenAt < this.since || now - written.writtenAt > WINDOW_MS) return;
    this.counted.set(key, written.writtenAt);
    // Entries leave once their record is too old to count: seen() would refuse such a node anyway.
    for (const [k, at] of this.counted) {
      if (now - at <= WINDOW_MS) break;
      this.counted.delete(k);
    }
    this.count(written);
  }

  /** Leadership gained: records written from this second on are this replica's to count. */
  lead(): void {
    this.since = Math.floor(this.now() / 1000) * 1000;
  }

  /** Leadership lost: the new leader counts from when it starts. */
  follow(): void {
    this.since = undefined;
    this.counted.clear();
  }

  private count(w: Written): void {
    const { metrics } = this.o;
    this.labeled.add({ capacity_type: w.capacityType, instance_family: w.instanceFamily, source: w.source });
    if (w.effect !== undefined) metrics.effects.inc({ effect: w.effect });
    if (w.effectReason !== undefined) metrics.effectUnknown.inc({ reason: w.effectReason });
    if (w.overlay !== undefined) this.launches.add({ overlay: w.overlay, effect: w.effect ?? 'unknown' });
  }
}

// Shared set-up for engine tests: an index with Veneer's policy and the default settings.
import {
  OverlayIndex,
  parseSelector,
  recordKeys,
  toNodePoolView,
  toOverlayView,
  type EngineSettings,
  type NodePoolObject,
  type OverlayObject,
} from '../../src/engine/index.ts';
import { KarpenterView } from '../../src/engine/karpenter-view.ts';
import { AWS_KEYS } from '../../src/engine/providers.ts';

export const T0 = Date.parse('2026-01-12T15:00:00Z');
export const settings: EngineSettings = { keys: recordKeys('veneer.io'), gracePeriodMs: 60_000, provider: AWS_KEYS };

export function newIndex(opts: { requireOverlayReady?: boolean; retentionMs?: number } = {}): OverlayIndex {
  return new OverlayIndex({
    policy: {
      selector: parseSelector('app.kubernetes.io/managed-by=veneer'),
      requireOverlayReady: opts.requireOverlayReady ?? false,
    },
    retentionMs: opts.retentionMs ?? 3_600_000,
  });
}

/** The NodePool `karpenterNode` launches into, with no template labels. */
export const defaultPool = (labels: Record<string, string> = {}): NodePoolObject => ({
  metadata: { name: 'default', creationTimestamp: iso(T0 - 86_400_000) },
  spec: { template: { metadata: { labels } } },
});

/** An index that has been watching since `syncedAt` and holds these overlays (created at T0 - 1h) and NodePools. */
export function indexWith(
  overlays: OverlayObject[],
  syncedAt = T0 - 3_600_000,
  opts: Parameters<typeof newIndex>[0] & { nodePools?: NodePoolObject[] } = {},
): OverlayIndex {
  const index = newIndex(opts);
  index.replaceAll(
    overlays.map((o) => toOverlayView(withCreation(o, syncedAt))),
    syncedAt,
  );
  index.nodePools.replaceAll(
    (opts.nodePools ?? [defaultPool()]).map((p) => toNodePoolView(p)),
    syncedAt,
  );
  index.markSynced(syncedAt);
  return index;
}

export function withCreation<T extends OverlayObject>(o: T, at: number): T {
  return {
    ...o,
    metadata: { ...o.metadata, creationTimestamp: o.metadata?.creationTimestamp ?? new Date(at).toISOString() },
  };
}

export function withStatus<T extends OverlayObject>(
  o: T,
  conditions: { type: string; status: string; reason?: string }[],
): T {
  return { ...o, status: { conditions } };
}

export const iso = (ms: number) => new Date(ms).toISOString();

/** A launch judged on the node's labels alone, as when its NodePool is unknown. */
export const viewOf = (labels: Readonly<Record<string, string>>) => new KarpenterView(labels, undefined, AWS_KEYS);

// What the differential tests hand the engine of a generated cluster the judge has seen: the
// catalog's prices as a price source, and an overlay index of the overlays (with the statuses
// Karpenter's controller wrote) and NodePools, all in force since `since`.
import {
  OverlayIndex,
  type OverlayPolicy,
  type PriceBook,
  toNodePoolView,
  toOverlayView,
} from '../../src/engine/index.ts';
import type { InstanceTypeInfo } from '../../src/engine/effect/allocatable.ts';
import type { JudgeCondition, JudgeNodePool, JudgeOverlay } from './karpenter-oracle.ts';
import { type CatalogType, LAUNCH_REGION, overlayLabels } from './launch-cases.ts';

/** The generated catalog as the watcher's price source: on-demand, spot by zone, where each type is offered, every type, and what DescribeInstanceTypes says of each where given. */
export function catalogPrices(
  catalog: ReadonlyMap<string, CatalogType>,
  asOf: number,
  info?: ReadonlyMap<string, InstanceTypeInfo>,
): PriceBook {
  return {
    ...(info ? { instanceInfo: (x: string) => info.get(x) } : {}),
    source: 'generated',
    asOf,
    region: LAUNCH_REGION,
    hasSpot: true,
    onDemand: (x) => catalog.get(x)?.onDemand,
    spot: (x, z) => catalog.get(x)?.spot[z],
    offeredZones: (x) => {
      const zones = catalog.get(x)?.zones;
      return zones ? new Set(zones) : undefined;
    },
    instanceTypes: () => [...catalog.keys()],
  };
}

/**
 * One overlay that came or went at `at`, after `since`: the overlays in force changed while
 * Karpenter decided (the decision's moment, engine/disruption/validation.ts). Its weight is its own,
 * so the others' statuses hold without it too.
 */
export interface OverlayChange {
  readonly overlay: string;
  readonly kind: 'came' | 'went';
  readonly at: number;
}

/** The engine's index of a judged cluster: its overlays with Karpenter's statuses, its NodePools (and their consolidation policy and limits). */
export function judgedIndex(
  cluster: {
    overlays: readonly (JudgeOverlay & { selected: boolean })[];
    nodePools: readonly (JudgeNodePool & { consolidationPolicy?: string; limits?: Record<string, string> })[];
  },
  statuses: Record<string, { conditions: JudgeCondition[] } | undefined>,
  policy: OverlayPolicy,
  since: number,
  change?: OverlayChange,
): OverlayIndex {
  const index = new OverlayIndex({ policy, retentionMs: Number.POSITIVE_INFINITY });
  const createdAt = new Date(since).toISOString();
  const views = () =>
    cluster.overlays.map((o) => {
      const came = o.name === change?.overlay && change.kind === 'came';
      const born = came ? new Date(change.at).toISOString() : createdAt;
      const conditions = statuses[o.name]?.conditions ?? [];
      return toOverlayView({
        metadata: { name: o.name, labels: overlayLabels(o), creationTimestamp: born, generation: 1 },
        spec: {
          requirements: o.requirements,
          ...(o.weight != null ? { weight: o.weight } : {}),
          ...(o.price !== undefined ? { price: o.price } : {}),
          ...(o.priceAdjustment !== undefined ? { priceAdjustment: o.priceAdjustment } : {}),
        },
        // Validated as it came: Karpenter's statuses, dated then.
        status: { conditions: came ? conditions.map((c) => ({ ...c, lastTransitionTime: born })) : conditions },
      });
    });
  const all = views();
  const without = all.filter((v) => v.name !== change?.overlay);
  if (change === undefined) index.replaceAll(all, since);
  else {
    index.replaceAll(change.kind === 'came' ? without : all, since);
    index.replaceAll(change.kind === 'came' ? all : without, change.at);
  }
  index.nodePools.replaceAll(
    cluster.nodePools.map((p) =>
      toNodePoolView({
        metadata: { name: p.name, creationTimestamp: createdAt },
        spec: {
          template: { metadata: { labels: p.labels } },
          ...(p.consolidationPolicy ? { disruption: { consolidationPolicy: p.consolidationPolicy } } : {}),
          ...(p.limits ? { limits: p.limits } : {}),
        },
      }),
    ),
    since,
  );
  index.markSynced(since);
  return index;
}

// The watcher's view of the cluster: overlays (with history), NodeClaims and Nodes, each fed
// by a Reflector and read, never fetched, by the webhook and the reconciler.
import {
  OverlayIndex,
  toNodePoolView,
  toOverlayView,
  type LaunchKnowledge,
  type NodePoolObject,
  type NodePoolView,
  type OverlayObject,
  type OverlayPolicy,
  type OverlayView,
  type PriceBook,
  type PricesDue,
  type ProviderSettings,
  recordAtMark,
  type RecordKeys,
} from '../engine/index.ts';
import { type CacheDeps, cacheReflector, nameOf } from '../kube/cache-reflector.ts';
import type { Reflector } from '../kube/reflector.ts';
import { NodeCache } from './node-cache.ts';
import { NodeClassCache } from './launch-caches.ts';
import { InstanceTypeLabels } from './lookups.ts';
import { NodeClaimCache } from './node-claims.ts';
import { DisruptionWatch } from './disruption/watch.ts';
import { PoolOfferings } from './disruption/pool-offerings.ts';

export const OVERLAYS_PATH = '/apis/karpenter.sh/v1alpha1/nodeoverlays';
export const NODEPOOLS_PATH = '/apis/karpenter.sh/v1/nodepools';
export { NODECLAIMS_PATH, NodeClaimCache } from './node-claims.ts';

/**
 * The CRDs the caches read, by the resource name of their watch: Karpenter's are required (without
 * them nothing can be decided: the watcher is not ready until each is served), the AWS provider's
 * EC2NodeClass is optional. `hint`: what a missing one most likely means.
 */
export const CRDS = [
  {
    resource: 'nodeoverlays',
    crd: 'nodeoverlays.karpenter.sh',
    required: true,
    hint: 'is Karpenter installed with its CRDs, at a version that has NodeOverlay?',
  },
  { resource: 'nodepools', crd: 'nodepools.karpenter.sh', required: true, hint: 'is Karpenter installed?' },
  { resource: 'nodeclaims', crd: 'nodeclaims.karpenter.sh', required: true, hint: 'is Karpenter installed?' },
  {
    resource: 'ec2nodeclasses',
    crd: 'ec2nodeclasses.karpenter.k8s.aws',
    required: false,
    hint: "Karpenter's AWS provider is not installed",
  },
] as const;

/** A CRD the caches read, and whether the apiserver serves it (undefined: no answer yet). */
export interface CrdState {
  crd: string;
  required: boolean;
  served: boolean | undefined;
}

/** The caches report their watches as kube/ does, and the overlay cache its relists. */
export interface StateDeps extends CacheDeps {
  metrics: CacheDeps['metrics'] & { cacheRefresh: { inc(): void } };
}

/** A watch of the caches, for the gauge of how long ago each last heard from the apiserver. */
export interface Watch {
  resource: string;
  lastEventAgeSeconds(): number;
}

export interface OverlayCacheOptions {
  policy: OverlayPolicy;
  retentionMs: number;
  relistIntervalMs: number;
}

export class OverlayCache {
  readonly index: OverlayIndex;
  readonly reflector: Reflector<OverlayView>;
  private readonly policy: OverlayPolicy;
  private readonly changed: (() => void)[] = [];
  /** Told from the first full list on: before it, a few overlays are not the cluster's. */
  private listed = false;

  constructor(deps: StateDeps, opts: OverlayCacheOptions) {
    this.policy = opts.policy;
    this.index = new OverlayIndex({ policy: opts.policy, retentionMs: opts.retentionMs });
    this.reflector = cacheReflector(deps, OVERLAYS_PATH, {
      resource: 'nodeoverlays',
      // Every overlay, not only the selector's: Karpenter applies the others too, and one of them
      // can outrank a selected overlay or be what steers a launch without them.
      keyOf: nameOf,
      slim: (obj) => toOverlayView(obj as OverlayObject),
      handlers: {
        upsert: (view, at) => {
          this.index.observe(view, at);
          this.tell();
        },
        remove: (view, at) => {
          this.index.forget(view.name, at);
          this.tell();
        },
        listed: (at, gapSince) => {
          if (gapSince !== undefined) this.index.markGap(gapSince, at);
          this.index.markSynced(at);
          this.index.prune(at);
          deps.metrics.cacheRefresh.inc();
          this.listed = true;
          this.tell();
        },
      },
      relistIntervalMs: opts.relistIntervalMs,
    });
  }

  /** Every overlay the watch sees now, the selector's and the others (which only outrank them). */
  current(): Iterable<OverlayView> {
    return this.reflector.store.values();
  }

  selects(overlay: OverlayView): boolean {
    return this.policy.selector.matches(overlay.labels);
  }

  /** Each change the watch brings: an overlay added, changed or removed, or a (re)list. */
  onChange(listener: () => void): void {
    this.changed.push(listener);
  }

  private tell(): void {
    if (!this.listed) return;
    for (const listener of this.changed) listener();
  }

  /** The overlays that count at `now`, for the gauges and the counters: active, and selected. */
  counting(now: number): OverlayView[] {
    return this.index
      .activeVersionsAt(now)
      .filter((v) => v.ineligible === undefined && v.selected)
      .map((v) => v.overlay);
  }

  /** The overlay a record names (by its label value), as the cluster has it now. */
  byLabelValue(value: string): OverlayView | undefined {
    for (const ov of this.reflector.store.values()) if (ov.nameLabelValue === value) return ov;
    return undefined;
  }
}

/** NodePools feed the overlay index: Karpenter compares overlays with their template labels. */
export class NodePoolCache {
  readonly reflector: Reflector<NodePoolView>;

  constructor(deps: CacheDeps, index: OverlayIndex) {
    this.reflector = cacheReflector(deps, NODEPOOLS_PATH, {
      resource: 'nodepools',
      keyOf: nameOf,
      slim: (obj) => toNodePoolView(obj as NodePoolObject),
      handlers: {
        upsert: (pool, at) => index.nodePools.observe(pool, at),
        remove: (pool, at) => index.nodePools.forget(pool.name, at),
      },
    });
  }
}

/** The caches, started and stopped together; `ready` once each has listed. */
export class ClusterCaches {
  readonly overlays: OverlayCache;
  readonly nodePools: NodePoolCache;
  readonly nodeClaims: NodeClaimCache;
  readonly nodes: NodeCache;
  readonly nodeClasses: NodeClassCache;
  readonly disruption: DisruptionWatch;
  readonly instanceTypes = new InstanceTypeLabels();
  /** The NodeClaims of each NodePool by offering: Balanced consolidation's pool cost. */
  readonly poolOfferings = new PoolOfferings();
  /** The required CRDs said not to be served. */
  private readonly missing = new Set<string>();

  /** `keys`: the record's keys (its influenced label's absence marks a node as undecided). */
  constructor(deps: StateDeps, overlayOpts: OverlayCacheOptions, keys: RecordKeys) {
    const own: StateDeps = {
      ...deps,
      servedChanged: (resource, served) => this.servedChanged(deps.log, resource, served),
    };
    this.overlays = new OverlayCache(own, overlayOpts);
    this.nodePools = new NodePoolCache(own, this.overlays.index);
    this.nodeClaims = new NodeClaimCache(own);
    this.nodes = new NodeCache(own, keys);
    this.nodeClasses = new NodeClassCache(own);
    this.disruption = new DisruptionWatch(own, this.nodeClaims, (name) => {
      const node = this.nodes.get(name);
      return node === undefined ? undefined : recordAtMark(node.labels, node.told, keys);
    });
    this.nodes.onMetadata((node) => this.instanceTypes.seen(node));
    this.nodeClaims.subscribe((claim) => this.poolOfferings.upsert(claim));
    this.nodeClaims.onRemoved((claim) => this.poolOfferings.remove(claim));
  }

  /** Every watch, by the resource name its metrics carry. */
  watches(): Watch[] {
    return this.reflectors().map((r) => ({
      resource: r.resource,
      lastEventAgeSeconds: () => r.reflector.lastEventAgeSeconds(),
    }));
  }

  private reflectors() {
    return [
      { resource: 'nodeoverlays', reflector: this.overlays.reflector as Reflector<unknown> },
      { resource: 'nodepools', reflector: this.nodePools.reflector as Reflector<unknown> },
      { resource: 'nodeclaims', reflector: this.nodeClaims.reflector as Reflector<unknown> },
      { resource: 'nodes', reflector: this.nodes.all as Reflector<unknown> },
      { resource: 'undecided-nodes', reflector: this.nodes.undecided as Reflector<unknown> },
      { resource: 'ec2nodeclasses', reflector: this.nodeClasses.reflector as Reflector<unknown> },
      { resource: 'disruption-events', reflector: this.disruption.reflector as Reflector<unknown> },
      { resource: 'consolidation-events', reflector: this.disruption.candidates as Reflector<unknown> },
      { resource: 'approval-events', reflector: this.disruption.approvals as Reflector<unknown> },
    ];
  }

  start(): void {
    for (const r of this.reflectors()) r.reflector.start();
  }

  /** What a launch's replay reads from the caches, with what `prices` holds and expects at the time of each read. */
  launchKnowledge(
    prices: { current(): PriceBook | undefined; due(): PricesDue | undefined },
    karpenter: ProviderSettings,
  ): LaunchKnowledge {
    const instanceTypes = this.instanceTypes;
    return {
      get prices() {
        return prices.current();
      },
      get pricesDue() {
        return prices.due();
      },
      zonesOf: (nodeClass) => this.nodeClasses.zonesOf(nodeClass),
      sizingOf: (nodeClass) => this.nodeClasses.sizingOf(nodeClass, karpenter, instanceTypes.current),
      get instanceLabels() {
        return instanceTypes.current;
      },
      disruption: this.disruption,
      poolOfferings: (pool, createdBefore) => this.poolOfferings.offerings(pool, createdBefore),
      poolCapacity: (pool, createdBefore, except) => this.poolOfferings.capacity(pool, createdBefore, except),
    };
  }

  get ready(): boolean {
    return this.reflectors().every((r) => r.reflector.isSynced);
  }

  /** Each CRD the caches read, required or not, and whether it is served. */
  crds(): CrdState[] {
    return CRDS.map((c) => ({ crd: c.crd, required: c.required, served: this.reflector(c.resource)?.served }));
  }

  /**
   * Why the caches are not ready, the worst first: each required CRD the apiserver does not serve,
   * then each cache that has not listed yet. Empty: ready, and every required CRD served.
   */
  notReady(): string[] {
    const missing = CRDS.filter((c) => c.required && this.reflector(c.resource)?.served === false);
    return [
      ...missing.map((c) => `the CRD ${c.crd} is not served (${c.hint})`),
      ...this.reflectors()
        .filter((r) => !r.reflector.isSynced && !missing.some((c) => c.resource === r.resource))
        .map((r) => `the ${r.resource} cache has not listed yet`),
    ];
  }

  private reflector(resource: string): Reflector<unknown> | undefined {
    return this.reflectors().find((r) => r.resource === resource)?.reflector;
  }

  /** Says once, as an error, that a required CRD is not served, and again only when that changes. */
  private servedChanged(log: CacheDeps['log'], resource: string, served: boolean): void {
    const crd = CRDS.find((c) => c.resource === resource && c.required);
    if (crd === undefined || served === !this.missing.has(crd.crd)) return;
    if (served) {
      this.missing.delete(crd.crd);
      log.info({ crd: crd.crd }, `the CRD ${crd.crd} is served now`);
    } else {
      this.missing.add(crd.crd);
      log.error({ crd: crd.crd }, `the CRD ${crd.crd} is not served (${crd.hint}): the watcher is not ready`);
    }
  }

  async synced(): Promise<void> {
    await Promise.all(this.reflectors().map((r) => r.reflector.synced));
  }

  async stop(): Promise<void> {
    await Promise.all(this.reflectors().map((r) => r.reflector.stop()));
  }
}

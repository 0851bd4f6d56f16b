// Every metric the watcher exports, on one registry per process (and per test).
// Label values are bounded sets: never a node name; overlay names only in overlay_nodes_current,
// overlay_dollars_per_hour and launches_total, each capped by metrics.maxOverlaySeries; providers by name (aws, kwok) or `unknown`, never a group.
import {
  type CounterConfiguration,
  collectDefaultMetrics,
  Counter,
  Gauge,
  Histogram,
  type LabelValues,
  Registry,
} from 'prom-client';

const PREFIX = 'veneer_nodewatcher_';

export type Metrics = ReturnType<typeof createMetrics>;

/** Gauges that describe the cluster now are computed from the caches when scraped. */
export interface ScrapeHooks {
  watchAges?: () => void;
  nodeCounts?: () => void;
  overlayNodes?: () => void;
  overlayDollars?: () => void;
  recordsWritten?: () => void;
  overlayStates?: () => void;
  overlaysSeen?: () => void;
  providers?: () => void;
  prices?: () => void;
  crds?: () => void;
}

/**
 * How often the event-loop delay histogram (nodejs_eventloop_lag_p50_seconds and its kin) takes a
 * sample: prom-client's 10 ms default woke the watcher 100 times a second for a few ms of CPU a
 * second, and a stall that matters to a review (whose deadline is in seconds) still shows at
 * 100 ms. The measurements: docs/tuning.md.
 */
export const EVENT_LOOP_SAMPLE_MS = 100;

/**
 * A counter whose children count in plain numbers, added to it when it is scraped: prom-client
 * hashes and checks the labels on every inc(), and per watch event, at kubelet heartbeat rates,
 * that showed in profiles. `tally(labels)` gives the one child of those labels.
 */
function talliedCounter<L extends string>(config: CounterConfiguration<L>) {
  const children = new Map<string, { labels: LabelValues<L>; count: number }>();
  const counter = new Counter<L>({
    ...config,
    collect: () => {
      for (const child of children.values()) {
        if (child.count === 0) continue;
        counter.inc(child.labels, child.count);
        child.count = 0;
      }
    },
  });
  return Object.assign(counter, {
    tally(labels: LabelValues<L>): { inc(): void } {
      const key = JSON.stringify(labels);
      const child = children.get(key) ?? { labels, count: 0 };
      children.set(key, child);
      return { inc: () => void child.count++ };
    },
  });
}

export function createMetrics(registry: Registry = new Registry()) {
  collectDefaultMetrics({ register: registry, eventLoopMonitoringPrecision: EVENT_LOOP_SAMPLE_MS });
  // prom-client also exports these three gauges with a counter's _total suffix, which
  // promtool rejects; the same values stay available without the suffix.
  for (const name of ['nodejs_active_handles_total', 'nodejs_active_requests_total', 'nodejs_active_resources_total']) {
    registry.removeSingleMetric(name);
  }
  const r = [registry];
  const atScrape: ScrapeHooks = {};
  return {
    registry,
    atScrape,
    ...recordMetrics(r, atScrape),
    ...unrecordedMetrics(r),
    ...operationMetrics(r, atScrape),
    ...effectMetrics(r, atScrape),
  };
}

/** The records: written, failed, in the cluster now, by overlay, Events, pending. */
function recordMetrics(r: Registry[], atScrape: ScrapeHooks) {
  return {
    nodesLabeled: new Counter({
      name: `${PREFIX}nodes_labeled_total`,
      help: 'Records written, counted once by the leader when its watch first shows them, by the capacity type and instance family of the matching overlay ("none" when no overlay matched; past metrics.maxOverlaySeries series, the pairs that counted least are summed under "other") and by the path that wrote it (source: the decision story\'s decidedBy).',
      labelNames: ['capacity_type', 'instance_family', 'source'] as const,
      registers: r,
      collect: () => atScrape.recordsWritten?.(),
    }),
    labelingErrors: new Counter({
      name: `${PREFIX}labeling_errors_total`,
      help: 'Failures while deciding or writing a record, by kind.',
      labelNames: ['error_type'] as const,
      registers: r,
    }),
    nodesInfluenced: new Gauge({
      name: `${PREFIX}nodes_influenced_current`,
      help: 'Nodes in the cluster now whose record says overlay-influenced=true, by capacity type (computed from the node cache at scrape time).',
      labelNames: ['capacity_type'] as const,
      registers: r,
      collect: () => atScrape.nodeCounts?.(),
    }),
    overlayNodes: new Gauge({
      name: `${PREFIX}overlay_nodes_current`,
      help: 'Nodes in the cluster now whose record names the overlay, by overlay and capacity type; every active overlay is present (0: it steers no node). Past metrics.maxOverlaySeries series the smallest are summed under overlay="other" (computed from the node cache at scrape time).',
      labelNames: ['overlay', 'capacity_type'] as const,
      registers: r,
      collect: () => atScrape.overlayNodes?.(),
    }),
    overlayDollars: new Gauge({
      name: `${PREFIX}overlay_dollars_per_hour`,
      help: 'On-demand list price in USD an hour of the nodes in the cluster now whose record names the overlay, by overlay and the effect the record carries (capacity-type, instance-type, none, unknown); a node whose price is not known adds nothing. Past metrics.maxOverlaySeries series the smallest are summed under overlay="other",effect="other" (computed from the node cache and the prices held, at scrape time).',
      labelNames: ['overlay', 'effect'] as const,
      registers: r,
      collect: () => atScrape.overlayDollars?.(),
    }),
    launches: new Counter({
      name: `${PREFIX}launches_total`,
      help: 'Records naming an overlay, counted once by the leader when its watch first shows them written, by overlay and effect (capacity-type, instance-type, none, unknown). Every active overlay has a series from 0. Past metrics.maxOverlaySeries series, the pairs that counted least since the process started are counted under overlay="other",effect="other" (a pair that drops out of the named ones ends its series).',
      labelNames: ['overlay', 'effect'] as const,
      registers: r,
      collect: () => atScrape.recordsWritten?.(),
    }),
    recordedDisruptions: new Counter({
      name: `${PREFIX}recorded_disruptions_total`,
      help: "Nodes whose record names an overlay, removed while their NodeClaim carried Karpenter's DisruptionReason condition, counted once by the leader, by that reason (underutilized, empty, drifted, unhealthy, other) and the state of the overlay the record names at the node's removal: counting (on the same terms as at the launch), changed (its weight, price or price adjustment, or it no longer counts) or gone. Every series exists from 0.",
      labelNames: ['reason', 'overlay_state'] as const,
      registers: r,
    }),
    overlays: new Gauge({
      name: `${PREFIX}overlays`,
      help: "Selected NodeOverlays by Karpenter's verdict: counted (validated, prices offerings), rejected_conflict and rejected_validation (ValidationSucceeded=False), unvalidated (no verdict for its current generation: is Karpenter's NodeOverlay feature gate on?), capacity_only, deleting. Every state has a series (computed from the overlay cache at scrape time).",
      labelNames: ['state'] as const,
      registers: r,
      collect: () => atScrape.overlayStates?.(),
    }),
    nodeOverlaysSeen: new Gauge({
      name: `${PREFIX}nodeoverlays_seen`,
      help: 'Every NodeOverlay in the cluster, by whether the overlaySelector selects it (selected). selected="true" at 0 while selected="false" is above 0: the selector matches none of them, and every node is recorded overlay-influenced=false (computed from the overlay cache at scrape time).',
      labelNames: ['selected'] as const,
      registers: r,
      collect: () => atScrape.overlaysSeen?.(),
    }),
    providerNodeClaims: new Gauge({
      name: `${PREFIX}karpenter_provider_nodeclaims`,
      help: 'NodeClaims in the cluster by the Karpenter cloud provider that launched them (spec.nodeClassRef.group: karpenter.k8s.aws is aws, karpenter.kwok.sh is kwok, any other unknown) and whether their nodes are judged with that provider\'s keys (matches_setting: karpenterProvider is auto or that provider, and the provider is known). Above 0 with matches_setting="false": those nodes are recorded with basis approximate. Every provider has a series (computed from the NodeClaim cache at scrape time).',
      labelNames: ['provider', 'matches_setting'] as const,
      registers: r,
      collect: () => atScrape.providers?.(),
    }),
    events: new Counter({
      name: `${PREFIX}events_total`,
      help: 'Events posted on nodes about their records, by result: created; exists (already posted, by another replica or an earlier run); failed (given up after retries); dropped (the queue was full).',
      labelNames: ['result'] as const,
      registers: r,
    }),
    nodesPending: new Gauge({
      name: `${PREFIX}nodes_pending`,
      help: 'On-demand Karpenter nodes without a record yet (computed from the node cache at scrape time).',
      registers: r,
      collect: () => atScrape.nodeCounts?.(),
    }),
  };
}

/** The nodes a record does not cover, or not as the watcher wrote it: unreadable, held, opted out. */
function unrecordedMetrics(r: Registry[]) {
  return {
    recordsUnreadable: new Gauge({
      name: `${PREFIX}records_unreadable_current`,
      help: 'Nodes that carry a record (the overlay-influenced label) without a decision annotation the watcher can read: a record the watcher did not write, stored while its webhook was down (it replaces such keys at CREATE). Computed from the node cache at scrape time; `report` names them.',
      registers: r,
    }),
    recordsHeld: new Gauge({
      name: `${PREFIX}records_held`,
      help: 'Whether records are held, by reason: disabled (nodeWatcher.enabled=false: nothing runs but health and metrics), observe (nodeWatcher.mode=observe: no webhook, no record written, by design) or no_overlay_selected (NodeOverlays exist and the overlaySelector selects none of them; nothing is written until it does, or holdWhileNoOverlaySelected is false). 1 while held.',
      labelNames: ['reason'] as const,
      registers: r,
    }),
    nodesOptedOut: new Gauge({
      name: `${PREFIX}nodes_opted_out_current`,
      help: 'Nodes whose launcher opted them out of a record (<labelNamespace>/opt-out: "true"). Computed from the node cache at scrape time.',
      registers: r,
    }),
  };
}

/** How the watcher runs: its reconciles, webhooks, certificate, watches, queue and /metrics. */
function operationMetrics(r: Registry[], atScrape: ScrapeHooks) {
  return {
    cacheRefresh: new Counter({
      name: `${PREFIX}cache_refresh_total`,
      help: 'Full relists of the overlay cache (initial sync, overlayCacheTTL safety relists, relists after a watch expired).',
      registers: r,
    }),
    reconcileDuration: new Histogram({
      name: `${PREFIX}reconcile_duration_seconds`,
      help: 'Time to reconcile one node: decision plus write.',
      buckets: [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5],
      registers: r,
    }),
    admissionRequests: new Counter({
      name: `${PREFIX}admission_requests_total`,
      help: 'Admission reviews answered, by webhook, operation, outcome and whether the review was a dry run.',
      labelNames: ['webhook', 'operation', 'outcome', 'dry_run'] as const,
      registers: r,
    }),
    admissionDuration: new Histogram({
      name: `${PREFIX}admission_duration_seconds`,
      help: 'Time from receiving an admission review to sending the answer.',
      labelNames: ['webhook'] as const,
      buckets: [0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1],
      registers: r,
    }),
    admissionInFlight: new Gauge({
      name: `${PREFIX}admission_in_flight`,
      help: 'Admission reviews being answered now.',
      labelNames: ['webhook'] as const,
      registers: r,
    }),
    certExpiry: new Gauge({
      name: `${PREFIX}cert_expiry_timestamp_seconds`,
      help: 'Expiry (Unix time) of the webhook serving certificate in use.',
      registers: r,
    }),
    certReloads: new Counter({
      name: `${PREFIX}cert_reloads_total`,
      help: 'Serving certificate reloads from disk, by result.',
      labelNames: ['result'] as const,
      registers: r,
    }),
    watchRestarts: new Counter({
      name: `${PREFIX}watch_restarts_total`,
      help: 'Watches restarted, by resource and reason: error (list or watch failed), expired (410 Gone, relisted), idle (no event or bookmark within the watchdog period), closed (ended by the server).',
      labelNames: ['resource', 'reason'] as const,
      registers: r,
    }),
    watchEvents: talliedCounter({
      name: `${PREFIX}watch_events_total`,
      help: 'Watch events received, by resource and handling: applied (decoded into the cache) or skipped (a node metadata event whose labels did not change, such as a status heartbeat).',
      labelNames: ['resource', 'handling'] as const,
      registers: r,
    }),
    watchLastEventAge: new Gauge({
      name: `${PREFIX}watch_last_event_age_seconds`,
      help: 'Seconds since the newest list, event or bookmark of each watch.',
      labelNames: ['resource'] as const,
      registers: r,
      collect: () => atScrape.watchAges?.(),
    }),
    workqueueDepth: new Gauge({
      name: `${PREFIX}workqueue_depth`,
      help: 'Nodes waiting in the reconciler queue.',
      registers: r,
    }),
    workqueueRetries: new Counter({
      name: `${PREFIX}workqueue_retries_total`,
      help: 'Reconciles retried with back-off (conflicts and failed writes).',
      registers: r,
    }),
    metricsAuth: new Counter({
      name: `${PREFIX}metrics_auth_total`,
      help: 'Requests for /metrics by the authentication and authorization verdict: allowed, unauthenticated (401), forbidden (403), throttled (429: too many unknown tokens at once), error (503: the apiserver could not say).',
      labelNames: ['result'] as const,
      registers: r,
    }),
  };
}

/** What the overlays changed, the prices it was judged with, the CRDs served, leadership. */
function effectMetrics(r: Registry[], atScrape: ScrapeHooks) {
  return {
    effects: new Counter({
      name: `${PREFIX}effects_total`,
      help: 'Records written, counted once by the leader when its watch first shows them, by what the selected overlays changed about the launch: capacity-type (spot without them), instance-type, none, unknown.',
      labelNames: ['effect'] as const,
      registers: r,
    }),
    effectUnknown: new Counter({
      name: `${PREFIX}effect_unknown_total`,
      help: 'Records written whose effect is unknown, counted once by the leader, by why (a bounded code: no-prices, no-spot-prices, zones, tie, fallback, ...).',
      labelNames: ['reason'] as const,
      registers: r,
    }),
    nodesByEffect: new Gauge({
      name: `${PREFIX}nodes_by_effect_current`,
      help: 'Nodes in the cluster whose record carries each effect, computed at scrape.',
      labelNames: ['effect'] as const,
      registers: r,
    }),
    priceRefreshes: new Counter({
      name: `${PREFIX}price_refreshes_total`,
      help: 'Readings from AWS of what the effect is judged with, by kind (on_demand prices, spot prices, offerings: the zones each type is offered in, instance_types: what DescribeInstanceTypes says of each) and result (ok, error).',
      labelNames: ['kind', 'result'] as const,
      registers: r,
    }),
    pricesKnown: new Gauge({
      name: `${PREFIX}prices_known`,
      help: 'List prices the watcher holds now, by kind (on_demand: instance types; spot: instance types and zones) and source (aws, static).',
      labelNames: ['kind', 'source'] as const,
      registers: r,
      collect: () => atScrape.prices?.(),
    }),
    pricesAge: new Gauge({
      name: `${PREFIX}prices_age_seconds`,
      help: 'Seconds since the prices of each kind were last read from AWS (absent while none was).',
      labelNames: ['kind'] as const,
      registers: r,
    }),
    crdServed: new Gauge({
      name: `${PREFIX}crd_served`,
      help: 'Whether the apiserver serves each CRD the watcher reads (1) or not (0: it answered 404, or has not answered yet), by CRD and whether the watcher needs it (required="true": Karpenter\'s NodeOverlay, NodePool and NodeClaim; the watcher is not ready without them) or reads it where it is installed (the AWS provider\'s EC2NodeClass). Computed at scrape time.',
      labelNames: ['crd', 'required'] as const,
      registers: r,
      collect: () => atScrape.crds?.(),
    }),
    leader: new Gauge({
      name: `${PREFIX}leader`,
      help: '1 when this replica is the leader (the only writer of the reconciler), else 0.',
      registers: r,
    }),
  };
}

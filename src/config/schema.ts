// The one description of every setting: type, default, bounds, and (derived from the path)
// its environment variable and flag. Validation, `check-config` and the docs all read this.
// The key tables alone (data): loading the whole engine here would slow every --help by a half.
import { KNOWN_PROVIDERS } from '../engine/providers.ts';

export interface SettingSchema {
  type: 'boolean' | 'integer' | 'string' | 'duration' | 'string-list';
  default: unknown;
  description: string;
  minimum?: number;
  maximum?: number;
  /** For durations, in milliseconds. */
  minimumMs?: number;
  maximumMs?: number;
  pattern?: string;
  maxLength?: number;
  format?: 'dns-subdomain' | 'label-selector';
  enum?: string[];
}

// The providers the engine knows the keys of: a new one joins the setting by joining that list.
const providers = KNOWN_PROVIDERS.map((p) => p.name);
const providerGroups = KNOWN_PROVIDERS.map((p) => `${p.group}: ${p.name}`).join(', ');

const port = (def: number, what: string): SettingSchema => ({
  type: 'integer',
  default: def,
  minimum: 1,
  maximum: 65535,
  description: what,
});

/** Paths are relative to `nodeWatcher:`. */
export const SETTINGS = {
  enabled: {
    type: 'boolean',
    default: false,
    description: 'Opt-in switch: when false the process serves health and metrics and writes nothing.',
  },
  mode: {
    type: 'string',
    default: 'record',
    enum: ['record', 'observe'],
    description:
      "record: the webhook and the reconciler write each node's record. observe: the caches, metrics, report and explain, and no webhook, record or Event: what would be recorded can be read (report) before anything is.",
  },
  holdWhileNoOverlaySelected: {
    type: 'boolean',
    default: true,
    description:
      "While NodeOverlays exist and the overlaySelector selects none of them (most likely a wrong selector), write no record (said in the log, records_held and an alert) rather than overlay-influenced=false on every node; false records them so (your cluster has overlays that are not Veneer's and none of Veneer's).",
  },
  labelNamespace: {
    type: 'string',
    default: 'veneer.io',
    format: 'dns-subdomain',
    maxLength: 63,
    description: 'Prefix of every label and annotation the watcher writes.',
  },
  overlayCacheTTL: {
    type: 'duration',
    default: '60s',
    minimumMs: 1000,
    maximumMs: 3_600_000,
    description: 'The most stale the overlay cache may be: a full relist runs at this period.',
  },
  maxConcurrentReconciles: {
    type: 'integer',
    default: 5,
    minimum: 1,
    maximum: 100,
    description: 'Nodes reconciled at once.',
  },
  overlaySelector: {
    type: 'string',
    default: 'app.kubernetes.io/managed-by=veneer',
    format: 'label-selector',
    description: 'Label selector of the NodeOverlays that count.',
  },
  requireOverlayReady: {
    type: 'boolean',
    default: true,
    description:
      'Count an overlay only once Karpenter validated its current generation (Ready=True, observedGeneration = generation), as Karpenter applies it only then; false counts every overlay but those Karpenter rejected, for clusters whose overlay statuses cannot be read.',
  },
  karpenterProvider: {
    type: 'string',
    default: 'auto',
    enum: ['auto', ...providers],
    description: `The Karpenter cloud provider, whose instance-type and offering keys Karpenter compares overlays with: auto follows each NodeClaim's spec.nodeClassRef.group (${providerGroups}); ${providers.join(' or ')} is used for every node, and NodeClaims of another provider are warned about and their nodes recorded with basis approximate.`,
  },
  karpenterVMMemoryOverheadPercent: {
    type: 'string',
    default: '0.075',
    pattern: '^(0(\\.[0-9]+)?|1(\\.0+)?)$',
    description:
      "Karpenter's --vm-memory-overhead-percent (a fraction, 0 to 1): the share of an AWS type's memory its allocatable leaves out, which the pods' fit is computed with. Set it as Karpenter's is set.",
  },
  karpenterReservedENIs: {
    type: 'integer',
    default: 0,
    minimum: 0,
    maximum: 64,
    description:
      "Karpenter's --reserved-enis: network interfaces left out of an AWS type's ENI-limited pods, which the pods' fit is computed with. Set it as Karpenter's is set.",
  },
  instanceTypeKeys: {
    type: 'string-list',
    default: [],
    description: 'More label keys the provider defines for instance types (another provider, or keys added to yours).',
  },
  gracePeriod: {
    type: 'duration',
    default: '60s',
    minimumMs: 0,
    maximumMs: 3_600_000,
    description: 'After this age a node is decided with the labels it has.',
  },
  historyRetention: {
    type: 'duration',
    default: '1h',
    minimumMs: 60_000,
    maximumMs: 86_400_000,
    description: 'How long overlay history is kept for decisions about the past.',
  },
  shutdownDelay: {
    type: 'duration',
    default: '5s',
    minimumMs: 0,
    maximumMs: 15_000,
    description:
      'On SIGTERM, how long readiness fails while reviews are still served, so that the Service stops routing to this pod before it closes.',
  },
  'prices.source': {
    type: 'string',
    default: 'auto',
    enum: ['auto', 'aws', 'isolated', 'static', 'off'],
    description:
      "Where the list prices the effect is judged with come from, as Karpenter reads them: aws, the Pricing API (on-demand) and EC2 DescribeSpotPriceHistory (spot), refreshed in the background, with Karpenter's own static on-demand table until the Pricing API answers; isolated, that table for on-demand and EC2 for spot (Karpenter's ISOLATED_VPC); static, the table alone, no AWS call and no spot prices; off, none (the effect only where no selected overlay priced a candidate); auto, aws when a region is known (prices.region, AWS_REGION, or the nodes' topology.kubernetes.io/region), else static.",
  },
  'prices.region': {
    type: 'string',
    default: 'auto',
    pattern: '^(auto|[a-z]{2}(-[a-z]+)+-[0-9])$',
    description:
      "The AWS region whose prices are read (the cluster's); auto: AWS_REGION or AWS_DEFAULT_REGION, else, with AWS credentials but no region in the environment (EKS Pod Identity), the nodes' topology.kubernetes.io/region.",
  },
  'prices.refreshInterval': {
    type: 'duration',
    default: '12h',
    minimumMs: 60_000,
    maximumMs: 86_400_000,
    description: "How often prices are read from AWS again (Karpenter's pricing controller: 12h).",
  },
  'prices.timeout': {
    type: 'duration',
    default: '60s',
    minimumMs: 1000,
    maximumMs: 600_000,
    description: 'How long one reading of prices from AWS may take; a reading that fails keeps the prices known.',
  },
  logLevel: {
    type: 'string',
    default: 'info',
    enum: ['fatal', 'error', 'warn', 'info', 'debug', 'trace'],
    description: 'Log level (node names appear at debug only).',
  },
  'webhook.port': port(9443, 'HTTPS port of the admission webhooks.'),
  'webhook.certFile': {
    type: 'string',
    default: '/etc/veneer-node-watcher/tls/tls.crt',
    description: 'Serving certificate (PEM); reloaded when the file changes.',
  },
  'webhook.keyFile': {
    type: 'string',
    default: '/etc/veneer-node-watcher/tls/tls.key',
    description: 'Serving key (PEM); reloaded when the file changes.',
  },
  'webhook.deadline': {
    type: 'duration',
    default: '500ms',
    minimumMs: 10,
    maximumMs: 10_000,
    description: 'Internal deadline per review; past it the node is allowed without a patch.',
  },
  'metrics.port': port(
    8443,
    "Port of /metrics: HTTPS with the webhooks' certificate, behind Kubernetes authentication and authorization (plain HTTP when metrics.secure is false).",
  ),
  'metrics.secure': {
    type: 'boolean',
    default: true,
    description:
      'Serve /metrics over HTTPS only to callers whose bearer token passes a TokenReview and who may get /metrics (a SubjectAccessReview); false serves plain HTTP to anyone who can reach the port.',
  },
  'metrics.authCacheTTL': {
    type: 'duration',
    default: '1m',
    minimumMs: 1000,
    maximumMs: 600_000,
    description:
      'How long an accepted scrape token is trusted without asking the apiserver again (refusals: at most 10s).',
  },
  'metrics.maxOverlaySeries': {
    type: 'integer',
    default: 300,
    minimum: 1,
    maximum: 10_000,
    description:
      'At most this many series of each metric whose label values come from the cluster (overlay names, and the capacity types and instance families of overlays: overlay_nodes_current, overlay_dollars_per_hour, launches_total, nodes_labeled_total, nodes_influenced_current); the rest are summed under "other".',
  },
  'events.enabled': {
    type: 'boolean',
    default: true,
    description:
      'The leader posts one events.k8s.io Event on each node whose record it sees written (OverlayInfluenced or NoOverlayMatched).',
  },
  'events.ratePerSecond': {
    type: 'integer',
    default: 10,
    minimum: 1,
    maximum: 1000,
    description: 'At most this many Events a second (bursts queue; the record is never held up by them).',
  },
  'health.port': port(8081, "Plain-HTTP port of /healthz and /readyz (the kubelet's probes, no token)."),
  'leaderElection.enabled': {
    type: 'boolean',
    default: true,
    description: 'Elect one writer among replicas (a Lease).',
  },
  'leaderElection.leaseName': {
    type: 'string',
    default: 'veneer-node-watcher',
    format: 'dns-subdomain',
    maxLength: 253,
    description: 'Name of the Lease.',
  },
  'leaderElection.leaseNamespace': {
    type: 'string',
    default: 'veneer-system',
    format: 'dns-subdomain',
    maxLength: 63,
    description: "Namespace of the Lease (the pod's own namespace in the chart).",
  },
  'leaderElection.leaseDuration': {
    type: 'duration',
    default: '15s',
    minimumMs: 1000,
    maximumMs: 300_000,
    description: 'How long a lease holds without renewal.',
  },
  'leaderElection.renewDeadline': {
    type: 'duration',
    default: '10s',
    minimumMs: 500,
    maximumMs: 300_000,
    description: 'The leader gives up if it cannot renew within this.',
  },
  'leaderElection.retryPeriod': {
    type: 'duration',
    default: '2s',
    minimumMs: 100,
    maximumMs: 60_000,
    description: 'How often candidates try to acquire or renew.',
  },
} satisfies Record<string, SettingSchema>;

export type SettingPath = keyof typeof SETTINGS;

/** `webhook.certFile` -> `VENEER_NODE_WATCHER_WEBHOOK_CERT_FILE`. */
export function envName(path: string): string {
  return `VENEER_NODE_WATCHER_${path
    .replace(/\./g, '_')
    .replace(/([a-z0-9])([A-Z])/g, '$1_$2')
    .toUpperCase()}`;
}

/** `webhook.certFile` -> `--webhook-cert-file`. */
export function flagName(path: string): string {
  return `--${path
    .replace(/\./g, '-')
    .replace(/([a-z0-9])([A-Z])/g, '$1-$2')
    .toLowerCase()}`;
}

// Real Karpenter beside a ControlPlane: its KWOK cloud provider (sigs.k8s.io/karpenter/kwok, as
// Karpenter's own scale tests run it), which "launches" an instance by creating its Node, and
// kube-scheduler, which marks pending pods Unschedulable (what Karpenter provisions for). Both are
// built by scripts/control-plane.sh; each dies with the test (kit/process.ts) and stops with the
// control plane. Karpenter's own CRDs are installed (not kit/crds) and nothing stands in for its
// NodeOverlay controller: real Karpenter writes the overlay statuses.
//
// Facts this relies on (checked here against v1.15.0): Karpenter provisions only pods whose
// PodScheduled condition is False/Unschedulable; KWOK launches the candidate with the cheapest RAW
// catalog price (overlay prices do not change its choice), so a test pins the instance type and
// capacity type it needs with a nodeSelector; the Node is created with every NodeClaim label
// (after the KWOKNodeClass's nodeRegistrationDelay); no kubelet ever runs, so nodes stay NotReady,
// pods never bind and NodeClaims never initialize (nothing is disrupted either).
import { readdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import * as k8s from '@kubernetes/client-node';
import { binary, type ControlPlane } from './control-plane.ts';
import { installCRDFiles } from './karpenter-crds.ts';
import {
  type CapacityType,
  type ControllerProcesses,
  createPods,
  inReq,
  KarpenterController,
  launchController,
  NODEPOOL_API,
  type NodeSelectorRequirement,
  type PendingPod,
} from './karpenter-controller.ts';
import { startClusterEnvWith, withWatcher, type ClusterEnv, type WatcherEnvOptions } from './watcher-env.ts';
import type { RunningWatcher } from '../src/commands/serve.ts';
import type { JudgeVersion } from '../test/judges/karpenter-oracle.ts';

export {
  BURST_TYPES,
  burstPods,
  type CapacityType,
  KARPENTER_USER,
  NODECLAIM_API,
  type NodeClaim,
  NODEPOOL_API,
  type NodeSelectorRequirement,
  type PendingPod,
  PRICE_OVERLAY_APPLIED,
  type ProcessUsage,
  SCHEDULER_USER,
  usageOf,
} from './karpenter-controller.ts';

/** The Karpenter version that runs (scripts/control-plane.sh builds it; `npm run test:matrix` also runs v1.14.3). */
export const KARPENTER_VERSION = (process.env.VENEER_KARPENTER_KWOK_VERSION ?? 'v1.15.0') as JudgeVersion;
export const KWOK_NODECLASS_API = { group: 'karpenter.kwok.sh', version: 'v1alpha1', plural: 'kwoknodeclasses' };

// ---------------------------------------------------------------------------------------------
// The instance-type catalog (INSTANCE_TYPES_FILE_PATH): AWS-shaped names, so that KWOK derives
// karpenter.kwok.sh/instance-family=m5 and instance-size=xlarge from `m5.xlarge`.

export const REGION = 'us-west-2';
export const ZONES = ['us-west-2a', 'us-west-2b', 'us-west-2c'] as const;
/** One entry of KWOK's catalog file (kwok/cloudprovider/helpers.go InstanceTypeOptions). */
export interface KwokInstanceType {
  name: string;
  architecture: string;
  operatingSystems: string[];
  resources: Record<string, string>;
  offerings: { Price: number; Available: boolean; Requirements: NodeSelectorRequirement[] }[];
}

interface Family {
  name: string;
  arch: 'amd64' | 'arm64';
  gibPerCpu: number;
  /** On-demand price of one vCPU an hour (us-west-2, Linux). */
  perCpu: number;
}
const FAMILIES: Family[] = [
  { name: 'm5', arch: 'amd64', gibPerCpu: 4, perCpu: 0.048 },
  { name: 'c6i', arch: 'amd64', gibPerCpu: 2, perCpu: 0.0425 },
  { name: 'r6g', arch: 'arm64', gibPerCpu: 8, perCpu: 0.0504 },
  { name: 't3', arch: 'amd64', gibPerCpu: 4, perCpu: 0.0416 },
];
const SIZES = [
  ['large', 2],
  ['xlarge', 4],
  ['2xlarge', 8],
] as const;
/** Spot as a share of on-demand, per zone (each family a little dearer than the one before). */
const SPOT_SHARE = [0.38, 0.35, 0.41];

/** Families m5, c6i, r6g, t3 in sizes large, xlarge, 2xlarge; on-demand and spot in three zones of us-west-2. */
export function awsLikeCatalog(): KwokInstanceType[] {
  return FAMILIES.flatMap((f, fi) =>
    SIZES.map(([size, cpu]) => {
      const onDemand = Number((cpu * f.perCpu).toFixed(4));
      return {
        name: `${f.name}.${size}`,
        architecture: f.arch,
        operatingSystems: ['linux'],
        // Canonical quantities: KWOK's instance-cpu/instance-memory labels are their String().
        resources: {
          cpu: String(cpu),
          memory: `${cpu * f.gibPerCpu}Gi`,
          'ephemeral-storage': '20Gi',
          pods: size === 'large' ? (f.name === 't3' ? '35' : '29') : '58',
        },
        offerings: ZONES.flatMap((zone, zi) =>
          (['on-demand', 'spot'] as const).map((ct) => ({
            Price: ct === 'on-demand' ? onDemand : Number((onDemand * (SPOT_SHARE[zi]! + fi * 0.01)).toFixed(5)),
            Available: true,
            // Every key here becomes a node label: the region too, as AWS nodes carry it.
            Requirements: [
              inReq('karpenter.sh/capacity-type', ct),
              inReq('topology.kubernetes.io/zone', zone),
              inReq('topology.kubernetes.io/region', REGION),
            ],
          })),
        ),
      };
    }),
  );
}

// ---------------------------------------------------------------------------------------------
// NodePools and KWOKNodeClasses.

export interface KwokNodePool {
  name: string;
  /** spec.template.metadata.labels */
  labels?: Record<string, string>;
  /** The KWOKNodeClass (default `default`). */
  nodeClass?: string;
  capacityTypes?: CapacityType[];
}

export function nodePoolObject(p: KwokNodePool) {
  return {
    apiVersion: 'karpenter.sh/v1',
    kind: 'NodePool',
    metadata: { name: p.name },
    spec: {
      template: {
        metadata: { labels: p.labels ?? {} },
        spec: {
          nodeClassRef: { group: 'karpenter.kwok.sh', kind: 'KWOKNodeClass', name: p.nodeClass ?? 'default' },
          requirements: nodePoolRequirements(p),
          expireAfter: 'Never',
        },
      },
      // Nodes never initialize without a kubelet, so nothing would be disrupted anyway: say it.
      disruption: { consolidationPolicy: 'WhenEmptyOrUnderutilized', consolidateAfter: 'Never' },
    },
  };
}

export function nodePoolRequirements(p: KwokNodePool): NodeSelectorRequirement[] {
  return [
    inReq('karpenter.sh/capacity-type', ...(p.capacityTypes ?? ['on-demand', 'spot'])),
    inReq('kubernetes.io/os', 'linux'),
  ];
}

export interface KarpenterOptions {
  catalog?: KwokInstanceType[];
  /** KWOKNodeClasses by name, with the delay before the Node's CREATE (`2s`: a booting kubelet). Default: `default`, no delay. */
  nodeClasses?: Record<string, { nodeRegistrationDelay?: string }>;
  /** Default: one pool `default` on the `default` class. */
  nodePools?: KwokNodePool[];
  /** Karpenter's LOG_LEVEL (default info; its log is in the control plane's directory). */
  logLevel?: string;
  startTimeoutMs?: number;
}

/** Karpenter's CRDs from the module version the controller was built from, and nothing else. */
export async function installKwokCRDs(cp: ControlPlane): Promise<void> {
  const dir = binary('karpenterKwokCrds');
  const files = readdirSync(dir)
    .filter((f) => f.endsWith('.yaml'))
    .sort()
    .map((f) => join(dir, f));
  await installCRDFiles(cp, files);
}

export class Karpenter extends KarpenterController {
  readonly catalog: KwokInstanceType[];
  readonly nodePools: KwokNodePool[];

  private constructor(
    cp: ControlPlane,
    catalog: KwokInstanceType[],
    nodePools: KwokNodePool[],
    processes: ControllerProcesses,
  ) {
    super(cp, processes);
    this.catalog = catalog;
    this.nodePools = nodePools;
  }

  /**
   * Creates the KWOKNodeClasses and NodePools, then starts kube-scheduler and Karpenter (the CRDs
   * must be installed: installKwokCRDs, or startKarpenterEnv does it all).
   */
  static async start(cp: ControlPlane, opts: KarpenterOptions = {}): Promise<Karpenter> {
    const catalog = opts.catalog ?? awsLikeCatalog();
    const nodePools = opts.nodePools ?? [{ name: 'default' }];
    const custom = cp.adminKubeConfig().makeApiClient(k8s.CustomObjectsApi);
    for (const [name, spec] of Object.entries(opts.nodeClasses ?? { default: {} })) {
      await custom.createClusterCustomObject({
        ...KWOK_NODECLASS_API,
        body: {
          apiVersion: 'karpenter.kwok.sh/v1alpha1',
          kind: 'KWOKNodeClass',
          metadata: { name },
          spec: spec.nodeRegistrationDelay ? { nodeRegistrationDelay: spec.nodeRegistrationDelay } : {},
        },
      });
    }
    for (const p of nodePools) await custom.createClusterCustomObject({ ...NODEPOOL_API, body: nodePoolObject(p) });

    const catalogPath = join(cp.dir, 'kwok-instance-types.json');
    writeFileSync(catalogPath, JSON.stringify(catalog, null, 1));
    const processes = await launchController(cp, {
      name: 'karpenter',
      bin: binary('karpenterKwok'),
      env: { INSTANCE_TYPES_FILE_PATH: catalogPath, LOG_LEVEL: opts.logLevel ?? 'info' },
      startTimeoutMs: opts.startTimeoutMs,
    });
    return new Karpenter(cp, catalog, nodePools, processes);
  }

  /** The catalog entry and offering index a launched node runs on (its type, capacity type and zone). */
  offeringOf(labels: Record<string, string>): { type: KwokInstanceType; offering: number } {
    const type = this.catalog.find((t) => t.name === labels['node.kubernetes.io/instance-type']);
    if (!type) throw new Error(`no instance type ${labels['node.kubernetes.io/instance-type']} in the catalog`);
    const offering = type.offerings.findIndex((o) => o.Requirements.every((r) => r.values?.[0] === labels[r.key]));
    if (offering < 0)
      throw new Error(
        `${type.name}: no offering for ${labels['karpenter.sh/capacity-type']} in ${labels['topology.kubernetes.io/zone']}`,
      );
    return { type, offering };
  }
}

/** The CPUs of a catalog's instance type, for pods pinned to it. */
export const vcpusIn =
  (catalog: KwokInstanceType[]) =>
  (type: string): number => {
    const entry = catalog.find((t) => t.name === type);
    if (!entry) throw new Error(`no instance type ${type} in the catalog`);
    return Number(entry.resources.cpu);
  };

/** Creates the pods at once (as a Deployment scaling up would), in `namespace`. */
export async function createPendingPods(
  admin: k8s.KubeConfig,
  pods: PendingPod[],
  catalog: KwokInstanceType[],
  namespace = 'default',
): Promise<void> {
  await createPods(admin, pods, vcpusIn(catalog), namespace);
}

// ---------------------------------------------------------------------------------------------
// The whole cluster: control plane, Karpenter's CRDs, the watcher's identity and certificates,
// Karpenter and kube-scheduler; startKarpenterWithWatcher adds the watcher (karpenterProvider auto: KWOK's
// keys, from the NodeClaims' nodeClassRef.group karpenter.kwok.sh) with both webhooks.

export interface KarpenterEnv extends ClusterEnv {
  karpenter: Karpenter;
}

export function startKarpenterEnv(
  opts: WatcherEnvOptions & { karpenter?: KarpenterOptions } = {},
): Promise<KarpenterEnv> {
  return startClusterEnvWith({ ...opts, installCRDs: installKwokCRDs }, (cp) => Karpenter.start(cp, opts.karpenter));
}

/** A Karpenter env with the watcher running (on KWOK's keys, found by auto) and both webhooks registered; `stop` ends both. */
export async function startKarpenterWithWatcher(
  opts: WatcherEnvOptions & { karpenter?: KarpenterOptions } = {},
): Promise<KarpenterEnv & { watcher: RunningWatcher; stop: () => Promise<void> }> {
  return withWatcher(await startKarpenterEnv(opts));
}

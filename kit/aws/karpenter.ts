// Real Karpenter with its AWS cloud provider (github.com/aws/karpenter-provider-aws/cmd/controller,
// unmodified), launching instances in a local EC2 (moto.ts) for pending pods, with a node maker
// (node-maker.ts) in place of the kubelet and the cloud controller, beside kube-scheduler. As on
// AWS, an overlay's price changes the launch: the provider's spot offering filter drops every spot
// offering priced above the cheapest on-demand one, and CreateFleet gets the overlay-adjusted
// prices as priorities (docs/aws.md).
//
// Everything that speaks an AWS API runs in a network namespace with only loopback (netns.ts):
// moto refuses to start anywhere else, so AWS and IMDS cannot be reached by construction.
// Karpenter's own settings are those of an isolated VPC: on-demand prices from its static table,
// no Pricing API, no SQS queue, the cluster endpoint given (no EKS lookup for it).
import { readdirSync } from 'node:fs';
import { join } from 'node:path';
import * as k8s from '@kubernetes/client-node';
import { DescribeInstanceTypesCommand, EC2Client, type _InstanceType } from '@aws-sdk/client-ec2';
import { binary, type ControlPlane } from '../control-plane.ts';
import { installCRDFiles } from '../karpenter-crds.ts';
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
  usageOf,
} from '../karpenter-controller.ts';
import { until } from '../fleet.ts';
import { sleep } from '../process.ts';
import { startClusterEnvWith, withWatcher, type ClusterEnv, type WatcherEnvOptions } from '../watcher-env.ts';
import type { RunningWatcher } from '../../src/commands/serve.ts';
import { type Moto, REGION, type SpotCatalog, startMoto, ZONES } from './moto.ts';
import { type NodeMaker, startNodeMaker } from './node-maker.ts';
import { staticOnDemandPrices } from './prices.ts';

export { REGION, ZONES } from './moto.ts';
/** The one AWS provider version the proxy can assemble here (v1.15.x: some of its modules are refused). */
export const AWS_KARPENTER_VERSION = 'v1.14.3' as const;
export const EC2_NODECLASS_API = { group: 'karpenter.k8s.aws', version: 'v1', plural: 'ec2nodeclasses' };
export const CLUSTER_NAME = 'veneer-aws';
/** In the control plane's --service-cluster-ip-range: Karpenter reads kube-dns's ClusterIP for the node's DNS. */
const KUBE_DNS_IP = '10.0.0.10';

/** The families the kit's region offers, in every size Karpenter's price table knows: Veneer's usual ones. */
export const KIT_FAMILIES = ['m5', 'c6i', 'r6i', 't3'];
/** The types a burst of pods cycles through (burstPods): every fifth pod spot, the first of them an m5.xlarge. */
export const AWS_BURST_TYPES = ['m5.large', 'c6i.large', 'c6i.xlarge', 'r6i.2xlarge', 'm5.xlarge', 't3.large'];
/** Spot as a share of on-demand, per zone, as the KWOK kit's catalog has it. */
const SPOT_SHARE = [0.38, 0.35, 0.41];

/**
 * The local EC2's offer: every size of `families`, priced on-demand from the controller's own static
 * table (so EC2 and Karpenter agree on list prices) and spot at a share of it per zone.
 */
export function kitCatalog(
  families: readonly string[] = KIT_FAMILIES,
  share: readonly number[] = SPOT_SHARE,
): SpotCatalog {
  const onDemand = [...staticOnDemandPrices(REGION)].filter(([type]) => families.includes(type.split('.')[0]!));
  return {
    offered: onDemand.map(([type]) => type),
    prices: Object.fromEntries(
      onDemand.map(([type, price]) => [
        type,
        { onDemand: price, spot: Object.fromEntries(ZONES.map((z, i) => [z, Number((price * share[i]!).toFixed(5))])) },
      ]),
    ),
  };
}

export interface AwsNodePool {
  name: string;
  /** spec.template.metadata.labels */
  labels?: Record<string, string>;
  capacityTypes?: CapacityType[];
  /** Narrows `node.kubernetes.io/instance-type` (default: every type the EC2NodeClass allows). */
  instanceTypes?: string[];
  /** spec.disruption (default NO_DISRUPTION: Karpenter replaces and deletes nothing it launched). */
  disruption?: NodePoolDisruption;
  /** spec.template.spec.expireAfter (default `Never`); part of the NodePool's hash, so changing it drifts. */
  expireAfter?: string;
  /** spec.limits: `cpu`, `memory`, `nodes`... as Kubernetes quantities. */
  limits?: Record<string, string>;
}

/** A NodePool's spec.disruption, as karpenter.sh/v1 has it. */
export interface NodePoolDisruption {
  consolidationPolicy: 'WhenEmpty' | 'WhenEmptyOrUnderutilized' | 'Balanced';
  /** A duration (`10s`, `5m`) or `Never`. */
  consolidateAfter: string;
  budgets?: {
    nodes: string;
    reasons?: ('Underutilized' | 'Empty' | 'Drifted')[];
    schedule?: string;
    duration?: string;
  }[];
}

/**
 * What a test that is not about disruption wants: nothing Karpenter launched is replaced or deleted
 * while it runs, so what it counts stays put. A test about consolidation or drift opts in.
 */
export const NO_DISRUPTION: NodePoolDisruption = {
  consolidationPolicy: 'WhenEmpty',
  consolidateAfter: 'Never',
  budgets: [{ nodes: '0' }],
};

/** Consolidation and drift as a test about them wants them: every node may go, 5 s after it is consolidatable. */
export const OPEN_DISRUPTION: NodePoolDisruption = {
  consolidationPolicy: 'WhenEmptyOrUnderutilized',
  consolidateAfter: '5s',
  budgets: [{ nodes: '100%' }],
};

export function awsNodePoolObject(p: AwsNodePool) {
  const requirements: NodeSelectorRequirement[] = [
    inReq('karpenter.sh/capacity-type', ...(p.capacityTypes ?? ['on-demand', 'spot'])),
    inReq('kubernetes.io/os', 'linux'),
    inReq('kubernetes.io/arch', 'amd64'),
    ...(p.instanceTypes ? [inReq('node.kubernetes.io/instance-type', ...p.instanceTypes)] : []),
  ];
  return {
    apiVersion: 'karpenter.sh/v1',
    kind: 'NodePool',
    metadata: { name: p.name },
    spec: {
      template: {
        metadata: { labels: p.labels ?? {} },
        spec: {
          nodeClassRef: { group: 'karpenter.k8s.aws', kind: 'EC2NodeClass', name: 'default' },
          requirements,
          expireAfter: p.expireAfter ?? 'Never',
        },
      },
      disruption: p.disruption ?? NO_DISRUPTION,
      ...(p.limits ? { limits: p.limits } : {}),
    },
  };
}

export interface AwsKarpenterOptions {
  /** Default: one pool `default` allowing spot and on-demand. */
  nodePools?: AwsNodePool[];
  /** EC2's prices (default kitCatalog()). */
  catalog?: SpotCatalog;
  /** The node maker's delay between a NodeClaim's providerID and its Node's CREATE (a booting instance). */
  bootDelayMs?: number;
  logLevel?: string;
}

/** Installs the AWS controller's CRDs (from its own module version) and nothing else. */
export async function installAwsCRDs(cp: ControlPlane): Promise<void> {
  const dir = binary('karpenterAwsCrds');
  await installCRDFiles(
    cp,
    readdirSync(dir)
      .filter((f) => f.endsWith('.yaml'))
      .sort()
      .map((f) => join(dir, f)),
  );
}

export class AwsKarpenter extends KarpenterController {
  readonly moto: Moto;
  readonly nodeMaker: NodeMaker;
  readonly nodePools: AwsNodePool[];
  /** EC2's prices now (setCatalog changes them). */
  catalog: SpotCatalog;
  /** How long each step of start() took, in ms. */
  readonly startup: Record<string, number>;
  /** vCPUs of each instance type the local EC2 offers, for pods pinned to one. */
  readonly vcpus: Map<string, number>;

  private constructor(
    cp: ControlPlane,
    processes: ControllerProcesses,
    parts: {
      moto: Moto;
      nodeMaker: NodeMaker;
      nodePools: AwsNodePool[];
      catalog: SpotCatalog;
      vcpus: Map<string, number>;
      startup: Record<string, number>;
    },
  ) {
    super(cp, processes);
    this.startup = parts.startup;
    this.catalog = parts.catalog;
    this.moto = parts.moto;
    this.nodeMaker = parts.nodeMaker;
    this.nodePools = parts.nodePools;
    this.vcpus = parts.vcpus;
  }

  /** Seeds the local EC2, creates the EC2NodeClass and NodePools, then starts the node maker, kube-scheduler and Karpenter (the CRDs must be installed). */
  static async start(cp: ControlPlane, opts: AwsKarpenterOptions = {}): Promise<AwsKarpenter> {
    const startup: Record<string, number> = {};
    let mark = Date.now();
    const step = (name: string) => {
      startup[name] = Date.now() - mark;
      mark = Date.now();
    };
    const catalog = opts.catalog ?? kitCatalog();
    const moto = await startMoto({ dir: cp.dir, cluster: CLUSTER_NAME, catalog, python: binary('motoPython') });
    cp.onStop(() => moto.stop());
    step('moto');
    const admin = cp.adminKubeConfig();
    await admin.makeApiClient(k8s.CoreV1Api).createNamespacedService({
      namespace: 'kube-system',
      body: {
        metadata: { name: 'kube-dns' },
        spec: { clusterIP: KUBE_DNS_IP, ports: [{ name: 'dns', port: 53, protocol: 'UDP' }] },
      },
    });
    const custom = admin.makeApiClient(k8s.CustomObjectsApi);
    await custom.createClusterCustomObject({
      ...EC2_NODECLASS_API,
      body: {
        apiVersion: 'karpenter.k8s.aws/v1',
        kind: 'EC2NodeClass',
        metadata: { name: 'default' },
        spec: {
          role: moto.seed.nodeRoleName,
          // moto has no SSM parameters for AMI aliases: the image is selected by id.
          amiFamily: 'AL2023',
          amiSelectorTerms: [{ id: moto.seed.amiId }],
          subnetSelectorTerms: [{ tags: { 'karpenter.sh/discovery': CLUSTER_NAME } }],
          securityGroupSelectorTerms: [{ tags: { 'karpenter.sh/discovery': CLUSTER_NAME } }],
        },
      },
    });
    const nodePools = opts.nodePools ?? [{ name: 'default' }];
    for (const p of nodePools) await custom.createClusterCustomObject({ ...NODEPOOL_API, body: awsNodePoolObject(p) });
    step('objects');
    const nodeMaker = await startNodeMaker(cp, {
      ec2Endpoint: moto.endpoint,
      bootDelayMs: opts.bootDelayMs ?? 0,
      region: REGION,
    });
    const processes = await launchController(cp, {
      name: 'karpenter-aws',
      bin: binary('karpenterAws'),
      env: {
        ...moto.env(),
        CLUSTER_NAME,
        CLUSTER_ENDPOINT: cp.server,
        ISOLATED_VPC: 'true',
        LOG_LEVEL: opts.logLevel ?? 'info',
      },
    });
    step('karpenter');
    const karpenter = new AwsKarpenter(cp, processes, {
      moto,
      nodeMaker,
      nodePools,
      catalog,
      vcpus: await instanceVcpus(moto),
      startup,
    });
    await karpenter.waitForNodeClassReady();
    step('nodeclass');
    return karpenter;
  }

  /** Karpenter launches nothing until its EC2NodeClass has resolved subnets, groups, the AMI and the instance profile. */
  async waitForNodeClassReady(timeoutMs = 60_000): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const nc = (await this.custom.getClusterCustomObject({ ...EC2_NODECLASS_API, name: 'default' })) as {
        status?: { conditions?: { type: string; status: string; message?: string }[] };
      };
      const ready = nc.status?.conditions?.find((c) => c.type === 'Ready');
      if (ready?.status === 'True') return;
      if (!this.controller.running) throw new Error(`karpenter-aws exited:\n${this.controller.logTail()}`);
      if (Date.now() > deadline)
        throw new Error(
          `EC2NodeClass default not Ready after ${timeoutMs} ms (${ready?.message ?? 'no Ready condition'}):\n${this.controller.logTail()}`,
        );
      await sleep(250);
    }
  }

  /** Creates the pods at once, each pinned type's CPU request as the local EC2 describes the type. */
  async createPods(pods: PendingPod[], namespace = 'default'): Promise<void> {
    await createPods(
      this.cp.adminKubeConfig(),
      pods,
      (type) => {
        const n = this.vcpus.get(type);
        if (n === undefined) throw new Error(`the local EC2 offers no instance type ${type}`);
        return n;
      },
      namespace,
    );
  }

  /** EC2's prices from the next DescribeSpotPriceHistory and CreateFleet on (Karpenter re-reads spot prices on its own schedule). */
  setCatalog(catalog: SpotCatalog): void {
    this.moto.setCatalog(catalog);
    this.catalog = catalog;
  }

  override usage() {
    return { ...super.usage(), moto: usageOf(this.moto.process.pid) };
  }
}

/** vCPUs per instance type, from the local EC2's DescribeInstanceTypes. */
async function instanceVcpus(moto: Moto): Promise<Map<string, number>> {
  const ec2 = new EC2Client(moto.clientConfig());
  const vcpus = new Map<string, number>();
  let NextToken: string | undefined;
  do {
    const page = await ec2.send(new DescribeInstanceTypesCommand({ NextToken }));
    for (const t of page.InstanceTypes ?? [])
      if (t.InstanceType && t.VCpuInfo?.DefaultVCpus)
        vcpus.set(t.InstanceType as _InstanceType, t.VCpuInfo.DefaultVCpus);
    NextToken = page.NextToken;
  } while (NextToken);
  ec2.destroy();
  return vcpus;
}

// ---------------------------------------------------------------------------------------------
// The whole cluster: control plane, the AWS CRDs, the watcher's identity and certificates, the
// local EC2, Karpenter, kube-scheduler and the node maker; startAwsKarpenterWithWatcher adds the
// watcher with both webhooks.

export interface AwsKarpenterEnv extends ClusterEnv {
  karpenter: AwsKarpenter;
}

export function startAwsKarpenterEnv(
  opts: WatcherEnvOptions & { karpenter?: AwsKarpenterOptions } = {},
): Promise<AwsKarpenterEnv> {
  return startClusterEnvWith({ ...opts, installCRDs: installAwsCRDs }, (cp) => AwsKarpenter.start(cp, opts.karpenter));
}

/** An AWS Karpenter env with the watcher running and both webhooks registered; `stop` ends both. */
export async function startAwsKarpenterWithWatcher(
  opts: WatcherEnvOptions & { karpenter?: AwsKarpenterOptions; watcherFlags?: Record<string, string> } = {},
): Promise<AwsKarpenterEnv & { watcher: RunningWatcher; stop: () => Promise<void> }> {
  const env = await startAwsKarpenterEnv(opts);
  // The watcher reads prices as this Karpenter does (ISOLATED_VPC: its static on-demand table, spot
  // prices and offerings from EC2), from the local EC2: it runs in this process, whose AWS client
  // finds the endpoint (AWS_ENDPOINT_URL) and the keys (the SDK's credential chain) in the environment.
  Object.assign(process.env, env.karpenter.moto.env());
  const withIt = await withWatcher(env, {
    '--prices-source': 'isolated',
    '--prices-region': REGION,
    ...opts.watcherFlags,
  });
  // Nodes decided before the first reading would get no spot prices: launches wait for it.
  await until(
    'the watcher read spot prices from the local EC2',
    async () =>
      /^veneer_nodewatcher_price_refreshes_total\{kind="spot",result="ok"\} [1-9]/m.test(
        await withIt.watcher.metrics.registry.metrics(),
      ),
    30_000,
  );
  return withIt;
}

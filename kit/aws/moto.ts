// The local EC2 for running Karpenter's real AWS provider offline: moto's server (PyPI moto[server],
// pinned in moto/requirements.txt) behind a plug-in that makes the choices moto does not make as
// EC2 documents them (moto/server.py: spot prices from a catalog the test sets; CreateFleet by
// allocation strategy, priority and price across all launch-template configs; a log of every
// CreateFleet), seeded with what Karpenter discovers (moto/seed.py). It dies with the test
// (kit/process.ts) and refuses to start outside a loopback-only network namespace (netns.ts).
import { existsSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { assertLoopbackOnly } from './netns.ts';
import { binary } from '../control-plane.ts';
import { freePort, ManagedProcess, sleep } from '../process.ts';

export const REGION = 'us-east-1';
export const ZONES = ['us-east-1a', 'us-east-1b', 'us-east-1c'] as const;
/** The kit's kube-apiserver --service-cluster-ip-range: the EKS cluster reports the same. */
const SERVICE_CIDR = '10.0.0.0/24';
const SERVER = join(fileURLToPath(new URL('.', import.meta.url)), 'moto', 'server.py');
const START_TIMEOUT_MS = 60_000;

export type CapacityType = 'on-demand' | 'spot';

/** EC2's prices of one instance type, USD an hour. */
export interface InstancePrices {
  /**
   * The on-demand list price, by which `lowest-price` ranks. Karpenter (ISOLATED_VPC) prices
   * on-demand from its own static table, not from this: keep the two equal unless a test means
   * EC2 and Karpenter to disagree.
   */
  onDemand: number;
  /** Spot price per zone, as DescribeSpotPriceHistory reports it. A zone left out has no spot pool. */
  spot?: Record<string, number>;
}

/** One capacity pool, as EC2 reports capacity errors. */
export interface CapacityPool {
  instanceType: string;
  zone: string;
  capacityType: CapacityType;
}

export interface SpotCatalog {
  /**
   * Per instance type. A type left out has no spot pool and ranks after the priced ones in
   * `lowest-price`. Karpenter takes a spot price history without any record for a failure: price at
   * least one spot pool.
   */
  prices: Record<string, InstancePrices>;
  /**
   * The instance types offered (DescribeInstanceTypes and its offerings; a type asked for by name is
   * still described). Default: every type moto knows, some 800, which Karpenter computes on every launch.
   */
  offered?: string[];
  /** Pools whose launches fail with InsufficientInstanceCapacity (CreateFleet moves on to the next pool). */
  insufficientCapacity?: CapacityPool[];
}

/** What moto/seed.py created. */
export interface MotoSeed {
  region: string;
  vpcId: string;
  /** Subnet id per zone, each tagged karpenter.sh/discovery=<cluster>. */
  subnets: Record<string, string>;
  securityGroupId: string;
  /** The IAM role an EC2NodeClass names (Karpenter creates the instance profile). */
  nodeRoleName: string;
  nodeRoleArn: string;
  /** An AL2023 x86_64 image of moto's defaults: select it by id (moto resolves no AMI aliases). */
  amiId: string;
  amiName: string;
  /** The EKS cluster as moto describes it (its CA is moto's random string, not a certificate). */
  cluster: { name: string; arn: string; endpoint: string; certificateAuthority: string; serviceIpv4Cidr: string };
}

export interface FleetOverride {
  instanceType: string;
  subnetId: string | null;
  availabilityZone: string | null;
  priority: number | null;
  imageId: string | null;
}

/** One CreateFleet as the plug-in logged it: what Karpenter asked, and what was launched. */
export interface FleetRequest {
  fleetId: string;
  type: string;
  defaultTargetCapacityType: CapacityType | null;
  totalTargetCapacity: number;
  onDemandAllocationStrategy: string | null;
  spotAllocationStrategy: string | null;
  launchTemplateConfigs: {
    launchTemplateId: string;
    launchTemplateName: string | null;
    version: string | null;
    overrides: FleetOverride[];
  }[];
  launched: {
    instanceId: string;
    instanceType: string;
    zone: string;
    subnetId: string | null;
    capacityType: CapacityType;
  }[];
  /** The InsufficientInstanceCapacity pools tried before the one launched (or all of them, if none was). */
  errors: {
    instanceType: string;
    zone: string | null;
    subnetId: string | null;
    capacityType: CapacityType;
    code: string;
  }[];
}

export interface MotoOptions {
  /** The moto log, the catalog, the fleet log and the seed go here. */
  dir: string;
  /** Tagged as karpenter.sh/discovery on what is seeded; the EKS cluster's name. */
  cluster: string;
  catalog: SpotCatalog;
  /** The python of a venv with moto/requirements.txt installed (default: the one scripts/control-plane.sh builds). */
  python?: string;
}

export interface Moto {
  /** http://127.0.0.1:PORT */
  endpoint: string;
  seed: MotoSeed;
  process: ManagedProcess;
  /** Takes effect on the next DescribeSpotPriceHistory and CreateFleet. */
  setCatalog(catalog: SpotCatalog): void;
  fleetRequests(): FleetRequest[];
  /** The variables an AWS client (SDK, Karpenter) needs to reach this EC2 and nothing else. */
  env(): Record<string, string>;
  /** The same for an AWS SDK client made in this process. */
  clientConfig(): { endpoint: string; region: string; credentials: { accessKeyId: string; secretAccessKey: string } };
  stop(): Promise<void>;
}

const CREDENTIALS = { accessKeyId: 'AKIAMOTOLOCALONLY000', secretAccessKey: 'moto-local-only' };

function awsEnv(endpoint: string): Record<string, string> {
  return {
    AWS_ENDPOINT_URL: endpoint,
    AWS_ACCESS_KEY_ID: CREDENTIALS.accessKeyId,
    AWS_SECRET_ACCESS_KEY: CREDENTIALS.secretAccessKey,
    AWS_REGION: REGION,
    // boto3 reads only this one.
    AWS_DEFAULT_REGION: REGION,
    AWS_EC2_METADATA_DISABLED: 'true',
  };
}

function writeAtomically(path: string, text: string): void {
  writeFileSync(`${path}.tmp`, text);
  renameSync(`${path}.tmp`, path);
}

export async function startMoto(opts: MotoOptions): Promise<Moto> {
  assertLoopbackOnly();
  const python = opts.python ?? binary('motoPython');
  const port = await freePort();
  const endpoint = `http://127.0.0.1:${port}`;
  const catalogPath = join(opts.dir, 'ec2-catalog.json');
  const fleetLog = join(opts.dir, 'create-fleet.jsonl');
  const seedPath = join(opts.dir, 'moto-seed.json');
  const setCatalog = (catalog: SpotCatalog) => writeAtomically(catalogPath, JSON.stringify(catalog));
  setCatalog(opts.catalog);
  // None of this process's own AWS settings (a profile, real keys) reaches moto's seed client;
  // no __pycache__ is left in the repo beside server.py.
  const inherited = Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith('AWS_')));
  const proc = new ManagedProcess(
    'moto',
    python,
    [
      SERVER,
      '--port',
      String(port),
      '--catalog',
      catalogPath,
      '--fleet-log',
      fleetLog,
      '--cluster',
      opts.cluster,
      '--service-cidr',
      SERVICE_CIDR,
      '--seed-out',
      seedPath,
    ],
    join(opts.dir, 'moto.log'),
    { ...inherited, ...awsEnv(endpoint), PYTHONUNBUFFERED: '1', PYTHONDONTWRITEBYTECODE: '1' },
  );
  proc.start();
  const deadline = Date.now() + START_TIMEOUT_MS;
  while (!existsSync(seedPath)) {
    if (!proc.running) throw new Error(`moto exited before it was seeded:\n${proc.logTail()}`);
    if (Date.now() > deadline) {
      await proc.stop();
      throw new Error(`moto was not seeded within ${START_TIMEOUT_MS} ms:\n${proc.logTail()}`);
    }
    await sleep(50);
  }
  const seed = JSON.parse(readFileSync(seedPath, 'utf8')) as MotoSeed;
  return {
    endpoint,
    seed,
    process: proc,
    setCatalog,
    fleetRequests: () =>
      existsSync(fleetLog)
        ? readFileSync(fleetLog, 'utf8')
            .split('\n')
            .filter((l) => l !== '')
            .map((l) => JSON.parse(l) as FleetRequest)
        : [],
    env: () => awsEnv(endpoint),
    clientConfig: () => ({ endpoint, region: REGION, credentials: { ...CREDENTIALS } }),
    stop: () => proc.stop(),
  };
}

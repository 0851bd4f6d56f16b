// The node maker's reads of the local EC2, with AWS's own client: new instances in batches, the
// states of those it tracks, and instance types for the kubelet's capacity.
import {
  type _InstanceType,
  DescribeInstancesCommand,
  type DescribeInstancesCommandOutput,
  DescribeInstanceTypesCommand,
  EC2Client,
  type Instance,
  type InstanceTypeInfo,
} from '@aws-sdk/client-ec2';
import { assertLoopbackOnly } from '../netns.ts';
import type { Tasks } from './tasks.ts';

/** `aws:///us-east-1a/i-0123` -> i-0123 (undefined for anything else). */
export function instanceIdOf(providerID: string): string | undefined {
  return /^aws:\/\/\/[^/]*\/(i-[0-9a-zA-Z]+)$/.exec(providerID)?.[1];
}

export const alive = (inst: Instance) => inst.State?.Name === 'pending' || inst.State?.Name === 'running';

export interface Resources {
  capacity: Record<string, string>;
  allocatable: Record<string, string>;
}

/** Capacity and allocatable as the kubelet reports them on an EKS AMI, from the instance type (Karpenter's own formulas). */
export function resourcesFromInstanceType(info: InstanceTypeInfo | undefined): Resources {
  const cpu = info?.VCpuInfo?.DefaultVCpus ?? 2;
  const mib = info?.MemoryInfo?.SizeInMiB ?? 8192;
  const enis = info?.NetworkInfo?.MaximumNetworkInterfaces;
  const ips = info?.NetworkInfo?.Ipv4AddressesPerInterface;
  const pods = enis && ips ? enis * (ips - 1) + 2 : 110;
  // kube-reserved CPU: 6% of the first core, 1% of the second, 0.5% of the next two, 0.25% above.
  const reservedMilli = [60, 10, 5, 5].slice(0, cpu).reduce((a, b) => a + b, 0) + Math.max(0, cpu - 4) * 2.5;
  // The hypervisor keeps 7.5% (VM_MEMORY_OVERHEAD_PERCENT); kube-reserved 11 MiB a pod + 255 MiB; eviction at 100 MiB.
  const memMiB = Math.floor(mib * (1 - 0.075));
  const storage = 20 * 1024 ** 3;
  return {
    capacity: {
      cpu: String(cpu),
      'ephemeral-storage': `${storage / 1024}Ki`,
      'hugepages-1Gi': '0',
      'hugepages-2Mi': '0',
      memory: `${memMiB * 1024}Ki`,
      pods: String(pods),
    },
    allocatable: {
      cpu: `${Math.floor(cpu * 1000 - reservedMilli)}m`,
      'ephemeral-storage': String(Math.floor(storage * 0.9) - 1024 ** 3),
      'hugepages-1Gi': '0',
      'hugepages-2Mi': '0',
      memory: `${(memMiB - 11 * pods - 255 - 100) * 1024}Ki`,
      pods: String(pods),
    },
  };
}

export interface InstanceReaderOptions {
  endpoint: string;
  region: string;
  tasks: Tasks;
  /** The instances of one batch, as found (an id missing from `found` was not listed yet). */
  described(ids: string[], found: Map<string, Instance>): void;
}

export class InstanceReader {
  private readonly ec2: EC2Client;
  private readonly o: InstanceReaderOptions;
  private readonly instanceTypes = new Map<string, Promise<InstanceTypeInfo | undefined>>();
  private queue = new Set<string>();
  private timer: NodeJS.Timeout | undefined;
  private describing = false;
  calls = 0;

  constructor(opts: InstanceReaderOptions) {
    const host = new URL(opts.endpoint).hostname;
    if (!['127.0.0.1', 'localhost', '[::1]'].includes(host))
      throw new Error(`node maker: the EC2 endpoint ${opts.endpoint} is not on loopback`);
    // The network rule: anything that speaks an AWS API runs where only loopback exists, so that no
    // request can reach AWS or the instance metadata service.
    assertLoopbackOnly();
    process.env.AWS_EC2_METADATA_DISABLED = 'true';
    this.o = opts;
    this.ec2 = new EC2Client({
      endpoint: opts.endpoint,
      region: opts.region,
      // moto takes any keys; explicit ones keep the SDK from looking for credentials anywhere.
      credentials: { accessKeyId: 'testing', secretAccessKey: 'testing' },
      maxAttempts: 3,
      // The SDK waits forever by default: one request moto never answers (it happened under CI's
      // load) would hold every Node waiting on it. Failing it lets the caller's retry go on.
      requestHandler: { connectionTimeout: 3_000, requestTimeout: 15_000, throwOnRequestTimeout: true },
    });
  }

  /**
   * DescribeInstances of these ids, 200 a call; by InstanceIds (moto answers that faster than the
   * instance-id filter), by filter if one of them is unknown (EC2 then fails the whole call).
   */
  async describe(ids: string[]): Promise<Map<string, Instance>> {
    const found = new Map<string, Instance>();
    for (let i = 0; i < ids.length; i += 200) {
      const chunk = ids.slice(i, i + 200);
      let token: string | undefined;
      let byFilter = false;
      do {
        this.calls++;
        let out: DescribeInstancesCommandOutput;
        try {
          out = await this.ec2.send(
            new DescribeInstancesCommand(
              byFilter
                ? { Filters: [{ Name: 'instance-id', Values: chunk }], NextToken: token }
                : { InstanceIds: chunk, NextToken: token },
            ),
          );
        } catch (err) {
          if (byFilter || (err as { name?: string }).name !== 'InvalidInstanceID.NotFound') throw err;
          byFilter = true;
          token = undefined;
          continue;
        }
        for (const r of out.Reservations ?? [])
          for (const inst of r.Instances ?? []) if (inst.InstanceId) found.set(inst.InstanceId, inst);
        token = out.NextToken;
      } while (token);
    }
    return found;
  }

  /**
   * New providerIDs are read in as few calls as can be: one DescribeInstances in flight, taking every
   * id queued meanwhile (a burst of launches): moto scans every instance it holds on each call. A
   * batch that fails is queued again a second later.
   */
  enqueue(id: string): void {
    this.queue.add(id);
    if (this.timer || this.describing) return;
    this.timer = setTimeout(() => this.pump(), 20);
  }

  private pump(): void {
    this.timer = undefined;
    const { tasks } = this.o;
    if (tasks.stopped || this.describing || this.queue.size === 0) return;
    const ids = [...this.queue];
    this.queue = new Set();
    this.describing = true;
    tasks.track(
      this.describe(ids)
        .then(
          (found) => this.o.described(ids, found),
          (err) => {
            tasks.fail('DescribeInstances', err);
            for (const id of ids) tasks.after(1000, () => this.enqueue(id));
          },
        )
        .finally(() => {
          this.describing = false;
          this.pump();
        }),
    );
  }

  /** The instances that are neither pending nor running (moto answers that in milliseconds). */
  async down(): Promise<Map<string, Instance>> {
    this.calls++;
    const down = new Map<string, Instance>();
    let token: string | undefined;
    do {
      const out = await this.ec2.send(
        new DescribeInstancesCommand({
          Filters: [{ Name: 'instance-state-name', Values: ['shutting-down', 'terminated', 'stopping', 'stopped'] }],
          NextToken: token,
        }),
      );
      for (const r of out.Reservations ?? [])
        for (const inst of r.Instances ?? []) if (inst.InstanceId) down.set(inst.InstanceId, inst);
      token = out.NextToken;
    } while (token);
    return down;
  }

  instanceType(name: string | undefined): Promise<InstanceTypeInfo | undefined> {
    if (!name) return Promise.resolve(undefined);
    let info = this.instanceTypes.get(name);
    if (!info) {
      info = this.ec2
        .send(new DescribeInstanceTypesCommand({ InstanceTypes: [name as _InstanceType] }))
        .then((o) => o.InstanceTypes?.[0]);
      info.catch(() => this.instanceTypes.delete(name));
      this.instanceTypes.set(name, info);
    }
    return info;
  }

  destroy(): void {
    if (this.timer) clearTimeout(this.timer);
    this.ec2.destroy();
  }
}

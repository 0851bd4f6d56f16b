// The node maker (kit/aws/node-maker.ts) against a real kube-apiserver and a local EC2 (moto): a
// NodeClaim with the providerID of a launched instance gets its Node after the boot delay, named
// and labelled as on EKS, about as big as a real one, Ready, with fresh heartbeats; a burst of
// NodeClaims is kept up with; a terminated instance's Node goes, a deleted NodeClaim's does not.
// Everything that speaks an AWS API runs in a network namespace that has only loopback: this file
// runs itself again inside one (kit/netns.ts) and the body below runs there.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { runInOwnNetworkNamespace, POD_IP } from '../../kit/netns.ts';

if (process.env.VENEER_POD_IP !== POD_IP) {
  process.exitCode = await runInOwnNetworkNamespace(import.meta.filename);
} else {
  await inNamespace();
}

async function inNamespace(): Promise<void> {
  const { default: t } = await import('tap');
  const k8s = await import('@kubernetes/client-node');
  const { DescribeImagesCommand, EC2Client, RunInstancesCommand, TerminateInstancesCommand } = await import(
    '@aws-sdk/client-ec2'
  );
  const { ControlPlane } = await import('../../kit/control-plane.ts');
  const { installAwsCRDs } = await import('../../kit/aws/karpenter.ts');
  const { sleep } = await import('../../kit/process.ts');
  const { startMoto } = await import('../../kit/aws/moto.ts');
  const { NODE_MAKER_USER, startNodeMaker } = await import('../../kit/aws/node-maker.ts');
  const { assertInOwnNetworkNamespace } = await import('../../kit/netns.ts');
  type V1Node = import('@kubernetes/client-node').V1Node;

  assertInOwnNetworkNamespace();
  process.env.AWS_EC2_METADATA_DISABLED = 'true';
  const BOOT_DELAY_MS = 3000;
  const HEARTBEAT_MS = 2000;
  // Small by default: test/aws/launches.test.ts bursts 100 launches through the node maker already.
  const BURST = Number(process.env.VENEER_NODE_MAKER_BURST ?? 25);
  const CREATE_CONCURRENCY = process.env.VENEER_NODE_MAKER_CONCURRENCY
    ? Number(process.env.VENEER_NODE_MAKER_CONCURRENCY)
    : undefined;
  const figures: string[] = [];
  const ms = (values: number[]) => {
    const s = [...values].sort((a, b) => a - b);
    const q = (p: number) => s[Math.min(s.length - 1, Math.floor(p * s.length))] ?? NaN;
    return `p50 ${q(0.5)} ms, p95 ${q(0.95)} ms, max ${s.at(-1)} ms`;
  };

  // The local EC2 of the AWS kit (seeded; no spot prices needed here).
  const motoDir = mkdtempSync(join(tmpdir(), 'veneer-node-maker-moto-'));
  const moto = await startMoto({ dir: motoDir, cluster: 'veneer-node-maker', catalog: { prices: {} } });
  const endpoint = moto.endpoint;

  const cp = await ControlPlane.start({
    auditPolicy: [
      'apiVersion: audit.k8s.io/v1',
      'kind: Policy',
      'rules:',
      '- level: Metadata',
      '  omitStages: [RequestReceived]',
      '  resources: [{group: "", resources: [nodes, nodes/status]}]',
      '- level: None',
    ].join('\n'),
  });
  const ec2 = new EC2Client(moto.clientConfig());
  t.teardown(async () => {
    if (!t.passing()) console.error(`--- moto's log ends:\n${moto.process.logTail(40)}`);
    await cp.stop();
    ec2.destroy();
    await moto.stop();
    rmSync(motoDir, { recursive: true, force: true });
    console.error(`node maker figures:\n  ${figures.join('\n  ')}`);
  });

  // The AWS controller's own CRDs: its NodeClaim has startupTaints, capacity and allocatable.
  await installAwsCRDs(cp);

  const admin = cp.adminKubeConfig();
  const core = admin.makeApiClient(k8s.CoreV1Api);
  const custom = admin.makeApiClient(k8s.CustomObjectsApi);
  const NODECLAIMS = { group: 'karpenter.sh', version: 'v1', plural: 'nodeclaims' };
  const mergePatch = k8s.setHeaderOptions('Content-Type', k8s.PatchStrategy.MergePatch);
  // A short heartbeat for the first checks; then a node maker started again, with the default one.
  let maker = await startNodeMaker(cp, {
    ec2Endpoint: endpoint,
    bootDelayMs: BOOT_DELAY_MS,
    heartbeatMs: HEARTBEAT_MS,
    instancePollMs: 1000,
  });

  const image = async (architecture: string) => {
    const out = await ec2.send(
      new DescribeImagesCommand({ Filters: [{ Name: 'architecture', Values: [architecture] }] }),
    );
    const id = out.Images?.[0]?.ImageId;
    if (!id) throw new Error(`moto has no ${architecture} image`);
    return id;
  };
  const launch = async (
    instanceType: string,
    zone: string,
    opts: { count?: number; arm?: boolean; spot?: boolean } = {},
  ) => {
    const out = await ec2.send(
      new RunInstancesCommand({
        ImageId: await image(opts.arm ? 'arm64' : 'x86_64'),
        InstanceType: instanceType as never,
        MinCount: opts.count ?? 1,
        MaxCount: opts.count ?? 1,
        SubnetId: moto.seed.subnets[zone],
        ...(opts.spot ? { InstanceMarketOptions: { MarketType: 'spot' } } : {}),
      }),
    );
    return out.Instances ?? [];
  };
  /** A NodeClaim as Karpenter writes it: created, then its providerID (and capacity) in status. */
  const nodeClaim = async (
    name: string,
    inst: { InstanceId?: string; InstanceType?: string; Placement?: { AvailabilityZone?: string } },
    extra: { spec?: object; status?: object; labels?: Record<string, string> } = {},
  ) => {
    const zone = inst.Placement?.AvailabilityZone ?? 'us-east-1a';
    const labels = {
      'karpenter.sh/nodepool': 'default',
      'karpenter.sh/capacity-type': 'on-demand',
      'karpenter.k8s.aws/ec2nodeclass': 'default',
      'node.kubernetes.io/instance-type': inst.InstanceType ?? '',
      'topology.kubernetes.io/zone': zone,
      ...extra.labels,
    };
    await custom.createClusterCustomObject({
      ...NODECLAIMS,
      body: {
        apiVersion: 'karpenter.sh/v1',
        kind: 'NodeClaim',
        metadata: { name, labels },
        spec: {
          nodeClassRef: { group: 'karpenter.k8s.aws', kind: 'EC2NodeClass', name: 'default' },
          requirements: [{ key: 'karpenter.sh/capacity-type', operator: 'In', values: ['on-demand', 'spot'] }],
          ...extra.spec,
        },
      },
    });
    await custom.patchClusterCustomObjectStatus(
      { ...NODECLAIMS, name, body: { status: { providerID: `aws:///${zone}/${inst.InstanceId}`, ...extra.status } } },
      mergePatch,
    );
    return Date.now();
  };
  const readNode = (name: string) =>
    core.readNode({ name }).catch((err: { code?: number }) => (err.code === 404 ? undefined : Promise.reject(err)));
  const until = async (what: string, cond: () => Promise<boolean>, timeoutMs = 30_000) => {
    const deadline = Date.now() + timeoutMs;
    while (!(await cond())) {
      if (Date.now() > deadline)
        throw new Error(
          `${what}: not within ${timeoutMs} ms; node maker errors: ${maker.errors().join(' | ') || 'none'}`,
        );
      await sleep(100);
    }
  };
  const ready = (n: { status?: { conditions?: { type: string; status: string }[] } } | undefined) =>
    n?.status?.conditions?.find((c) => c.type === 'Ready')?.status;

  const [onDemand] = await launch('m5.xlarge', 'us-east-1b');
  const CLAIM_CAPACITY = {
    cpu: '4',
    memory: '15155Mi',
    'ephemeral-storage': '20Gi',
    pods: '58',
    'vpc.amazonaws.com/pod-eni': '18',
  };
  const CLAIM_ALLOCATABLE = {
    cpu: '3920m',
    memory: '14162Mi',
    'ephemeral-storage': '17Gi',
    pods: '58',
    'vpc.amazonaws.com/pod-eni': '18',
  };
  // The labels karpenter-provider-aws v1.14.3 gives a NodeClaim of an m5.xlarge (beside nodepool, capacity type, type and zone).
  const KARPENTER_AWS_LABELS = {
    'karpenter.k8s.aws/instance-category': 'm',
    'karpenter.k8s.aws/instance-cpu': '4',
    'karpenter.k8s.aws/instance-cpu-manufacturer': 'intel',
    'karpenter.k8s.aws/instance-cpu-sustained-clock-speed-mhz': '3100',
    'karpenter.k8s.aws/instance-ebs-bandwidth': '4750',
    'karpenter.k8s.aws/instance-encryption-in-transit-supported': 'false',
    'karpenter.k8s.aws/instance-family': 'm5',
    'karpenter.k8s.aws/instance-generation': '5',
    'karpenter.k8s.aws/instance-hypervisor': 'nitro',
    'karpenter.k8s.aws/instance-memory': '16384',
    'karpenter.k8s.aws/instance-network-bandwidth': '1250',
    'karpenter.k8s.aws/instance-size': 'xlarge',
    'kubernetes.io/arch': 'amd64',
    'kubernetes.io/os': 'linux',
    'topology.k8s.aws/zone-id': 'use1-az2',
    'topology.kubernetes.io/region': 'us-east-1',
  };
  const TAINT = { key: 'dedicated', value: 'infra', effect: 'NoSchedule' };
  const STARTUP = { key: 'example.com/agent-not-ready', effect: 'NoExecute' };

  t.test(
    'a NodeClaim with a providerID gets its Node after the boot delay, as a kubelet on EKS registers it',
    async (t) => {
      const statusAt = await nodeClaim('default-a1b2c', onDemand!, {
        labels: KARPENTER_AWS_LABELS,
        spec: { taints: [TAINT], startupTaints: [STARTUP] },
        status: { capacity: CLAIM_CAPACITY, allocatable: CLAIM_ALLOCATABLE },
      });
      const name = onDemand!.PrivateDnsName!;
      t.match(name, /^ip-\d+-\d+-\d+-\d+\.ec2\.internal$/, 'moto names the instance as EC2 in us-east-1 does');
      await sleep(BOOT_DELAY_MS - 1000);
      t.equal(await readNode(name), undefined, 'no Node before the boot delay is over');
      await until(
        'the node maker is done with the Node',
        async () => maker.record('default-a1b2c')?.settledAt !== undefined,
      );
      const rec = maker.record('default-a1b2c')!;
      t.ok(
        rec.providerIDSeenAt - statusAt < 1000,
        `the providerID was seen ${rec.providerIDSeenAt - statusAt} ms after its status write`,
      );
      t.ok(
        rec.createSentAt! - rec.providerIDSeenAt >= BOOT_DELAY_MS,
        `the CREATE went ${rec.createSentAt! - rec.providerIDSeenAt} ms after the providerID appeared (boot delay ${BOOT_DELAY_MS} ms)`,
      );
      figures.push(
        `one node: DescribeInstances ${rec.describedAt! - rec.providerIDSeenAt} ms; CREATE answered in ${rec.nodeCreatedAt! - rec.createSentAt!} ms, Ready written ${rec.readyAt! - rec.nodeCreatedAt!} ms later, taints off ${rec.settledAt! - rec.readyAt!} ms after that; as created ${rec.createdBytes} bytes`,
      );

      const node = (await readNode(name))!;
      t.equal(node.spec?.providerID, `aws:///us-east-1b/${onDemand!.InstanceId}`);
      t.match(
        node.metadata?.labels,
        {
          'karpenter.sh/nodepool': 'default',
          'karpenter.sh/capacity-type': 'on-demand',
          'karpenter.k8s.aws/ec2nodeclass': 'default',
          'node.kubernetes.io/instance-type': 'm5.xlarge',
          'topology.kubernetes.io/zone': 'us-east-1b',
          'topology.kubernetes.io/region': 'us-east-1',
          'kubernetes.io/hostname': name,
          'kubernetes.io/arch': 'amd64',
          'kubernetes.io/os': 'linux',
        },
        'the NodeClaim labels and the kubelet labels',
      );
      t.notOk('karpenter.sh/registered' in (node.metadata?.labels ?? {}), "not registered: that is Karpenter's");
      t.equal(node.metadata?.ownerReferences, undefined, 'no owner reference');
      t.equal(node.metadata?.finalizers, undefined, 'no finalizer');
      t.same(
        (node.spec?.taints ?? []).map((x) => `${x.key}=${x.value ?? ''}:${x.effect}`).sort(),
        [
          'dedicated=infra:NoSchedule',
          'example.com/agent-not-ready=:NoExecute',
          'karpenter.sh/unregistered=:NoExecute',
        ],
        "registered with the unregistered taint, the taints and the startup taints; the controllers' taints gone",
      );
      t.same(
        maker.record('default-a1b2c')!.taintsRemoved?.sort(),
        ['node.cloudprovider.kubernetes.io/uninitialized:NoSchedule', 'node.kubernetes.io/not-ready:NoSchedule'],
        'the apiserver had added not-ready, the kubelet uninitialized: both removed',
      );
      t.match(
        node.status?.capacity,
        { cpu: '4', memory: '15155Mi', pods: '58', 'vpc.amazonaws.com/pod-eni': '18' },
        'capacity from the NodeClaim',
      );
      t.match(node.status?.allocatable, { cpu: '3920m', memory: '14162Mi' }, 'allocatable from the NodeClaim');
      t.same(
        node.status?.addresses?.map((a) => `${a.type}=${a.address}`),
        [`InternalIP=${onDemand!.PrivateIpAddress}`, `InternalDNS=${name}`, `Hostname=${name}`],
      );
      t.equal(node.status?.nodeInfo?.architecture, 'amd64');
      t.ok((node.status?.images?.length ?? 0) >= 40, 'images as a real node lists');
      const served = (await cp.get(`/api/v1/nodes/${name}`)).body;
      const bytes = Buffer.byteLength(served);
      t.ok(
        bytes > 15_000 && bytes < 30_000,
        `served ${bytes} bytes (managedFields ${Buffer.byteLength(JSON.stringify(JSON.parse(served).metadata.managedFields))})`,
      );
      figures.push(`a node as served (GET, JSON): ${bytes} bytes`);

      // Heartbeats: the Ready condition's lastHeartbeatTime moves on (second resolution).
      const beat = (n: V1Node | undefined) =>
        String(n?.status?.conditions?.find((c) => c.type === 'Ready')?.lastHeartbeatTime);
      const first = beat(node);
      await until('a heartbeat', async () => beat(await readNode(name)) !== first, HEARTBEAT_MS * 3);
      t.pass(`heartbeat renewed (${first} -> ${beat(await readNode(name))})`);

      const audit = cp.auditEvents().filter((e) => e.stage === 'ResponseComplete' && e.objectRef?.name === name);
      const creates = audit.filter((e) => e.verb === 'create' && e.objectRef?.resource === 'nodes');
      t.equal(creates.length, 1, 'one CREATE');
      t.equal(creates[0]?.user.username, NODE_MAKER_USER, "by the node maker's own user");
      t.ok(
        audit.some(
          (e) => e.verb === 'patch' && e.objectRef?.subresource === 'status' && e.user.username === NODE_MAKER_USER,
        ),
        'status written through the status subresource',
      );
    },
  );

  t.test(
    'without capacity in the NodeClaim, the instance type gives it; spot and arm64 from the instance',
    async (t) => {
      const [spot] = await launch('m6g.large', 'us-east-1c', { arm: true, spot: true });
      await nodeClaim('default-d3e4f', spot!, { labels: { 'karpenter.sh/capacity-type': 'spot' } });
      await until(
        'the node maker is done with the Node',
        async () => maker.record('default-d3e4f')?.settledAt !== undefined,
      );
      const node = (await readNode(spot!.PrivateDnsName!))!;
      t.equal(node.metadata?.labels?.['kubernetes.io/arch'], 'arm64');
      t.equal(node.status?.nodeInfo?.architecture, 'arm64');
      t.equal(maker.record('default-d3e4f')?.capacityType, 'spot', 'InstanceLifecycle spot');
      // m6g.large: 2 vCPU, 8 GiB, 3 ENIs x 10 addresses.
      t.match(node.status?.capacity, { cpu: '2', pods: '29' });
      t.equal(node.status?.allocatable?.cpu, '1930m', 'kube-reserved CPU taken off');
    },
  );

  t.test('a node maker started again takes its Nodes over, as a restarted kubelet does', async (t) => {
    await maker.stop();
    const before = cp
      .auditEvents()
      .filter((e) => e.verb === 'create' && e.objectRef?.resource === 'nodes' && e.stage === 'ResponseComplete').length;
    maker = await startNodeMaker(cp, {
      ec2Endpoint: endpoint,
      bootDelayMs: BOOT_DELAY_MS,
      instancePollMs: 1000,
      createConcurrency: CREATE_CONCURRENCY,
    });
    const again = await maker.waitForReady(2, 30_000);
    t.same(
      again.map((r) => r.alreadyExisted),
      [true, true],
      'both CREATEs answered AlreadyExists; the Nodes were taken over',
    );
    const creates = cp
      .auditEvents()
      .filter((e) => e.verb === 'create' && e.objectRef?.resource === 'nodes' && e.stage === 'ResponseComplete')
      .slice(before);
    t.same(
      creates.map((e) => e.responseStatus?.code),
      [409, 409],
    );
  });

  t.test(`a burst of ${BURST} NodeClaims: every Node made`, async (t) => {
    const instances = await launch('c6i.large', 'us-east-1a', { count: BURST });
    t.equal(instances.length, BURST);
    const started = Date.now();
    // As Karpenter writes them: a few dozen requests in flight, not hundreds.
    for (let i = 0; i < instances.length; i += 25)
      await Promise.all(instances.slice(i, i + 25).map((inst, j) => nodeClaim(`burst-${i + j}`, inst)));
    const made = await maker.waitForReady(BURST + 2, 120_000);
    const burst = made.filter((r) => r.nodeClaim.startsWith('burst-'));
    t.equal(burst.length, BURST);
    const creates = burst.map((r) => r.nodeCreatedAt! - r.createSentAt!);
    const lag = burst.map((r) => r.createSentAt! - r.providerIDSeenAt - BOOT_DELAY_MS);
    figures.push(
      `burst of ${BURST}: DescribeInstances answered ${ms(burst.map((r) => r.describedAt! - r.providerIDSeenAt))} after the providerID was seen; ` +
        `CREATE sent after the boot delay by ${ms(lag)}, answered in ${ms(creates)}; Ready and taints off ${ms(burst.map((r) => r.settledAt! - r.nodeCreatedAt!))} after it; ` +
        `providerIDs seen over ${Math.max(...burst.map((r) => r.providerIDSeenAt)) - Math.min(...burst.map((r) => r.providerIDSeenAt))} ms; all settled ${Date.now() - started} ms after the first NodeClaim`,
    );
    t.ok(Math.max(...lag) < 10_000, `CREATEs kept up with the boot delay (late by at most ${Math.max(...lag)} ms)`);
    t.equal(maker.stats().errors, 0, `no errors: ${maker.errors().join(' | ')}`);
  });

  t.test("a terminated instance's Node goes; a deleted NodeClaim's stays while the instance runs", async (t) => {
    const name = onDemand!.PrivateDnsName!;
    await custom.deleteClusterCustomObject({ ...NODECLAIMS, name: 'default-a1b2c' });
    await sleep(2500);
    t.equal(
      ready(await readNode(name)),
      'True',
      'NodeClaim gone, instance running: the Node stays and stays Ready (Karpenter deletes registered Nodes itself)',
    );
    await ec2.send(new TerminateInstancesCommand({ InstanceIds: [onDemand!.InstanceId!] }));
    await until('the Node is deleted', async () => (await readNode(name)) === undefined, 10_000);
    t.pass('instance terminated: the Node deleted, as the cloud controller deletes it');

    // Terminated during the boot delay: no Node ever.
    const [early] = await launch('m5.large', 'us-east-1a');
    await nodeClaim('default-g5h6i', early!);
    await sleep(500);
    await ec2.send(new TerminateInstancesCommand({ InstanceIds: [early!.InstanceId!] }));
    await sleep(BOOT_DELAY_MS + 1000);
    t.equal(
      await readNode(early!.PrivateDnsName!),
      undefined,
      'an instance terminated before it booted never registers',
    );
    figures.push(`stats: ${JSON.stringify(maker.stats())}`);
  });
}

// The local EC2 that Karpenter's AWS provider runs against (kit/aws/moto.ts), through AWS's own
// SDK: the seed Karpenter discovers, spot prices from the test's catalog, and CreateFleet choosing
// as EC2 documents each allocation strategy, across every launch-template config. Anything that
// speaks an AWS API runs where only loopback exists, so this file re-executes itself in a network
// namespace of its own (kit/netns.ts) and runs its tests there.
import { POD_IP, runInOwnNetworkNamespace } from '../../kit/netns.ts';

if (process.env.VENEER_POD_IP !== POD_IP) {
  process.exitCode = await runInOwnNetworkNamespace(import.meta.filename);
} else {
  await inNamespace();
}

async function inNamespace(): Promise<void> {
  // tap only here: the outer process's output is this one's.
  const { default: t } = await import('tap');
  const ec2sdk = await import('@aws-sdk/client-ec2');
  const { EC2Client } = ec2sdk;
  const { assertLoopbackOnly, networkInterfaces } = await import('../../kit/aws/netns.ts');
  const { startMoto, ZONES } = await import('../../kit/aws/moto.ts');
  type SpotCatalog = import('../../kit/aws/moto.ts').SpotCatalog;

  const [zoneA, zoneB, zoneC] = ZONES;
  const catalog: SpotCatalog = {
    prices: {
      'm5.large': { onDemand: 0.096, spot: { [zoneA]: 0.04, [zoneB]: 0.035, [zoneC]: 0.045 } },
      'c5.large': { onDemand: 0.085, spot: { [zoneA]: 0.033, [zoneB]: 0.036, [zoneC]: 0.031 } },
      'r5.large': { onDemand: 0.126, spot: { [zoneA]: 0.05, [zoneB]: 0.052 } },
    },
  };

  t.test('only loopback is here', async (t) => {
    t.same(networkInterfaces(), ['lo']);
    t.doesNotThrow(() => assertLoopbackOnly());
  });

  const started = Date.now();
  const moto = await startMoto({ dir: t.testdir(), cluster: 'veneer-e2e', catalog });
  t.teardown(() => moto.stop());
  t.comment(`moto started and seeded in ${Date.now() - started} ms`);
  const ec2 = new EC2Client(moto.clientConfig());
  const { seed } = moto;

  t.test('the seed is what Karpenter discovers', async (t) => {
    const discovery = [{ Name: 'tag:karpenter.sh/discovery', Values: ['veneer-e2e'] }];
    const subnets = (await ec2.send(new ec2sdk.DescribeSubnetsCommand({ Filters: discovery }))).Subnets ?? [];
    t.same(
      Object.fromEntries(subnets.map((s) => [s.AvailabilityZone, s.SubnetId])),
      seed.subnets,
      'one tagged subnet per zone',
    );
    t.same(Object.keys(seed.subnets).sort(), [...ZONES]);
    t.ok(subnets.every((s) => s.VpcId === seed.vpcId));
    const groups =
      (await ec2.send(new ec2sdk.DescribeSecurityGroupsCommand({ Filters: discovery }))).SecurityGroups ?? [];
    t.same(
      groups.map((g) => g.GroupId),
      [seed.securityGroupId],
    );
    const [image] = (await ec2.send(new ec2sdk.DescribeImagesCommand({ ImageIds: [seed.amiId] }))).Images ?? [];
    t.match(image, { Name: /^al2023-ami-2023\..*-x86_64$/, Architecture: 'x86_64' });
    t.equal(seed.nodeRoleName, 'KarpenterNodeRole-veneer-e2e');
    t.match(seed.cluster, { name: 'veneer-e2e', endpoint: /^https:\/\//, serviceIpv4Cidr: '10.0.0.0/24' });
    t.ok(seed.cluster.certificateAuthority, 'moto reports a CA');
    t.match(
      moto.process.logTail(),
      "EC2's allocation rules, as documented, in place of EC2",
      'the launcher names itself as the stand-in it is',
    );
  });

  async function spotPrices(): Promise<Record<string, string>> {
    const out = await ec2.send(
      new ec2sdk.DescribeSpotPriceHistoryCommand({
        ProductDescriptions: ['Linux/UNIX', 'Linux/UNIX (Amazon VPC)'],
        StartTime: new Date(),
      }),
    );
    return Object.fromEntries(
      (out.SpotPriceHistory ?? []).map((p) => [`${p.InstanceType}/${p.AvailabilityZone}`, p.SpotPrice ?? '']),
    );
  }

  t.test('DescribeSpotPriceHistory reports the catalog, and follows it when it changes', async (t) => {
    const prices = await spotPrices();
    t.equal(Object.keys(prices).length, 8, 'a record per priced pool; r5.large has none in us-east-1c');
    t.equal(Number(prices[`c5.large/${zoneC}`]), 0.031);
    t.equal(Number(prices[`m5.large/${zoneB}`]), 0.035);
    t.notOk(`r5.large/${zoneC}` in prices);
    const filtered = await ec2.send(
      new ec2sdk.DescribeSpotPriceHistoryCommand({
        InstanceTypes: ['r5.large'],
        Filters: [{ Name: 'availability-zone', Values: [zoneB] }],
      }),
    );
    t.same(
      filtered.SpotPriceHistory?.map((p) => [p.InstanceType, p.AvailabilityZone, Number(p.SpotPrice)]),
      [['r5.large', zoneB, 0.052]],
    );
    moto.setCatalog({ prices: { ...catalog.prices, 'm5.large': { onDemand: 0.096, spot: { [zoneA]: 0.02 } } } });
    const changed = await spotPrices();
    t.equal(Number(changed[`m5.large/${zoneA}`]), 0.02);
    t.notOk(`m5.large/${zoneB}` in changed);
    moto.setCatalog(catalog);
  });

  // Two launch templates, as Karpenter makes one per AMI/requirement set; every override names a zonal
  // subnet. The first names its security group as SecurityGroupIds, the second on its primary network
  // interface, as Karpenter's own launch templates do (NetworkInterfaces[0].Groups).
  async function launchTemplate(name: string, groupsOn: 'instance' | 'interface'): Promise<string> {
    const groups = [seed.securityGroupId];
    const out = await ec2.send(
      new ec2sdk.CreateLaunchTemplateCommand({
        LaunchTemplateName: name,
        LaunchTemplateData: {
          ImageId: seed.amiId,
          ...(groupsOn === 'instance'
            ? { SecurityGroupIds: groups }
            : { NetworkInterfaces: [{ DeviceIndex: 0, Groups: groups }] }),
        },
      }),
    );
    return out.LaunchTemplate?.LaunchTemplateId ?? '';
  }
  const first = await launchTemplate('karpenter-first', 'instance');
  const second = await launchTemplate('karpenter-second', 'interface');
  // What Karpenter's drift check compares with its EC2NodeClass: only the discovered group, not the VPC's default.
  const groupsOf = (i: import('@aws-sdk/client-ec2').Instance) => ({
    instance: i.SecurityGroups?.map((g) => g.GroupId),
    primaryInterface: i.NetworkInterfaces?.find((n) => n.Attachment?.DeviceIndex === 0)?.Groups?.map((g) => g.GroupId),
  });
  const override = (instanceType: string, zone: string, priority?: number) => ({
    InstanceType: instanceType as never,
    SubnetId: seed.subnets[zone],
    AvailabilityZone: zone,
    ImageId: seed.amiId,
    ...(priority === undefined ? {} : { Priority: priority }),
  });
  // In request order: moto alone would launch the first, m5.large in us-east-1a.
  const configs = (priorities: number[] = []) => [
    {
      LaunchTemplateSpecification: { LaunchTemplateName: 'karpenter-first', Version: '$Latest' },
      Overrides: [
        override('m5.large', zoneA, priorities[0]),
        override('m5.large', zoneB, priorities[1]),
        override('c5.large', zoneA, priorities[2]),
      ],
    },
    {
      LaunchTemplateSpecification: { LaunchTemplateId: second, Version: '$Latest' },
      Overrides: [
        override('r5.large', zoneA, priorities[3]),
        override('c5.large', zoneC, priorities[4]),
        override('r5.large', zoneB, priorities[5]),
      ],
    },
  ];

  async function createFleet(capacityType: 'on-demand' | 'spot', strategy: string, priorities?: number[]) {
    const out = await ec2.send(
      new ec2sdk.CreateFleetCommand({
        Type: 'instant',
        TargetCapacitySpecification: { TotalTargetCapacity: 1, DefaultTargetCapacityType: capacityType },
        ...(capacityType === 'spot'
          ? { SpotOptions: { AllocationStrategy: strategy as never } }
          : { OnDemandOptions: { AllocationStrategy: strategy as never } }),
        LaunchTemplateConfigs: configs(priorities),
      }),
    );
    const ids = out.Instances?.flatMap((i) => i.InstanceIds ?? []) ?? [];
    const instances =
      ids.length === 0
        ? []
        : ((await ec2.send(new ec2sdk.DescribeInstancesCommand({ InstanceIds: ids }))).Reservations?.flatMap(
            (r) => r.Instances ?? [],
          ) ?? []);
    return { out, instances };
  }
  const where = (i: { InstanceType?: string; Placement?: { AvailabilityZone?: string } }) =>
    `${i.InstanceType}/${i.Placement?.AvailabilityZone}`;

  t.test('on-demand prioritized launches the lowest Priority, in the second launch template', async (t) => {
    const { out, instances } = await createFleet('on-demand', 'prioritized', [0.5, 0.4, 0.3, 0.2, 0.1, 0.25]);
    t.equal(instances.length, 1);
    const [instance] = instances;
    t.equal(instance && where(instance), `c5.large/${zoneC}`);
    t.equal(instance?.SubnetId, seed.subnets[zoneC]);
    t.same(
      instance && groupsOf(instance),
      { instance: [seed.securityGroupId], primaryInterface: [seed.securityGroupId] },
      "the security group of the launch template's primary network interface",
    );
    t.equal(instance?.SpotInstanceRequestId, undefined, 'on-demand');
    t.match(out.Instances?.[0], {
      Lifecycle: 'on-demand',
      LaunchTemplateAndOverrides: {
        LaunchTemplateSpecification: { LaunchTemplateId: second },
        Overrides: { InstanceType: 'c5.large', Priority: 0.1 },
      },
    });
    t.same(out.Errors ?? [], []);
  });

  t.test('equal priorities keep request order', async (t) => {
    const { instances } = await createFleet('on-demand', 'prioritized', [1, 0, 0, 0, 1, 1]);
    t.equal(instances[0] && where(instances[0]), `m5.large/${zoneB}`);
    t.same(
      instances[0] && groupsOf(instances[0]),
      { instance: [seed.securityGroupId], primaryInterface: [seed.securityGroupId] },
      "the launch template's SecurityGroupIds",
    );
  });

  t.test('on-demand lowest-price launches the cheapest list price', async (t) => {
    const { instances } = await createFleet('on-demand', 'lowest-price', [0, 1, 2, 3, 4, 5]);
    t.equal(
      instances[0] && where(instances[0]),
      `c5.large/${zoneA}`,
      'c5.large is the cheapest on-demand; its first pool in request order',
    );
  });

  t.test('spot price-capacity-optimized launches the cheapest spot pool', async (t) => {
    const { out, instances } = await createFleet('spot', 'price-capacity-optimized', [0, 1, 2, 3, 4, 5]);
    const [instance] = instances;
    t.equal(instance && where(instance), `c5.large/${zoneC}`);
    t.equal(instance?.InstanceLifecycle, 'spot');
    t.match(instance?.SpotInstanceRequestId, /^sir-/, 'Karpenter tells spot by its SpotInstanceRequestId');
    t.equal(out.Instances?.[0]?.Lifecycle, 'spot');
    t.same(
      instance && groupsOf(instance),
      { instance: [seed.securityGroupId], primaryInterface: [seed.securityGroupId] },
      "a spot instance too has its launch template's group",
    );
  });

  t.test('spot capacity-optimized-prioritized launches the lowest Priority', async (t) => {
    const { instances } = await createFleet('spot', 'capacity-optimized-prioritized', [3, 2, 1, 0.5, 4, 5]);
    t.equal(instances[0] && where(instances[0]), `r5.large/${zoneA}`);
  });

  t.test('a pool without capacity is reported and the next one launched', async (t) => {
    moto.setCatalog({
      ...catalog,
      insufficientCapacity: [
        { instanceType: 'c5.large', zone: zoneC, capacityType: 'spot' },
        { instanceType: 'c5.large', zone: zoneA, capacityType: 'spot' },
      ],
    });
    t.teardown(() => moto.setCatalog(catalog));
    const { out, instances } = await createFleet('spot', 'price-capacity-optimized');
    t.equal(instances[0] && where(instances[0]), `m5.large/${zoneB}`, 'the cheapest pool that has capacity');
    t.same(
      out.Errors?.map((e) => [
        e.ErrorCode,
        e.Lifecycle,
        e.LaunchTemplateAndOverrides?.Overrides?.InstanceType,
        e.LaunchTemplateAndOverrides?.Overrides?.AvailabilityZone,
      ]),
      [
        ['InsufficientInstanceCapacity', 'spot', 'c5.large', zoneC],
        ['InsufficientInstanceCapacity', 'spot', 'c5.large', zoneA],
      ],
    );
    moto.setCatalog({
      ...catalog,
      insufficientCapacity: ['m5.large', 'c5.large', 'r5.large'].flatMap((instanceType) =>
        ZONES.map((zone) => ({ instanceType, zone, capacityType: 'on-demand' as const })),
      ),
    });
    const none = await createFleet('on-demand', 'lowest-price');
    t.same(none.instances, [], 'no pool had capacity');
    t.equal(none.out.Errors?.length, 6, 'every pool tried is reported');
  });

  t.test('the request log has every CreateFleet, parsed', async (t) => {
    const log = moto.fleetRequests();
    t.equal(log.length, 7);
    t.match(log[0], {
      type: 'instant',
      defaultTargetCapacityType: 'on-demand',
      totalTargetCapacity: 1,
      onDemandAllocationStrategy: 'prioritized',
      spotAllocationStrategy: null,
      launchTemplateConfigs: [
        { launchTemplateId: first, launchTemplateName: 'karpenter-first', version: '$Latest' },
        { launchTemplateId: second, launchTemplateName: null },
      ],
      launched: [{ instanceType: 'c5.large', zone: zoneC, subnetId: seed.subnets[zoneC], capacityType: 'on-demand' }],
      errors: [],
    });
    t.same(log[0]?.launchTemplateConfigs[1]?.overrides[1], {
      instanceType: 'c5.large',
      subnetId: seed.subnets[zoneC],
      availabilityZone: zoneC,
      priority: 0.1,
      imageId: seed.amiId,
    });
    t.match(log[3], {
      defaultTargetCapacityType: 'spot',
      spotAllocationStrategy: 'price-capacity-optimized',
      launched: [{ capacityType: 'spot', instanceType: 'c5.large' }],
    });
    t.same(
      log[5]?.errors.map((e) => `${e.instanceType}/${e.zone}/${e.capacityType}/${e.code}`),
      [`c5.large/${zoneC}/spot/InsufficientInstanceCapacity`, `c5.large/${zoneA}/spot/InsufficientInstanceCapacity`],
    );
  });
}

// The prices the effect is judged with, read from AWS the way Karpenter's AWS provider reads them
// (src/prices): spot prices and offerings from the local EC2 (moto), on-demand prices from the
// Price List API, which moto lacks, so from a stand-in that speaks its protocol and applies the
// filters (test/support/pricing-api.ts). Anything that speaks an AWS API runs where only loopback
// exists: this file re-executes itself in a network namespace of its own (kit/netns.ts).
import { POD_IP, runInOwnNetworkNamespace } from '../../kit/netns.ts';

if (process.env.VENEER_POD_IP !== POD_IP) {
  process.exitCode = await runInOwnNetworkNamespace(import.meta.filename);
} else {
  await inNamespace();
}

async function inNamespace(): Promise<void> {
  const { default: t } = await import('tap');
  const { Registry } = await import('prom-client');
  type Registry = import('prom-client').Registry;
  const { awsClient } = await import('../../src/prices/aws-client.ts');
  const { assertLoopbackOnly } = await import('../../kit/aws/netns.ts');
  const { startMoto, ZONES } = await import('../../kit/aws/moto.ts');
  const { fetchInstanceTypes, fetchOfferedZones, fetchOnDemand, fetchSpot } = await import(
    '../../src/prices/aws-api.ts'
  );
  const { PriceSource } = await import('../../src/prices/source.ts');
  const { staticOnDemand } = await import('../../src/prices/static-table.ts');
  const { createMetrics } = await import('../../src/metrics.ts');
  const { createLogger } = await import('../../src/log.ts');
  const { priceListOf, startPricingStandIn } = await import('../support/pricing-api.ts');
  type Product = import('../support/pricing-api.ts').Product;

  assertLoopbackOnly();
  const [zoneA, zoneB, zoneC] = ZONES;
  const catalog = {
    prices: {
      'm5.large': { onDemand: 0.096, spot: { [zoneA]: 0.04, [zoneB]: 0.035, [zoneC]: 0.045 } },
      'c5.large': { onDemand: 0.085, spot: { [zoneA]: 0.033, [zoneC]: 0.031 } },
    },
  };
  const moto = await startMoto({ dir: t.testdir(), cluster: 'veneer-prices', catalog });
  t.teardown(() => moto.stop());

  // The Price List as it is for us-east-1: every type of Karpenter's table at its price (metal
  // types as the Price List files them: dedicated, "Compute Instance (bare metal)"), and around
  // m5.large the rows Karpenter's filters leave out, each at a price that would show if one got in.
  const table = staticOnDemand('us-east-1');
  const products = priceListOf(table);
  const decoys: Product[] = [
    { instanceType: 'm5.large', price: '0.1880000000', attributes: { operatingSystem: 'Windows' } },
    { instanceType: 'm5.large', price: '0.1060000000', attributes: { tenancy: 'Dedicated' } },
    {
      instanceType: 'm5.large',
      price: '0.1070000000',
      attributes: { regionCode: 'eu-west-1', location: 'EU (Ireland)' },
    },
    { instanceType: 'm5.large', price: '0.0960000001', attributes: { capacitystatus: 'UnusedCapacityReservation' } },
    { instanceType: 'm5.large', price: '0.4710000000', attributes: { preInstalledSw: 'SQL Std' } },
    { instanceType: 'm5.large', price: '0.0400000000', attributes: { marketoption: 'Spot' } },
    {
      instanceType: 'm5.large',
      price: '0.6540000000',
      currency: 'CNY',
      attributes: { regionCode: 'cn-north-1', location: 'China (Beijing)' },
    },
    {
      instanceType: 'm5.metal',
      price: '36.8640000000',
      currency: 'CNY',
      productFamily: 'Compute Instance (bare metal)',
      attributes: { regionCode: 'cn-north-1', location: 'China (Beijing)', tenancy: 'Dedicated' },
    },
  ];
  const standIn = await startPricingStandIn([...products, ...decoys]);
  t.teardown(() => standIn.close());
  const { credentials } = moto.clientConfig();
  const client = awsClient({
    region: 'us-east-1',
    env: { AWS_ENDPOINT_URL_EC2: moto.endpoint, AWS_ENDPOINT_URL_PRICING: standIn.endpoint },
    credentials: () => Promise.resolve(credentials),
    maxAttempts: 1,
  });
  const signal = () => AbortSignal.timeout(30_000);

  t.test(
    "on-demand from GetProducts with Karpenter's filters: the table back, no decoy, every page read",
    async (t) => {
      standIn.requests.length = 0;
      const prices = await fetchOnDemand(client, 'us-east-1', signal());
      const differing = [...new Set([...prices.keys(), ...table.keys()])].filter(
        (type) => prices.get(type) !== table.get(type),
      );
      t.same(differing, [], `all ${table.size} types at their price`);
      t.equal(prices.get('m5.large'), 0.096, 'no Windows, dedicated, other-region, reservation, software or spot row');
      t.ok(standIn.requests.length > table.size / 100, `${standIn.requests.length} pages of at most 100`);
      t.ok(standIn.requests.every((r) => r.ServiceCode === 'AmazonEC2' && r.MaxResults === 100));
      const filterSets = new Set(
        standIn.requests.map((r) =>
          (r.Filters ?? [])
            .map((f) => `${f.Field}=${f.Value}`)
            .sort()
            .join('\n'),
        ),
      );
      t.same(
        [...filterSets].sort().map((s) => s.split('\n')),
        [
          [
            'capacitystatus=Used',
            'marketoption=OnDemand',
            'operatingSystem=Linux',
            'preInstalledSw=NA',
            'productFamily=Compute Instance',
            'regionCode=us-east-1',
            'serviceCode=AmazonEC2',
            'tenancy=Shared',
          ],
          [
            'capacitystatus=Used',
            'marketoption=OnDemand',
            'operatingSystem=Linux',
            'preInstalledSw=NA',
            'productFamily=Compute Instance (bare metal)',
            'regionCode=us-east-1',
            'serviceCode=AmazonEC2',
            'tenancy=Dedicated',
          ],
        ],
        "two queries, pricing.go's: shared instances, and bare metal",
      );
    },
  );

  t.test('China prices in CNY; a region the Price List has nothing of is an error, not an empty table', async (t) => {
    t.same(
      await fetchOnDemand(client, 'cn-north-1', signal()),
      new Map([
        ['m5.large', 0.654],
        ['m5.metal', 36.864],
      ]),
    );
    await t.rejects(fetchOnDemand(client, 'ap-southeast-7', signal()), /no on-demand pricing found/);
  });

  t.test('spot from DescribeSpotPriceHistory: a price per type and zone, as EC2 reports them', async (t) => {
    const spot = await fetchSpot(client, new Date(), signal());
    t.same(
      Object.fromEntries([...spot].map(([type, zones]) => [type, Object.fromEntries(zones)])),
      Object.fromEntries(Object.entries(catalog.prices).map(([type, p]) => [type, p.spot])),
    );
  });

  t.test('offerings from DescribeInstanceTypeOfferings: the zones each type is offered in', async (t) => {
    const zones = await fetchOfferedZones(client, signal());
    t.ok(zones.size > 100, `${zones.size} types offered`);
    t.same(
      [...ZONES].filter((zone) => !zones.get('m5.large')?.has(zone)),
      [],
      'm5.large in every zone of the seed',
    );
    t.ok(
      [...zones.values()].every((z) => [...z].every((zone) => zone.startsWith('us-east-1'))),
      'zones of the region only',
    );
  });

  t.test("DescribeInstanceTypes: what the provider's allocatable is computed from", async (t) => {
    const described = await fetchInstanceTypes(client, signal());
    t.ok(described.size > 100, `${described.size} types described`);
    // EC2's own figures (moto's copy of DescribeInstanceTypes): the default network card's ENIs.
    t.same(described.get('m5.large'), { vcpus: 2, memoryMiB: 8192, arch: 'x86_64', maxENIs: 3, ipv4PerENI: 10 });
    t.same(described.get('m6g.large'), { vcpus: 2, memoryMiB: 8192, arch: 'arm64', maxENIs: 3, ipv4PerENI: 10 });
    t.equal(described.get('c6i.large')?.memoryMiB, 4096);
  });

  t.test(
    "errors: the service's code and status; a refusal is not retried, a failure is, up to the attempts allowed",
    async (t) => {
      const { AwsError } = await import('../../src/prices/aws-client.ts');
      const retrying = awsClient({
        region: 'us-east-1',
        env: { AWS_ENDPOINT_URL_EC2: moto.endpoint, AWS_ENDPOINT_URL_PRICING: standIn.endpoint },
        credentials: () => Promise.resolve(credentials),
        maxAttempts: 3,
      });
      const refused = await retrying
        .ec2('DescribeInstances', { 'InstanceId.1': 'i-0000000000000dead' }, signal())
        .catch((e: unknown) => e);
      t.ok(refused instanceof AwsError, String(refused));
      t.match(
        refused,
        {
          code: 'InvalidInstanceID.NotFound',
          status: 400,
          message: /^EC2: InvalidInstanceID.NotFound \(HTTP 400\): \S/,
        },
        "EC2's error XML read",
      );
      standIn.behave('fail');
      t.teardown(() => standIn.behave('answer'));
      const before = standIn.requests.length;
      await t.rejects(
        retrying.pricing('GetProducts', { ServiceCode: 'AmazonEC2' }, signal()),
        /^Pricing: InternalErrorException \(HTTP 500\): the stand-in was told to fail$/,
      );
      t.equal(standIn.requests.length - before, 3, 'a 500 tried three times');
      standIn.behave('answer');
      const unsigned = awsClient({
        region: 'us-east-1',
        env: { AWS_ENDPOINT_URL_PRICING: moto.endpoint },
        credentials: () => Promise.resolve(credentials),
        maxAttempts: 3,
      });
      const notPricing = await unsigned.pricing('GetProducts', {}, signal()).catch((e: unknown) => e);
      t.match(notPricing, { message: /^Pricing: / }, `an endpoint that is not the Price List: ${String(notPricing)}`);
      const nowhere = awsClient({
        region: 'us-east-1',
        env: { AWS_ENDPOINT_URL: 'http://127.0.0.1:9' },
        credentials: () => Promise.resolve(credentials),
        maxAttempts: 2,
      });
      const t0 = Date.now();
      await t.rejects(
        nowhere.ec2('DescribeInstanceTypeOfferings', {}, signal()),
        /fetch failed/,
        'no listener: the network error, after the attempts',
      );
      t.ok(Date.now() - t0 < 5_000, 'backed off briefly');
      const elsewhere = awsClient({
        region: 'us-east-1',
        env: { AWS_ENDPOINT_URL_EC2: standIn.endpoint },
        credentials: () => Promise.resolve(credentials),
        maxAttempts: 1,
      });
      const mismatch = await elsewhere.ec2('DescribeSpotPriceHistory', {}, signal()).catch((e: unknown) => e);
      t.match(mismatch, { message: /^EC2: / }, `an endpoint that is not EC2: ${String(mismatch)}`);
    },
  );

  let clock = Date.parse('2026-12-02T00:00:00Z');
  const sourceWith = (mode: 'aws' | 'isolated', registry: Registry, timeoutMs = 30_000) =>
    new PriceSource({
      mode,
      region: 'us-east-1',
      refreshMs: 3_600_000,
      timeoutMs,
      metrics: createMetrics(registry),
      log: createLogger('silent'),
      now: () => clock,
      client,
    });
  const metric = async (registry: Registry, series: string) =>
    new RegExp(`^veneer_nodewatcher_${series.replace(/[{}]/g, '\\$&')} (\\S+)$`, 'm').exec(
      await registry.metrics(),
    )?.[1];

  t.test('aws: the Price List, spot and offerings together, their age and the readings counted', async (t) => {
    const registry = new Registry();
    const source = sourceWith('aws', registry);
    t.equal(source.current()?.source, 'static', "the static table until AWS answers, as Karpenter's");
    await source.start();
    const book = source.current()!;
    t.match(book, { source: 'aws', asOf: clock, hasSpot: true });
    t.equal(book.onDemand('m5.large'), 0.096);
    t.equal(book.spot('c5.large', zoneC), 0.031);
    t.equal(book.spot('c5.large', zoneB), undefined, 'no spot price in a zone EC2 has none for');
    t.ok(
      ZONES.every((zone) => book.offeredZones?.('m5.large')?.has(zone)),
      'm5.large offered in the zones of the seed',
    );
    t.equal(book.offeredZones?.('no.such-type')?.size, 0, 'a type EC2 offers nowhere: no zone (not "unknown")');
    t.equal(book.instanceInfo?.('m5.large')?.maxENIs, 3, 'DescribeInstanceTypes read with them');
    t.equal(await metric(registry, 'price_refreshes_total{kind="instance_types",result="ok"}'), '1');
    t.equal(await metric(registry, 'price_refreshes_total{kind="on_demand",result="ok"}'), '1');
    t.equal(await metric(registry, 'price_refreshes_total{kind="offerings",result="ok"}'), '1');
    t.equal(await metric(registry, 'prices_known{kind="spot",source="aws"}'), '5');
    t.equal(await metric(registry, `prices_known{kind="on_demand",source="aws"}`), String(table.size));
    clock += 30_000;
    t.equal(await metric(registry, 'prices_age_seconds{kind="spot"}'), '30');

    // Down: the Price List fails, EC2 answers with new spot prices.
    standIn.behave('fail');
    moto.setCatalog({ prices: { ...catalog.prices, 'm5.large': { onDemand: 0.096, spot: { [zoneA]: 0.02 } } } });
    t.teardown(() => {
      standIn.behave('answer');
      moto.setCatalog(catalog);
    });
    await source.refresh();
    const after = source.current()!;
    t.equal(after.onDemand('m5.large'), 0.096, 'the on-demand prices read before are kept');
    t.equal(after.spot('m5.large', zoneA), 0.02, 'spot follows EC2');
    t.equal(
      after.spot('m5.large', zoneB),
      0.035,
      "a zone EC2 no longer reports keeps its last price (Karpenter's combineZonalPricing)",
    );
    t.equal(after.asOf, clock - 30_000, 'as of the older of the two readings');
    t.equal(await metric(registry, 'price_refreshes_total{kind="on_demand",result="error"}'), '1');
    t.equal(await metric(registry, 'price_refreshes_total{kind="spot",result="ok"}'), '2');
    t.equal(await metric(registry, 'prices_age_seconds{kind="on_demand"}'), '30', 'the on-demand prices age');
    t.equal(await metric(registry, 'prices_age_seconds{kind="spot"}'), '0');
    await source.stop();
  });

  t.test('a Price List that never answers costs the timeout, not the prices', async (t) => {
    const registry = new Registry();
    const source = sourceWith('aws', registry, 500);
    standIn.behave('hang');
    t.teardown(() => standIn.behave('answer'));
    const t0 = Date.now();
    await source.start();
    t.ok(Date.now() - t0 < 10_000, `the first reading gave up after ${Date.now() - t0} ms`);
    t.match(
      source.current(),
      { source: 'static+ec2-spot', hasSpot: true },
      'the static table, with the spot prices EC2 gave',
    );
    t.equal(await metric(registry, 'price_refreshes_total{kind="on_demand",result="error"}'), '1');
    await source.stop();
  });

  t.test(
    'isolated: the static table for on-demand, as Karpenter under ISOLATED_VPC; EC2 for spot; no Price List call',
    async (t) => {
      const registry = new Registry();
      const source = sourceWith('isolated', registry);
      const before = standIn.requests.length;
      await source.start();
      t.match(source.current(), { source: 'static+ec2-spot', hasSpot: true });
      t.equal(source.current()?.onDemand('m5.xlarge'), 0.192);
      t.equal(standIn.requests.length, before, 'the Price List was not asked');
      t.equal(
        await metric(registry, 'price_refreshes_total{kind="on_demand",result="ok"}'),
        undefined,
        'no on_demand reading counted',
      );
      t.equal(await metric(registry, 'prices_known{kind="on_demand",source="static"}'), String(table.size));
      await source.stop();
    },
  );

  t.test(
    'prices.region auto with EKS Pod Identity (credentials, no region): static until the nodes name the region, then AWS',
    async (t) => {
      const registry = new Registry();
      const source = new PriceSource({
        mode: 'static',
        region: undefined,
        regionLater: 'aws',
        refreshMs: 3_600_000,
        timeoutMs: 30_000,
        metrics: createMetrics(registry),
        log: createLogger('silent'),
        now: () => clock,
        client,
      });
      const before = standIn.requests.length;
      await source.start();
      t.match(source.current(), { source: 'static', hasSpot: false, region: undefined });
      t.equal(standIn.requests.length, before, 'no AWS call while the region is unknown');
      await source.useRegion('us-east-1');
      t.match(source.current(), { source: 'aws', region: 'us-east-1', hasSpot: true, asOf: clock });
      t.equal(source.current()?.spot('c5.large', zoneC), 0.031, "the local EC2's spot price");
      t.ok(
        standIn.requests
          .slice(before)
          .every((r) => r.Filters?.some((f) => f.Field === 'regionCode' && f.Value === 'us-east-1')),
        "the Price List asked for the nodes' region",
      );
      t.equal(await metric(registry, 'price_refreshes_total{kind="spot",result="ok"}'), '1');
      await source.stop();
    },
  );
}

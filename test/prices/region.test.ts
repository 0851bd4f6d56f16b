// prices.region `auto` without a region in the environment (EKS Pod Identity gives credentials,
// not the region): the nodes' topology.kubernetes.io/region, after the setting and the
// environment; the price source holds the static table until the nodes name it, then reads AWS
// for it, once. The AWS client here is a fake that answers as EC2 and the Price List would, and
// says which region it was asked about; test/aws/prices.test.ts reads the local EC2.
import t from 'tap';
import { Registry } from 'prom-client';
import { loadConfig } from '../../src/config/load.ts';
import { createLogger } from '../../src/log.ts';
import { createMetrics } from '../../src/metrics.ts';
import type { AwsClient, XmlElement } from '../../src/prices/aws-client.ts';
import { NodesRegion, regionOfNodes } from '../../src/prices/region.ts';
import { priceSettings, priceSourceSettings, regionFromNodesWanted } from '../../src/prices/settings.ts';
import { PriceSource, readPricesOnce } from '../../src/prices/source.ts';

const config = (flags: Record<string, string> = {}) => loadConfig({ flags }).config;
/** What EKS Pod Identity puts in the pod's environment: credentials, no region. */
const POD_IDENTITY = {
  AWS_CONTAINER_CREDENTIALS_FULL_URI: 'http://169.254.170.23/v1/credentials',
  AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE:
    '/var/run/secrets/pods.eks.amazonaws.com/serviceaccount/eks-pod-identity-token',
};
const node = (region?: string): { labels: Record<string, string> } => ({
  labels: region === undefined ? {} : { 'topology.kubernetes.io/region': region },
});

t.test('the region: the setting, else the environment, else the nodes', async (t) => {
  const pick = (flags: Record<string, string>, env: Record<string, string>, nodes?: string) => {
    const s = priceSourceSettings(config(flags), env, nodes);
    return [s.mode, s.region, s.regionFrom];
  };
  t.same(pick({}, {}, 'eu-west-1'), ['aws', 'eu-west-1', 'nodes'], 'auto: aws, once the nodes name one');
  t.same(
    pick({}, { AWS_REGION: 'us-west-2' }, 'eu-west-1'),
    ['aws', 'us-west-2', 'environment'],
    'the environment over the nodes',
  );
  t.same(pick({}, { AWS_DEFAULT_REGION: 'us-west-2' }, 'eu-west-1'), ['aws', 'us-west-2', 'environment']);
  t.same(
    pick({ '--prices-region': 'ap-south-1' }, { AWS_REGION: 'us-west-2' }, 'eu-west-1'),
    ['aws', 'ap-south-1', 'setting'],
    'the setting over both',
  );
  t.same(pick({ '--prices-source': 'isolated' }, {}, 'eu-west-1'), ['isolated', 'eu-west-1', 'nodes']);
  t.same(
    pick({ '--prices-source': 'static' }, {}, 'eu-west-1'),
    ['static', 'eu-west-1', 'nodes'],
    "static: that region's table",
  );
  t.same(pick({}, {}), ['static', undefined, undefined], 'no region anywhere: the static table');
});

t.test('the nodes are asked only with AWS credentials, no region otherwise known, and prices on', async (t) => {
  t.ok(regionFromNodesWanted(config(), POD_IDENTITY), 'EKS Pod Identity');
  t.ok(regionFromNodesWanted(config(), { AWS_WEB_IDENTITY_TOKEN_FILE: '/token' }), 'IRSA (were its region left out)');
  t.ok(regionFromNodesWanted(config(), { AWS_ACCESS_KEY_ID: 'AKIA' }), 'keys');
  t.ok(regionFromNodesWanted(config({ '--prices-source': 'aws' }), POD_IDENTITY), 'source aws, region auto');
  t.notOk(regionFromNodesWanted(config(), {}), 'no credentials: nodes that look like AWS nodes never make it call AWS');
  t.notOk(regionFromNodesWanted(config(), { ...POD_IDENTITY, AWS_REGION: 'us-west-2' }), 'the environment names it');
  t.notOk(regionFromNodesWanted(config({ '--prices-region': 'us-west-2' }), POD_IDENTITY), 'the setting names it');
  t.notOk(regionFromNodesWanted(config({ '--prices-source': 'off' }), POD_IDENTITY), 'no prices at all');
  t.match(priceSettings(config(), POD_IDENTITY, 'eu-west-1'), {
    mode: 'aws',
    region: 'eu-west-1',
    regionFrom: 'nodes',
  });
  t.match(
    priceSettings(config(), {}, 'eu-west-1'),
    { mode: 'static', region: undefined, regionFrom: undefined },
    "without credentials the nodes' region is not taken",
  );
});

t.test('the region of the nodes: the one most name, an AWS region, never another cloud', async (t) => {
  t.equal(regionOfNodes([node('us-east-1'), node('eu-west-1'), node('eu-west-1'), node()]), 'eu-west-1');
  t.equal(regionOfNodes([node('us-east-1'), node('eu-west-1')]), 'eu-west-1', 'a tie: the first alphabetically');
  t.equal(
    regionOfNodes([node(), node('eastus'), node('us-central1'), node('local')]),
    undefined,
    "Azure's, GCP's, kind's",
  );
  t.equal(regionOfNodes([]), undefined);
  t.equal(regionOfNodes([node('us-gov-west-1'), node('cn-north-1'), node('cn-north-1')]), 'cn-north-1');
});

/** A logger that keeps what it was told at warn and above. */
function recordingLogger() {
  const lines: { level: number; msg: string; [k: string]: unknown }[] = [];
  const log = createLogger('info', { write: (s: string) => void lines.push(JSON.parse(s)) });
  return { log, warnings: () => lines.filter((l) => l.level >= 40) };
}

t.test('following the nodes: the list decides; else the first node that names one; once', async (t) => {
  const { log, warnings } = recordingLogger();
  const found: string[] = [];
  const follow = new NodesRegion({ log, found: (r) => found.push(r) });
  follow.seen(node('ap-south-1'));
  t.same(found, [], 'nothing before the first complete list (its nodes come through seen() too)');
  follow.fromList([node('us-east-1'), node('eu-west-1'), node('eu-west-1')]);
  t.same(found, ['eu-west-1'], 'the region most nodes of the list name');
  t.equal(warnings().length, 1, 'nodes that disagree: one warning');
  t.match(warnings()[0], { region: 'eu-west-1', nodes: { 'us-east-1': 1, 'eu-west-1': 2 } });
  follow.seen(node('us-west-2'));
  follow.fromList([node('us-west-2')]);
  t.same(found, ['eu-west-1'], 'kept: a cluster spans one region');
  t.equal(warnings().length, 1, 'warned once only');

  const later = recordingLogger();
  const laterFound: string[] = [];
  const empty = new NodesRegion({ log: later.log, found: (r) => laterFound.push(r) });
  empty.fromList([node(), node('eastus')]);
  t.same(laterFound, [], 'no node of the list names an AWS region');
  empty.seen(node());
  empty.seen(node('us-west-2'));
  empty.seen(node('us-west-2'));
  t.same(laterFound, ['us-west-2'], 'the first node that names one, once');
  t.equal(empty.region, 'us-west-2');
  empty.seen(node('eu-west-1'));
  t.match(later.warnings(), [{ region: 'us-west-2', otherRegion: 'eu-west-1' }], 'a node of another region: warned');
});

/** EC2 and the Price List as the prices read them, one instance type, whatever the region asked. */
function fakeAws() {
  const regions: string[] = [];
  const actions: string[] = [];
  const client: AwsClient = {
    ec2: async (action) => {
      actions.push(action);
      if (action === 'DescribeSpotPriceHistory')
        return {
          spotPriceHistorySet: {
            item: { instanceType: 'm5.large', availabilityZone: 'eu-west-1a', spotPrice: '0.04', timestamp: 'now' },
          },
        } as XmlElement;
      return { instanceTypeOfferingSet: { item: { instanceType: 'm5.large', location: 'eu-west-1a' } } } as XmlElement;
    },
    pricing: async (action, body) => {
      actions.push(action);
      const filters = (body as { Filters: { Field: string; Value: string }[] }).Filters;
      regions.push(filters.find((f) => f.Field === 'regionCode')?.Value ?? '');
      const price = { priceDimensions: { d: { pricePerUnit: { USD: '0.107' } } } };
      return {
        PriceList: [
          JSON.stringify({ product: { attributes: { instanceType: 'm5.large' } }, terms: { OnDemand: { t: price } } }),
        ],
      };
    },
  };
  return { client, regions, actions };
}

t.test(
  'the source: the static table while the region is unknown, then AWS for the region the nodes name',
  async (t) => {
    const aws = fakeAws();
    const registry = new Registry();
    const source = new PriceSource({
      ...priceSettings(config(), POD_IDENTITY),
      regionLater: 'aws',
      metrics: createMetrics(registry),
      log: createLogger('silent'),
      now: () => 1_000,
      client: aws.client,
    });
    await source.start();
    t.match(
      source.current(),
      { source: 'static', hasSpot: false, region: undefined },
      'static until a node names the region',
    );
    t.equal(aws.actions.length, 0, 'no AWS call');

    await source.useRegion('eu-west-1');
    t.same([...new Set(aws.regions)], ['eu-west-1'], "the Price List asked for the nodes' region");
    const book = source.current()!;
    t.match(book, { source: 'aws', region: 'eu-west-1', hasSpot: true, asOf: 1_000 });
    t.equal(book.onDemand('m5.large'), 0.107, "AWS's price");
    t.equal(book.spot('m5.large', 'eu-west-1a'), 0.04, 'spot prices: no longer `no-spot-prices`');
    t.match(await registry.metrics(), /^veneer_nodewatcher_price_refreshes_total\{kind="spot",result="ok"\} 1$/m);

    const calls = aws.actions.length;
    await source.useRegion('us-east-1');
    t.equal(source.current()?.region, 'eu-west-1', 'once: a later region changes nothing');
    t.equal(aws.actions.length, calls, 'and reads nothing');
    await source.stop();
  },
);

t.test('a region given before the start is read at the start; a static source takes the region table', async (t) => {
  const aws = fakeAws();
  const common = {
    refreshMs: 60_000,
    timeoutMs: 1000,
    metrics: createMetrics(),
    log: createLogger('silent'),
    now: () => 0,
  };
  const early = new PriceSource({ ...common, mode: 'aws', region: undefined, regionLater: 'aws', client: aws.client });
  await early.useRegion('eu-west-1');
  t.equal(aws.actions.length, 0, 'not started: nothing read yet');
  t.match(early.current(), { source: 'static', region: 'eu-west-1' });
  await early.start();
  t.match(early.current(), { source: 'aws', region: 'eu-west-1' });
  await early.stop();

  const table = new PriceSource({ ...common, mode: 'static', region: undefined, metrics: createMetrics() });
  await table.start();
  await table.useRegion('us-gov-west-1');
  t.match(table.current(), { source: 'static', region: 'us-gov-west-1', hasSpot: false });
  t.not(table.current()?.onDemand('m5.xlarge'), 0.192, "GovCloud's own table, not us-east-1's");
  await table.stop();
});

t.test("explain: the nodes' region where the environment has credentials but no region", async (t) => {
  const saved = { ...process.env };
  t.teardown(() => {
    process.env = saved;
  });
  delete process.env.AWS_REGION;
  delete process.env.AWS_DEFAULT_REGION;
  const staticConfig = config({ '--prices-source': 'static' });
  process.env.AWS_CONTAINER_CREDENTIALS_FULL_URI = POD_IDENTITY.AWS_CONTAINER_CREDENTIALS_FULL_URI;
  t.match(await readPricesOnce(staticConfig, 'us-gov-east-1'), { source: 'static', region: 'us-gov-east-1' });
  delete process.env.AWS_CONTAINER_CREDENTIALS_FULL_URI;
  t.match(await readPricesOnce(staticConfig, 'us-gov-east-1'), { source: 'static', region: undefined });
});

t.test("serve's wiring: the node cache's first list names the region, the source takes it", async (t) => {
  const { servePrices } = await import('../../src/commands/serve-prices.ts');
  const listeners: ((node: { labels: Record<string, string> }) => void)[] = [];
  let listed: () => void = () => {};
  const store = [node('eu-west-1'), node('eu-west-1'), node('us-east-1')];
  const cache = {
    onMetadata: (l: (typeof listeners)[number]) => void listeners.push(l),
    nodes: () => store.values(),
    all: { synced: new Promise<void>((r) => (listed = r)) },
  };
  const { log, warnings } = recordingLogger();
  const deps = { metrics: createMetrics(), log, now: () => 0 };
  // Not started: the region is taken, nothing is read (what reads AWS is tested above and in test/aws/).
  const served = servePrices(config(), cache as never, deps, POD_IDENTITY);
  t.same(served.said, { mode: 'static', region: undefined, regionFrom: 'nodes (not named yet)' });
  for (const n of store) for (const l of listeners) l(n);
  t.match(served.prices.current(), { source: 'static', region: undefined }, 'the list is not complete yet');
  listed();
  await cache.all.synced;
  await new Promise((r) => setImmediate(r));
  t.match(
    served.prices.current(),
    { source: 'static', region: 'eu-west-1' },
    "the nodes' region; AWS read once started",
  );
  t.equal(warnings().length, 1, 'the node in us-east-1: warned');
  await served.prices.stop();

  const elsewhere = servePrices(config(), cache as never, deps, {});
  t.same(elsewhere.said, { mode: 'static', region: undefined, regionFrom: 'none' }, 'no credentials: not asked');
  const configured = servePrices(config(), cache as never, deps, { ...POD_IDENTITY, AWS_REGION: 'us-west-2' });
  t.same(configured.said, { mode: 'aws', region: 'us-west-2', regionFrom: 'environment' });
  await configured.prices.stop();
});

// The prices that need no AWS call: Karpenter's static table as the watcher carries it (checked
// against the table in the very module the AWS controller is built from), how the configuration
// picks a mode, and the modes that read nothing. What reads AWS is tested in test/aws/prices.test.ts.
import t from 'tap';
import { Registry } from 'prom-client';
import { staticOnDemandPrices } from '../../kit/aws/prices.ts';
import { ConfigError, loadConfig } from '../../src/config/load.ts';
import { priceSourceSettings } from '../../src/prices/settings.ts';
import { createLogger } from '../../src/log.ts';
import { createMetrics } from '../../src/metrics.ts';
import { onDemandPage } from '../../src/prices/aws-api.ts';
import { pricingRegion } from '../../src/prices/aws-client.ts';
import { PriceSource, readPricesOnce } from '../../src/prices/source.ts';
import { staticOnDemand, staticPrices, staticRegionFor, staticTableSource } from '../../src/prices/static-table.ts';

t.test("the static table is the AWS controller's own, price for price", async (t) => {
  const module = staticOnDemandPrices('us-east-1');
  const ours = staticOnDemand('us-east-1');
  t.ok(module.size > 1000, `the module's table lists ${module.size} types`);
  const differing = [...new Set([...module.keys(), ...ours.keys()])].filter(
    (type) => module.get(type) !== ours.get(type),
  );
  t.same(differing, [], 'src/prices/karpenter-static-prices.json is stale: run `node scripts/generate-price-table.ts`');
  t.match(staticTableSource, /karpenter-provider-aws@v1\.14\.3/);
});

t.test("a region without a table of its own takes us-east-1's, as Karpenter does", async (t) => {
  t.equal(staticRegionFor('us-gov-west-1'), 'us-gov-west-1');
  t.equal(staticRegionFor('cn-north-1'), 'cn-north-1');
  t.equal(staticRegionFor('eu-west-1'), 'us-east-1');
  t.equal(staticRegionFor(undefined), 'us-east-1');
  t.equal(staticOnDemand('eu-west-1').get('m5.xlarge'), 0.192);
  t.not(staticOnDemand('us-gov-west-1').get('m5.xlarge'), 0.192, 'GovCloud has prices of its own');
  const book = staticPrices('eu-west-1');
  t.match(book, { source: 'static', region: 'eu-west-1', hasSpot: false, offeredZones: undefined });
  t.equal(book.spot('m5.xlarge', 'eu-west-1a'), undefined);
  t.equal(book.spotCount, 0);
});

t.test("the Pricing API's endpoint region, as Karpenter picks it", async (t) => {
  t.same(['ap-northeast-1', 'cn-north-1', 'eu-west-3', 'us-west-2', 'sa-east-1', 'me-south-1'].map(pricingRegion), [
    'ap-south-1',
    'cn-northwest-1',
    'eu-central-1',
    'us-east-1',
    'us-east-1',
    'us-east-1',
  ]);
});

t.test('a GetProducts page: the price of each item with one, in the currency asked', async (t) => {
  const item = (type: string | undefined, prices: Record<string, string>) =>
    JSON.stringify({
      product: { attributes: type === undefined ? {} : { instanceType: type } },
      terms: { OnDemand: { 'SKU.T': { priceDimensions: { 'SKU.T.D': { unit: 'Hrs', pricePerUnit: prices } } } } },
    });
  const page = [
    item('m5.large', { USD: '0.0960000000' }),
    item('c5.large', { CNY: '0.59' }),
    item(undefined, { USD: '1' }),
    item('free.type', { USD: '0.0000000000' }),
    'not json {',
  ];
  t.same(
    onDemandPage(page, 'USD'),
    new Map([['m5.large', 0.096]]),
    'no type, a zero price, another currency or a malformed item: skipped',
  );
  t.same(onDemandPage(page, 'CNY'), new Map([['c5.large', 0.59]]));
});

t.test('the mode from the configuration: auto reads AWS where a region is known', async (t) => {
  const config = (flags: Record<string, string> = {}) => loadConfig({ flags }).config;
  t.same(
    priceSourceSettings(config(), {}),
    { mode: 'static', region: undefined, regionFrom: undefined },
    'no region anywhere: the static table',
  );
  t.same(priceSourceSettings(config(), { AWS_REGION: 'eu-west-1' }), {
    mode: 'aws',
    region: 'eu-west-1',
    regionFrom: 'environment',
  });
  t.same(priceSourceSettings(config(), { AWS_DEFAULT_REGION: 'us-west-2' }), {
    mode: 'aws',
    region: 'us-west-2',
    regionFrom: 'environment',
  });
  t.same(
    priceSourceSettings(config({ '--prices-source': 'isolated', '--prices-region': 'us-gov-west-1' }), {
      AWS_REGION: 'eu-west-1',
    }),
    { mode: 'isolated', region: 'us-gov-west-1', regionFrom: 'setting' },
    'the settings over the environment',
  );
  t.same(priceSourceSettings(config({ '--prices-source': 'off' }), {}), {
    mode: 'off',
    region: undefined,
    regionFrom: undefined,
  });
});

t.test('a region that is not one stops start-up, naming the setting, the value and the rule', async (t) => {
  try {
    loadConfig({ flags: { '--prices-region': 'Europe' } });
    t.fail('accepted');
  } catch (err) {
    t.ok(err instanceof ConfigError);
    t.match((err as ConfigError).problems.join('\n'), /prices\.region.*"Europe".*pattern/s);
  }
  try {
    loadConfig({ flags: { '--prices-source': 'pricing-api' } });
    t.fail('accepted');
  } catch (err) {
    t.match((err as ConfigError).problems.join('\n'), /prices\.source.*"pricing-api"/s);
  }
});

const sourceWith = (
  mode: 'aws' | 'isolated' | 'static' | 'off',
  region: string | undefined,
  registry = new Registry(),
) =>
  new PriceSource({
    mode,
    region,
    refreshMs: 60_000,
    timeoutMs: 1000,
    metrics: createMetrics(registry),
    log: createLogger('silent'),
    now: () => 0,
  });

t.test('static: the table, read at once, no AWS call; off: no prices', async (t) => {
  const registry = new Registry();
  const source = sourceWith('static', 'us-east-1', registry);
  await source.start();
  t.match(source.current(), { source: 'static', hasSpot: false, asOf: undefined });
  t.equal(source.current()?.onDemand('m5.xlarge'), 0.192);
  const text = await registry.metrics();
  t.match(text, /^veneer_nodewatcher_prices_known\{kind="on_demand",source="static"\} 13\d\d$/m);
  t.notMatch(text, /^veneer_nodewatcher_prices_age_seconds\{/m, 'no age: nothing was read from AWS');
  t.notMatch(text, /^veneer_nodewatcher_price_refreshes_total\{/m);
  await source.stop();

  const off = sourceWith('off', undefined);
  await off.start();
  t.equal(off.current(), undefined);
  await off.stop();
});

t.test('a mode that reads AWS needs a region', async (t) => {
  t.throws(
    () => sourceWith('aws', undefined),
    /prices\.source aws needs a region \(prices\.region, AWS_REGION, or the nodes' label\)/,
  );
  t.throws(() => sourceWith('isolated', undefined), /prices\.source isolated needs a region/);
});

t.test('the command line reads the prices once, as configured', async (t) => {
  const book = await readPricesOnce(
    loadConfig({ flags: { '--prices-source': 'static', '--prices-region': 'us-gov-east-1' } }).config,
  );
  t.match(book, { source: 'static', region: 'us-gov-east-1' });
  t.equal(await readPricesOnce(loadConfig({ flags: { '--prices-source': 'off' } }).config), undefined);
});

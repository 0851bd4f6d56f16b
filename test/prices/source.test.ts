// What the price source says is on its way (due()): from its start while its region is still to be
// named by the nodes, or while its first reading from AWS has not ended, whatever its result; never
// for a source that reads no AWS. The AWS client is a fake whose answers wait for the test.
import t from 'tap';
import { createLogger } from '../../src/log.ts';
import { createMetrics } from '../../src/metrics.ts';
import type { AwsClient, XmlElement } from '../../src/prices/aws-client.ts';
import { PriceSource, type PriceSourceOptions } from '../../src/prices/source.ts';

/** EC2 and the Price List, answering (or failing) only once `release` is called. */
function heldAws() {
  let release: (fail: boolean) => void = () => {};
  const answered = new Promise<boolean>((r) => (release = r));
  const answer = async <T>(value: T): Promise<T> => {
    if (await answered) throw new Error('UnauthorizedOperation');
    return value;
  };
  const client: AwsClient = {
    ec2: (action) =>
      answer(
        (action === 'DescribeSpotPriceHistory'
          ? {
              spotPriceHistorySet: {
                item: { instanceType: 'm5.large', availabilityZone: 'eu-west-1a', spotPrice: '0.04', timestamp: 'now' },
              },
            }
          : { instanceTypeOfferingSet: { item: { instanceType: 'm5.large', location: 'eu-west-1a' } } }) as XmlElement,
      ),
    pricing: () => answer({ PriceList: [] }),
  };
  return { client, release };
}

let clock = 1_000;
function source(o: Partial<PriceSourceOptions> & Pick<PriceSourceOptions, 'mode'>) {
  const s = new PriceSource({
    region: undefined,
    refreshMs: 3_600_000,
    timeoutMs: 30_000,
    metrics: createMetrics(),
    log: createLogger('silent'),
    now: () => clock,
    ...o,
  });
  const ended: number[] = [];
  s.onDueEnded(() => ended.push(clock));
  t.teardown(() => s.stop());
  return { s, ended };
}

t.test('the region to come from the nodes: due from the start, then until the first reading ends', async (t) => {
  const aws = heldAws();
  clock = 1_000;
  const { s, ended } = source({ mode: 'static', regionLater: 'aws', client: aws.client });
  t.same(s.due(), { since: 1_000, waitMs: 60_000 }, 'two reading timeouts');
  clock = 2_000;
  await s.start();
  t.same(s.due(), { since: 1_000, waitMs: 60_000 }, 'started: still waiting for the region');
  clock = 50_000;
  const read = s.useRegion('eu-west-1');
  t.same(s.due(), { since: 50_000, waitMs: 60_000 }, 'the reading for it: waited for from its start');
  t.equal(s.current()?.hasSpot, false);
  aws.release(false);
  await read;
  t.equal(s.due(), undefined, 'come');
  t.equal(s.current()?.hasSpot, true);
  t.same(ended, [50_000], 'said once');
  await s.refresh();
  t.same(ended, [50_000], 'a later reading makes nothing due');
});

t.test('a first reading that fails: due no longer, said at once', async (t) => {
  const aws = heldAws();
  clock = 1_000;
  const { s, ended } = source({ mode: 'aws', region: 'eu-west-1', client: aws.client });
  t.same(s.due(), { since: 1_000, waitMs: 60_000 }, 'a region known: the first reading is on its way');
  const read = s.start();
  aws.release(true);
  await read;
  t.equal(s.due(), undefined);
  t.equal(s.current()?.hasSpot, false, 'no spot prices: launches that allow spot read unknown, as before');
  t.same(ended, [1_000]);
});

t.test('a source that reads no AWS: nothing due, ever', async (t) => {
  t.equal(source({ mode: 'static' }).s.due(), undefined, 'static, no credentials');
  t.equal(source({ mode: 'static', regionLater: 'static' }).s.due(), undefined, 'prices.source static');
  t.equal(source({ mode: 'static', region: 'us-west-2' }).s.due(), undefined);
  t.equal(source({ mode: 'off' }).s.due(), undefined);
  const table = source({ mode: 'static', regionLater: 'static' });
  await table.s.start();
  await table.s.useRegion('us-west-2');
  t.equal(table.s.due(), undefined, 'the region named: its static table, no reading');
  t.same(table.ended, []);
});

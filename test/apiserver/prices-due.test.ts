// The first launches of a watcher that learns its region from the nodes (EKS Pod Identity:
// credentials, no region), against a real apiserver with the webhook and the guard registered: the region comes
// with the first node and AWS's prices a moment after it. A record is written once, so that node
// waits for them (the webhook lets it in without one, the reconciler decides once they have come)
// instead of reading `unknown` (`no-spot-prices`) for good. A reading that fails ends the wait at
// once; a watcher without credentials never waits. AWS is stand-ins on loopback: the Pod Identity
// agent, the Price List, and EC2's two reads, whose answers wait for the test.
import { createServer, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import t from 'tap';
import * as k8s from '@kubernetes/client-node';
import type { RunningWatcher } from '../../src/commands/serve.ts';
import { readStory, recordKeys } from '../../src/engine/index.ts';
import { staticOnDemand } from '../../src/prices/static-table.ts';
import { reservedInstance } from '../../kit/veneer.ts';
import { KarpenterSim } from '../../kit/karpenter-sim.ts';
import { OVERLAY_API, sleep, until } from '../../kit/fleet.ts';
import { launchWatcher, registerWebhooksAt, startClusterEnv, WATCHER_USER } from '../../kit/watcher-env.ts';
import { startPodIdentityAgent } from '../support/pod-identity-agent.ts';
import { priceListOf, startPricingStandIn } from '../support/pricing-api.ts';

const REGION = 'us-west-2';
const ZONE = 'us-west-2a';

/** EC2's spot prices and offerings for m5.xlarge; `hold` keeps every answer until the test says answer or fail. */
async function startEc2StandIn() {
  let mode: 'answer' | 'fail' | 'hold' = 'answer';
  const held: { res: ServerResponse; action: string }[] = [];
  const actions: string[] = [];
  const reply = (res: ServerResponse, action: string) => {
    if (mode === 'fail') {
      res.writeHead(403, { 'content-type': 'text/xml' });
      return res.end(
        '<Response><Errors><Error><Code>UnauthorizedOperation</Code><Message>not allowed</Message></Error></Errors></Response>',
      );
    }
    const body =
      action === 'DescribeSpotPriceHistory'
        ? `<spotPriceHistorySet><item><instanceType>m5.xlarge</instanceType><productDescription>Linux/UNIX</productDescription><spotPrice>0.067200</spotPrice><timestamp>${new Date().toISOString()}</timestamp><availabilityZone>${ZONE}</availabilityZone></item></spotPriceHistorySet>`
        : `<instanceTypeOfferingSet><item><instanceType>m5.xlarge</instanceType><locationType>availability-zone</locationType><location>${ZONE}</location></item></instanceTypeOfferingSet>`;
    res.writeHead(200, { 'content-type': 'text/xml' });
    res.end(`<${action}Response xmlns="http://ec2.amazonaws.com/doc/2016-11-15/">${body}</${action}Response>`);
  };
  const server = createServer((req, res) => {
    let body = '';
    req.setEncoding('utf8');
    req.on('data', (c: string) => (body += c));
    req.on('end', () => {
      const action = new URLSearchParams(body).get('Action') ?? '';
      actions.push(action);
      if (mode === 'hold') held.push({ res, action });
      else reply(res, action);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    endpoint: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    actions,
    behave(m: typeof mode) {
      mode = m;
      if (m !== 'hold') for (const h of held.splice(0)) reply(h.res, h.action);
    },
    close: () => {
      server.closeAllConnections();
      return new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

const env = await startClusterEnv();
t.teardown(() => env.cp.stop());
const { admin, cp, certs } = env;
const sim = new KarpenterSim(admin);
const core = admin.makeApiClient(k8s.CoreV1Api);
await sim.custom.createClusterCustomObject({ ...OVERLAY_API, body: reservedInstance('m5.xlarge', REGION) });

const agent = await startPodIdentityAgent(t.testdir());
const table = staticOnDemand(REGION);
const priceList = await startPricingStandIn(
  priceListOf(table).map((p) => ({ ...p, attributes: { ...p.attributes, regionCode: REGION } })),
);
const ec2 = await startEc2StandIn();
t.teardown(async () => {
  await Promise.all([agent.close(), priceList.close(), ec2.close()]);
});

// The watcher reads its AWS environment from the process', as `serve` does.
const saved = { ...process.env };
t.teardown(() => {
  process.env = saved;
});
const awsEnv = (credentials: boolean) => {
  for (const name of Object.keys(process.env)) if (name.startsWith('AWS_')) delete process.env[name];
  Object.assign(process.env, {
    AWS_EC2_METADATA_DISABLED: 'true',
    AWS_ENDPOINT_URL_EC2: ec2.endpoint,
    AWS_ENDPOINT_URL_PRICING: priceList.endpoint,
    ...(credentials ? agent.env : {}),
  });
};

let watcher: RunningWatcher | undefined;
let unregister: (() => Promise<void>) | undefined;
// Each handle is cleared before it is used, so a start that fails leaves nothing to undo twice
// (a second unregister is a 404, and a teardown that throws leaves the stand-ins open).
async function stopOne(): Promise<void> {
  const [u, w] = [unregister, watcher];
  unregister = watcher = undefined;
  await u?.();
  await w?.stop();
}
t.teardown(stopOne);
async function startOne(credentials: boolean): Promise<RunningWatcher> {
  await stopOne();
  awsEnv(credentials);
  watcher = (await launchWatcher(cp, certs, WATCHER_USER, { '--leader-election-enabled': 'false' })).watcher;
  unregister = await registerWebhooksAt(admin, { caPem: certs.caPem, port: watcher.webhookPort! });
  // Timestamps have one-second precision: launch in a later second than the watcher's first sync.
  await sleep(1100);
  return watcher;
}

/** Karpenter's launch of an on-demand m5.xlarge from a NodeClaim that allowed spot too. */
const launch = (name: string) =>
  sim.launch({
    name,
    claimName: `${name}-claim`,
    instanceType: 'm5.xlarge',
    zone: ZONE,
    requirements: [
      { key: 'node.kubernetes.io/instance-type', operator: 'In', values: ['m5.xlarge'] },
      { key: 'karpenter.sh/capacity-type', operator: 'In', values: ['on-demand', 'spot'] },
      { key: 'topology.kubernetes.io/zone', operator: 'In', values: [ZONE] },
    ],
  });
const keys = recordKeys('veneer.io');
const storyOf = async (name: string) =>
  readStory((await core.readNode({ name })).metadata?.annotations?.[keys.decisionAnnotation]);
const webhookUndetermined = async (w: RunningWatcher) =>
  (await w.metrics.admissionRequests.get()).values
    .filter((v) => v.labels.webhook === 'mutate' && v.labels.outcome === 'undetermined')
    .reduce((n, v) => n + v.value, 0);

t.test('Pod Identity, no node yet: the first node waits for the prices its region brings', async (t) => {
  const w = await startOne(true);
  ec2.behave('hold');
  await launch('first');
  await until('the reading for the region the node names', () => ec2.actions.length >= 2, 10_000);
  // Past the reconciler's wait for the webhook, and the node's registration: each decision was undetermined.
  await sleep(3000);
  t.equal(await storyOf('first'), undefined, 'no record while the prices are on their way');
  t.ok((await webhookUndetermined(w)) >= 2, 'the webhook let it in without one, at CREATE and at registration');
  const released = Date.now();
  ec2.behave('answer');
  await until('the record', async () => (await storyOf('first')) !== undefined, 20_000);
  const ms = Date.now() - released;
  t.ok(ms < 10_000, `recorded ${ms} ms after the prices came, not at the wait's end (two reading timeouts: 120 s)`);
  t.match(await storyOf('first'), {
    decidedBy: 'reconciler',
    overlay: 'cost-aware-ri-m5.xlarge-us-west-2',
    effect: { verdict: 'capacity-type', prices: { source: 'aws' } },
  });
});

t.test('a reading that fails ends the wait at once: unknown, as before', async (t) => {
  await core.deleteNode({ name: 'first' });
  await startOne(true);
  ec2.behave('hold');
  await launch('refused');
  await until('the reading', () => ec2.actions.filter((a) => a === 'DescribeSpotPriceHistory').length >= 2, 10_000);
  await sleep(3000);
  t.equal(await storyOf('refused'), undefined, 'waiting');
  const failed = Date.now();
  ec2.behave('fail');
  await until('the record', async () => (await storyOf('refused')) !== undefined, 20_000);
  t.ok(Date.now() - failed < 10_000, 'decided as soon as the reading failed');
  t.match(await storyOf('refused'), {
    decidedBy: 'reconciler',
    effect: { verdict: 'unknown', reasonCode: 'no-spot-prices' },
  });
});

t.test('no credentials: the static table, recorded at CREATE without waiting', async (t) => {
  const w = await startOne(false);
  ec2.behave('answer');
  const before = ec2.actions.length;
  await launch('table');
  t.match(await storyOf('table'), {
    decidedBy: 'webhook',
    effect: { verdict: 'unknown', reasonCode: 'no-spot-prices' },
  });
  t.equal(await webhookUndetermined(w), 0);
  t.equal(ec2.actions.length, before, 'no AWS call');
});

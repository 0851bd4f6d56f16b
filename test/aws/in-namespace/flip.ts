// The body of test/aws/flip.test.ts, run in a network namespace with only loopback. The same pod,
// pinned to m5.xlarge in a NodePool that allows spot and on-demand, launched by real Karpenter on
// AWS: without Veneer's Reserved Instance overlay it launches spot and gets no record; with it,
// on-demand, and the record names the overlay. What makes the flip is read from the CreateFleet
// request Karpenter sent (the local EC2's request log): without an overlay a spot fleet with
// price-capacity-optimized; with it the spot offering filter dropped every spot offering (priced
// above the overlay's on-demand 0.00), so an on-demand fleet, allocation strategy `prioritized`,
// and each m5.xlarge override at Priority 0, the overlay's price. Karpenter's own
// price-overlay-applied, the judge (Karpenter's NodeOverlay controller and store) and the record agree.
//
// Then what the record says the overlays changed (its effect), each against the launch that is seen
// when the overlay is not there: the RI overlay's flip is capacity-type (the same pod launched spot
// without it, above); a -90% on-demand overlay on a family flips an unpinned launch from spot
// (capacity-type); for a pod that asks for on-demand, an overlay that reorders the candidates moves the
// launch to its type (instance-type, naming the type that launches once the overlay is deleted);
// an overlay on that very type, the cheapest anyway, changes nothing (none).
//
// Each of those launches is decided twice, in the same CREATE: by the watcher that has the region in
// its environment (AWS_REGION, as IRSA's webhook sets it), which writes the veneer.io record, and by
// a second watcher, `serve` as its own process, whose environment is EKS Pod Identity's: the agent's
// credentials (AWS_CONTAINER_CREDENTIALS_FULL_URI, a stand-in on loopback) and no region. Its own
// mutating webhook writes its record under another label namespace. It prices with the static table
// until the first node names the region, then reads AWS (EC2 and the Price List, a stand-in serving
// Karpenter's own table); its records must be the first watcher's, effect for effect.
//
// Last, the docs' PromQL and the dashboard's steered $/h panel, evaluated by promtool on the
// watcher's own series: they must say what the Nodes' records say.
import { execFile } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { promisify } from 'node:util';
import t from 'tap';
import { stringify } from 'yaml';
import * as k8s from '@kubernetes/client-node';
import { counter, metricsOf, OVERLAY_API, sleep, spawnServe, until, waitReady } from '../../../kit/fleet.ts';
import { AWS_KARPENTER_VERSION, REGION, startAwsKarpenterWithWatcher } from '../../../kit/aws/karpenter.ts';
import { staticOnDemandPrices } from '../../../kit/aws/prices.ts';
import { waitForMutatingWebhook } from '../../../kit/watcher-env.ts';
import { mutatingWebhookConfiguration } from '../../../kit/webhook-registration.ts';
import type { FleetRequest } from '../../../kit/aws/moto.ts';
import { type PendingPod, PRICE_OVERLAY_APPLIED } from '../../../kit/karpenter-controller.ts';
import { computeSavingsPlan, reservedInstance } from '../../../kit/veneer.ts';
import { awsJudgeCase } from '../../judges/aws-judge.ts';
import { KarpenterJudge } from '../../judges/karpenter-oracle.ts';
import { assertInOwnNetworkNamespace } from '../../../kit/netns.ts';
import { storyOf } from '../../../kit/node-history.ts';
import { EFFECTS, readStory, recordKeys } from '../../../src/engine/index.ts';
import type { DecisionStory } from '../../../src/engine/record.ts';
import type { Explanation } from '../../../src/engine/explain.ts';
import { dashboardQueries, testRules } from '../../support/chart.ts';
import { inputSeries, promtool } from '../../support/prometheus.ts';
import { startPodIdentityAgent } from '../../support/pod-identity-agent.ts';
import { priceListOf, startPricingStandIn } from '../../support/pricing-api.ts';

assertInOwnNetworkNamespace();
t.setTimeout(240_000);
const started = Date.now();
/** The second watcher's identity and label namespace: EKS Pod Identity's environment, no region. */
const POD_IDENTITY_USER = 'veneer-watcher-b';
const POD_IDENTITY_NS = 'pod-identity.veneer.io';
// A boot delay as real instances have: the NodeClaim has its providerID before the kubelet's CREATE.
// The first watcher takes the region from its environment (AWS_REGION, set by the kit as IRSA sets it).
const env = await startAwsKarpenterWithWatcher({
  karpenter: { bootDelayMs: 2000 },
  extraWatchers: [POD_IDENTITY_USER],
  watcherFlags: { '--prices-region': 'auto' },
});
const upAt = Date.now();
const agent = await startPodIdentityAgent(t.testdir());
const priceList = await startPricingStandIn(priceListOf(staticOnDemandPrices(REGION)));
const podIdentity = await spawnServe(
  env.cp,
  env.certs,
  POD_IDENTITY_USER,
  { '--label-namespace': POD_IDENTITY_NS, '--leader-election-lease-name': 'veneer-node-watcher-pod-identity' },
  [],
  undefined,
  {
    // No AWS_REGION, AWS_DEFAULT_REGION or keys: the pod's AWS variables are Pod Identity's and the endpoints'.
    ...Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith('AWS_'))),
    ...agent.env,
    AWS_ENDPOINT_URL_EC2: env.karpenter.moto.endpoint,
    AWS_ENDPOINT_URL_PRICING: priceList.endpoint,
    AWS_EC2_METADATA_DISABLED: 'true',
  },
);
t.teardown(async () => {
  if (!t.passing())
    for (const p of [env.karpenter.controller, env.karpenter.moto.process])
      console.error(`--- ${p.name}'s log ends:\n${p.logTail(80)}`);
  if (!t.passing())
    console.error(
      `--- the Pod Identity watcher's log ends:\n${podIdentity.output().split('\n').slice(-40).join('\n')}`,
    );
  podIdentity.child.kill('SIGKILL');
  await podIdentity.exited;
  await Promise.all([agent.close(), priceList.close()]);
  await env.stop();
});
await waitReady(podIdentity.healthPort);
await env.admin.makeApiClient(k8s.AdmissionregistrationV1Api).createMutatingWebhookConfiguration({
  body: mutatingWebhookConfiguration({
    name: 'veneer-node-watcher-pod-identity',
    caBundle: env.certs.caPem,
    url: `https://127.0.0.1:${podIdentity.webhookPort}`,
    labelNamespace: POD_IDENTITY_NS,
    timeoutSeconds: 5,
  }),
});
await waitForMutatingWebhook(env.admin, POD_IDENTITY_NS);
const podIdentityUpMs = Date.now() - upAt;
const { karpenter, admin } = env;
const custom = admin.makeApiClient(k8s.CustomObjectsApi);
const core = admin.makeApiClient(k8s.CoreV1Api);
const RI = reservedInstance('m5.xlarge', REGION);
const RECORD_KEYS = ['veneer.io/overlay-influenced', 'veneer.io/matching-overlay', 'veneer.io/labeled-at'];
t.comment(
  `control plane, local EC2, Karpenter ${AWS_KARPENTER_VERSION} and the watcher up in ${((Date.now() - started) / 1000).toFixed(1)} s (ms: ${JSON.stringify(karpenter.startup)}; the Pod Identity watcher and its webhook ${podIdentityUpMs})`,
);

const podIdentityMetrics = () => metricsOf(podIdentity.metricsPort);
const podIdentityLog = () =>
  podIdentity
    .output()
    .split('\n')
    .filter((l) => l.startsWith('{'))
    .map((l) => JSON.parse(l) as { msg: string; [k: string]: unknown });
/** Both watchers count `n` overlays. */
const bothCount = (n: number) =>
  until(
    `both watchers count ${n} overlays`,
    async () =>
      new RegExp(`^veneer_nodewatcher_overlays\\{state="counted"\\} ${n}$`, 'm').test(
        await env.watcher.metrics.registry.metrics(),
      ) && counter(await podIdentityMetrics(), 'veneer_nodewatcher_overlays', { state: 'counted' }) === n,
    20_000,
  );

t.test(
  "the watcher with EKS Pod Identity's environment (credentials, no region): static prices and no AWS call until a node names the region",
  async (t) => {
    t.match(
      podIdentityLog().find((l) => l.msg === 'node watcher started'),
      { labelNamespace: POD_IDENTITY_NS, prices: { mode: 'static', regionFrom: 'nodes (not named yet)' } },
      'its start-up line: the region is to come from the nodes',
    );
    const text = await podIdentityMetrics();
    t.ok(
      counter(text, 'veneer_nodewatcher_prices_known', { kind: 'on_demand', source: 'static' }) > 0,
      "on-demand from Karpenter's static table",
    );
    t.equal(counter(text, 'veneer_nodewatcher_prices_known', { kind: 'spot' }), 0, 'no spot prices');
    t.equal(counter(text, 'veneer_nodewatcher_price_refreshes_total', {}), 0, 'no reading of AWS');
    t.equal(agent.served + agent.refused, 0, 'no credentials asked for');
  },
);

const cli = join(import.meta.dirname, '..', '..', '..', 'src', 'cli.ts');
const explain = (args: string[], env: Record<string, string> = {}) =>
  promisify(execFile)(process.execPath, [cli, 'explain', ...args], { env: { ...process.env, ...env } }).then(
    (r) => ({ code: 0, out: r.stdout, err: r.stderr }),
    (e: { code: number; stdout: string; stderr: string }) => ({ code: e.code, out: e.stdout, err: e.stderr }),
  );
const instanceIdOf = (node: k8s.V1Node) => node.spec?.providerID?.split('/').at(-1) ?? '';
const fleetOf = (node: k8s.V1Node): FleetRequest | undefined =>
  karpenter.moto.fleetRequests().find((f) => f.launched.some((l) => l.instanceId === instanceIdOf(node)));
const overrides = (f: FleetRequest | undefined) =>
  (f?.launchTemplateConfigs ?? [])
    .flatMap((c) => c.overrides)
    .map((o) => `${o.instanceType}@${o.priority ?? '-'}`)
    .sort();

/** The nodes of the two flips from spot: the RI overlay's and the -90% family overlay's. */
const flips = { ri: '', family: '' };

/** Launches one pod (pinned to m5.xlarge unless told otherwise); returns its node once Karpenter registered it, with its NodeClaim. */
async function launch(name: string, pod: Omit<PendingPod, 'name'> = { instanceType: 'm5.xlarge' }) {
  const before = new Set((await core.listNode()).items.map((n) => n.metadata?.name));
  const t0 = Date.now();
  await karpenter.createPods([{ name, ...pod }]);
  const nodes = await karpenter.waitForNodes(before.size + 1, { registered: true, timeoutMs: 90_000 });
  const node = nodes.find((n) => !before.has(n.metadata?.name))!;
  // By providerID, which the NodeClaim has from the launch on (its status.nodeName comes later, with registration).
  const claim = (await karpenter.nodeClaims()).find((c) => c.status?.providerID === node.spec?.providerID);
  return { node, claim, ms: Date.now() - t0 };
}

t.test('without the Reserved Instance overlay: spot, price-capacity-optimized, no record', async (t) => {
  const { node, claim, ms } = await launch('no-overlay');
  const labels = node.metadata?.labels ?? {};
  t.equal(labels['karpenter.sh/capacity-type'], 'spot', 'launched spot');
  t.equal(labels['node.kubernetes.io/instance-type'], 'm5.xlarge');
  t.same(
    RECORD_KEYS.filter((k) => labels[k] !== undefined),
    [],
    'no record on a spot node',
  );
  t.equal(
    claim?.metadata.annotations?.[PRICE_OVERLAY_APPLIED],
    undefined,
    `no ${PRICE_OVERLAY_APPLIED}: no overlay exists`,
  );
  const fleet = fleetOf(node);
  t.match(
    fleet,
    {
      defaultTargetCapacityType: 'spot',
      spotAllocationStrategy: 'price-capacity-optimized',
      launched: [{ capacityType: 'spot', instanceType: 'm5.xlarge' }],
    },
    'CreateFleet: a spot fleet, price-capacity-optimized',
  );
  const spot = karpenter.catalog.prices['m5.xlarge']?.spot ?? {};
  t.same(
    overrides(fleet),
    Object.values(spot)
      .map((p) => `m5.xlarge@${p}`)
      .sort(),
    'one override per zone, each at Priority = its spot price (Karpenter sets priorities from prices with or without an overlay; the strategy then ignores them)',
  );
  t.comment(`pod to registered node: ${ms} ms`);
  t.equal(labels['topology.kubernetes.io/region'], REGION, 'the node names the region');
});

t.test(
  "the Pod Identity watcher, once that node named the region: AWS's prices for it, with the agent's credentials",
  async (t) => {
    const t0 = Date.now();
    await until(
      'the Pod Identity watcher read AWS',
      async () => {
        const text = await podIdentityMetrics();
        return (
          counter(text, 'veneer_nodewatcher_prices_known', { kind: 'on_demand', source: 'aws' }) > 0 &&
          counter(text, 'veneer_nodewatcher_price_refreshes_total', { kind: 'spot', result: 'ok' }) > 0
        );
      },
      30_000,
    );
    t.comment(`prices from AWS ${Date.now() - t0} ms after the node registered`);
    t.match(
      podIdentityLog().find((l) => l.msg === "prices: the region, from the nodes' topology.kubernetes.io/region"),
      { region: REGION, regionFrom: 'nodes', mode: 'aws' },
      'the log says the nodes named it, and that prices are read from AWS',
    );
    const text = await podIdentityMetrics();
    for (const kind of ['on_demand', 'spot', 'offerings'])
      t.equal(
        counter(text, 'veneer_nodewatcher_price_refreshes_total', { kind, result: 'error' }),
        0,
        `no ${kind} reading failed`,
      );
    t.equal(
      counter(text, 'veneer_nodewatcher_prices_known', { kind: 'on_demand', source: 'aws' }),
      staticOnDemandPrices(REGION).size,
      "on-demand prices from the Price List (Karpenter's own table)",
    );
    t.ok(agent.served > 0 && agent.refused === 0, `credentials from the Pod Identity agent (${agent.served} requests)`);
    t.ok(
      priceList.requests.length > 0 &&
        priceList.requests.every((r) => r.Filters?.some((f) => f.Field === 'regionCode' && f.Value === REGION)),
      `the Price List asked for ${REGION} (${priceList.requests.length} pages)`,
    );
  },
);

t.test(
  'with it: on-demand, prioritized at Priority 0, recorded at CREATE with the overlay Karpenter applied',
  async (t) => {
    await custom.createClusterCustomObject({ ...OVERLAY_API, body: RI });
    await until(
      'Karpenter validated the overlay',
      async () => {
        const o = (await custom.getClusterCustomObject({ ...OVERLAY_API, name: RI.metadata.name })) as {
          status?: { conditions?: { type: string; status: string }[] };
        };
        return o.status?.conditions?.some((c) => c.type === 'Ready' && c.status === 'True') ?? false;
      },
      30_000,
    );
    await bothCount(1);
    // Creation timestamps have whole seconds: the launch comes in a later second than the validation.
    await sleep(1100);
    const { node, claim, ms } = await launch('with-overlay');
    flips.ri = node.metadata?.name ?? '';
    const labels = node.metadata?.labels ?? {};
    t.equal(labels['karpenter.sh/capacity-type'], 'on-demand', 'launched on-demand');
    t.equal(labels['node.kubernetes.io/instance-type'], 'm5.xlarge');
    t.same(
      claim?.spec?.requirements?.find((r) => r.key === 'karpenter.sh/capacity-type')?.values?.sort(),
      ['on-demand', 'spot'],
      "the NodeClaim still allowed spot: the flip is the AWS provider's spot offering filter",
    );
    const fleet = fleetOf(node);
    t.match(
      fleet,
      {
        defaultTargetCapacityType: 'on-demand',
        onDemandAllocationStrategy: 'prioritized',
        launched: [{ capacityType: 'on-demand', instanceType: 'm5.xlarge' }],
      },
      'CreateFleet: an on-demand fleet, prioritized',
    );
    t.same(
      overrides(fleet),
      ['m5.xlarge@0', 'm5.xlarge@0', 'm5.xlarge@0'],
      "every override at Priority 0, the overlay's price",
    );
    t.equal(
      claim?.metadata.annotations?.[PRICE_OVERLAY_APPLIED],
      'true',
      `Karpenter's ${PRICE_OVERLAY_APPLIED} on the NodeClaim`,
    );
    t.equal(node.metadata?.annotations?.[PRICE_OVERLAY_APPLIED], 'true', '...copied to the node');
    t.match(
      labels,
      {
        'veneer.io/overlay-influenced': 'true',
        'veneer.io/matching-overlay': RI.metadata.name,
        'veneer.io/capacity-type': 'reserved-instance',
        'veneer.io/instance-type': 'm5.xlarge',
        'veneer.io/region': REGION,
      },
      'the record names the Reserved Instance overlay',
    );
    const story = storyOf(node.metadata);
    t.match(
      story,
      { decidedBy: 'webhook', basis: 'exact', characteristicsFrom: 'node+nodeclaim' },
      'decided at CREATE by the webhook, from the node and its NodeClaim',
    );
    t.equal(labels['veneer.io/overlay-effect'], 'capacity-type', 'the effect: without the overlay, spot');
    t.match(
      story?.effect,
      {
        verdict: 'capacity-type',
        with: { capacityType: 'on-demand', strategy: 'prioritized', instanceTypes: ['m5.xlarge'] },
        without: { capacityType: 'spot', strategy: 'price-capacity-optimized', instanceTypes: ['m5.xlarge'] },
        launched: { listPrice: 0.192, price: 0 },
        overlays: [RI.metadata.name],
        prices: { source: 'static+ec2-spot' },
      },
      'the counterfactual is the launch the first test saw: spot m5.xlarge, price-capacity-optimized',
    );
    const selected = JSON.parse(
      (await env.cp.get('/api/v1/nodes?labelSelector=veneer.io%2Foverlay-effect%3Dcapacity-type')).body,
    ) as { items: { metadata: { name: string } }[] };
    t.same(
      selected.items.map((n) => n.metadata.name),
      [node.metadata?.name],
      "the README's `kubectl get nodes -l veneer.io/overlay-effect=capacity-type` lists it, and only it",
    );

    const judge = new KarpenterJudge(AWS_KARPENTER_VERSION);
    t.teardown(() => judge.close());
    const answer = await judge.judge(awsJudgeCase([node], karpenter.nodePools, [RI], karpenter.catalog));
    t.equal(answer.error, undefined, "the judge's Reconcile succeeded");
    t.same(
      answer.applied,
      [RI.metadata.name],
      "Karpenter's own store applies the Reserved Instance overlay's price to this offering",
    );
    t.comment(`pod to registered node: ${ms} ms`);

    // The command line explains the same effect: live, and offline on the objects as the API serves them.
    const name = node.metadata!.name!;
    const prices = ['--prices-source', 'isolated', '--prices-region', REGION];
    const live = await explain([name, ...prices, '-o', 'json'], { KUBECONFIG: env.cp.writeKubeConfig() });
    t.equal(live.code, 0, live.err);
    const effect = {
      verdict: 'capacity-type',
      with: { capacityType: 'on-demand', instanceTypes: ['m5.xlarge'] },
      without: { capacityType: 'spot', instanceTypes: ['m5.xlarge'] },
      prices: { source: 'static+ec2-spot' },
    };
    const [explained] = JSON.parse(live.out) as Explanation[];
    t.match(explained?.effect, effect, 'explain NODE: the effect the record holds');
    t.equal(explained?.effectNow, undefined, 'and decided again now, the same');
    const table = await explain([name, ...prices], { KUBECONFIG: env.cp.writeKubeConfig() });
    t.match(
      table.out,
      /^ {2}effect: capacity-type \(without the selected overlays Karpenter would have launched spot\)$/m,
    );
    t.match(table.out, /^ {4}capacity type +on-demand +spot$/m, 'both launches side by side');
    t.match(table.out, /^ {4}CreateFleet strategy +prioritized +price-capacity-optimized$/m);

    const dir = t.testdir();
    const files: Record<string, string> = {
      '--nodes': '/api/v1/nodes',
      '--nodeclaims': '/apis/karpenter.sh/v1/nodeclaims',
      '--overlays': '/apis/karpenter.sh/v1alpha1/nodeoverlays',
      '--nodepools': '/apis/karpenter.sh/v1/nodepools',
      '--ec2nodeclasses': '/apis/karpenter.k8s.aws/v1/ec2nodeclasses',
    };
    const args: string[] = [];
    for (const [flag, path] of Object.entries(files)) {
      const file = join(dir, `${flag.slice(2)}.json`);
      writeFileSync(file, (await env.cp.get(path)).body);
      args.push(flag, file);
    }
    const offline = await explain([...args, ...prices, '-o', 'json']);
    t.equal(offline.code, 0, offline.err);
    const fromFiles = (JSON.parse(offline.out) as Explanation[]).find((r) => r.node === name);
    t.match(fromFiles?.effect, effect, 'offline, with --ec2nodeclasses: the same effect');
    t.equal(fromFiles?.effectNow, undefined, 'decided again from the files, the same');
  },
);

/** Creates an overlay and waits until Karpenter validated it and the watcher counts `counted` overlays. */
async function addOverlay(o: { metadata: { name: string } }, counted: number) {
  await custom.createClusterCustomObject({ ...OVERLAY_API, body: o });
  await until(
    `Karpenter validated ${o.metadata.name}`,
    async () => {
      const got = (await custom.getClusterCustomObject({ ...OVERLAY_API, name: o.metadata.name })) as {
        status?: { conditions?: { type: string; status: string }[] };
      };
      return got.status?.conditions?.some((c) => c.type === 'Ready' && c.status === 'True') ?? false;
    },
    30_000,
  );
  await bothCount(counted);
  await sleep(1100);
}

async function removeOverlay(name: string, counted: number) {
  await custom.deleteClusterCustomObject({ ...OVERLAY_API, name });
  await bothCount(counted);
  // Karpenter's store drops it on its next reconcile of the overlays.
  await sleep(2000);
}

const effectOf = (node: k8s.V1Node) => storyOf(node.metadata)?.effect;

t.test('a -90% on-demand overlay on a family flips an unpinned launch from spot: capacity-type', async (t) => {
  await removeOverlay(RI.metadata.name, 0);
  // Generation 6 (c6i and r6i), 2 vCPUs enough: without an overlay the cheapest spot offering wins.
  const pod = { cpu: '1500m', nodeSelector: { 'karpenter.k8s.aws/instance-generation': '6' } };
  const spot = await launch('family-no-overlay', pod);
  t.equal(spot.node.metadata?.labels?.['karpenter.sh/capacity-type'], 'spot', 'without the overlay: spot');
  const cut = {
    ...computeSavingsPlan(),
    metadata: { ...computeSavingsPlan().metadata, name: 'c6i-on-demand-90' },
    spec: {
      requirements: [
        { key: 'karpenter.sh/capacity-type', operator: 'In', values: ['on-demand'] },
        { key: 'karpenter.k8s.aws/instance-family', operator: 'In', values: ['c6i'] },
      ],
      priceAdjustment: '-90%',
      weight: 10,
    },
  };
  await addOverlay(cut, 1);
  const { node } = await launch('family-with-overlay', pod);
  flips.family = node.metadata?.name ?? '';
  const labels = node.metadata?.labels ?? {};
  t.equal(labels['karpenter.sh/capacity-type'], 'on-demand', 'with it: on-demand');
  t.equal(labels['karpenter.k8s.aws/instance-family'], 'c6i');
  t.equal(labels['veneer.io/overlay-effect'], 'capacity-type');
  t.match(
    effectOf(node),
    { verdict: 'capacity-type', without: { capacityType: 'spot' }, overlays: ['c6i-on-demand-90'] },
    'the counterfactual, spot, is what launched without it',
  );
  await removeOverlay('c6i-on-demand-90', 0);
});

let cheapest = '';
t.test(
  'an on-demand pod where an overlay reorders the candidates: instance-type, naming the type that launches once it is deleted',
  async (t) => {
    // 1850m fits a 2-vCPU type but none of the nodes already up (the on-demand m5.xlarge has 1800m free).
    const pod = { cpu: '1850m', capacityType: 'on-demand' as const };
    const m5 = reservedInstance('m5.large', REGION);
    await addOverlay(m5, 1);
    const { node } = await launch('reordered', pod);
    t.equal(node.metadata?.labels?.['node.kubernetes.io/instance-type'], 'm5.large', 'with the overlay: its type');
    t.equal(node.metadata?.labels?.['veneer.io/overlay-effect'], 'instance-type');
    const effect = effectOf(node);
    t.match(effect, {
      verdict: 'instance-type',
      with: { capacityType: 'on-demand', strategy: 'prioritized' },
      without: { capacityType: 'on-demand', strategy: 'lowest-price' },
    });
    t.equal(effect?.without?.instanceTypes.length, 1, 'one type without it');
    cheapest = effect?.without?.instanceTypes[0] ?? '';
    await removeOverlay(m5.metadata.name, 0);
    const again = await launch('reordered-again', pod);
    t.equal(
      again.node.metadata?.labels?.['node.kubernetes.io/instance-type'],
      cheapest,
      `without the overlay, ${cheapest} launches: the record named it`,
    );
    t.equal(again.node.metadata?.labels?.['veneer.io/overlay-effect'], 'none', 'no overlay: none');
  },
);

t.test('an overlay on the type that was cheapest anyway: none', async (t) => {
  const ri = reservedInstance(cheapest, REGION);
  await addOverlay(ri, 1);
  const { node } = await launch('cheapest-anyway', { cpu: '1850m', capacityType: 'on-demand' });
  t.equal(node.metadata?.labels?.['node.kubernetes.io/instance-type'], cheapest);
  t.equal(node.metadata?.labels?.['veneer.io/overlay-influenced'], 'true', 'influenced: the overlay priced it');
  t.equal(node.metadata?.labels?.['veneer.io/overlay-effect'], 'none', 'yet it changed nothing');
  t.match(effectOf(node), { verdict: 'none', without: { instanceTypes: [cheapest] } });
  await removeOverlay(ri.metadata.name, 0);
});

t.test(
  'with credentials and no region (EKS Pod Identity), every record the same as with the region in the environment (IRSA)',
  async (t) => {
    const withRegion = recordKeys('veneer.io');
    const noRegion = recordKeys(POD_IDENTITY_NS);
    const labelsOf = (labels: Record<string, string>, keys: typeof withRegion) => ({
      influenced: labels[keys.influenced],
      matchingOverlay: labels[keys.matchingOverlay],
      ...Object.fromEntries(Object.entries(keys.copied).map(([k, key]) => [k, labels[key]])),
      effect: labels[keys.effect],
    });
    // All but when it was written (labeledAt), the label keys (their prefix) and the prices' source and age.
    const decisionOf = (story: DecisionStory | undefined) => {
      if (story === undefined) return undefined;
      const { labeledAt: _at, labels: _keys, effect, ...rest } = story;
      const { prices: _prices, ...replay } = effect ?? {};
      return { ...rest, effect: replay };
    };
    const verdicts: string[] = [];
    const nodes = (await core.listNode()).items;
    for (const node of nodes) {
      const name = node.metadata?.name ?? '';
      const labels = node.metadata?.labels ?? {};
      const annotations = node.metadata?.annotations ?? {};
      const first = readStory(annotations[withRegion.decisionAnnotation]);
      const second = readStory(annotations[noRegion.decisionAnnotation]);
      if (first === undefined) {
        t.equal(second, undefined, `${name} (${labels['karpenter.sh/capacity-type']}): no record by either`);
        continue;
      }
      t.same(labelsOf(labels, noRegion), labelsOf(labels, withRegion), `${name}: the same labels`);
      t.same(decisionOf(second), decisionOf(first), `${name}: the same decision and effect (${first.effect?.verdict})`);
      t.match(
        second,
        { decidedBy: 'webhook', effect: { prices: { source: 'aws' } } },
        `${name}: by its webhook, with AWS's prices`,
      );
      t.match(
        first,
        { decidedBy: 'webhook', effect: { prices: { source: 'static+ec2-spot' } } },
        `${name}: the first watcher's by its webhook, with the static table and EC2's spot prices`,
      );
      verdicts.push(first.effect?.verdict ?? '-');
    }
    const effectOn = (name: string) =>
      nodes.find((n) => n.metadata?.name === name)?.metadata?.labels?.[noRegion.effect];
    t.same(
      [effectOn(flips.ri), effectOn(flips.family)],
      ['capacity-type', 'capacity-type'],
      'the RI flip and the -90% flip: capacity-type without the region too (not unknown, no-spot-prices)',
    );
    t.equal(
      counter(await podIdentityMetrics(), 'veneer_nodewatcher_effect_unknown_total', {}),
      0,
      'no effect unknown to the Pod Identity watcher',
    );
    t.comment(`compared ${verdicts.length} records: ${verdicts.sort().join(', ')}`);
  },
);

t.test(
  "the PromQL of the README and docs/effect.md, evaluated by Prometheus' engine (promtool) on the watcher's own metrics",
  async (t) => {
    const root = join(import.meta.dirname, '..', '..', '..');
    const exprs = ['README.md', 'docs/effect.md']
      .flatMap((f) => [...readFileSync(join(root, f), 'utf8').matchAll(/```promql\n([\s\S]*?)```/g)])
      .flatMap((m) =>
        m[1]!
          .split('\n')
          .map((l) => l.replace(/\s+#.*$/, '').trim())
          .filter(Boolean),
      );
    t.ok(exprs.length >= 4, `${exprs.length} queries`);
    const dir = t.testdir();
    writeFileSync(
      join(dir, 'queries.yaml'),
      stringify({ groups: [{ name: 'docs', rules: exprs.map((expr, i) => ({ record: `docs:query:${i}`, expr })) }] }),
    );
    const check = promtool(['check', 'rules', join(dir, 'queries.yaml')]);
    t.equal(check.status, 0, 'every query parses', { output: check.stdout + check.stderr });

    // What they must say, from the Nodes themselves: the recorded nodes by effect, the influenced ones.
    const nodes = (await core.listNode()).items.map((n) => n.metadata?.labels ?? {});
    const byEffect = EFFECTS.map((effect) => ({
      labels: `{effect="${effect}"}`,
      value: nodes.filter((l) => l['veneer.io/overlay-effect'] === effect).length,
    }));
    t.ok(byEffect.filter((e) => e.value > 0).length >= 3, 'capacity-type, instance-type and none all occurred');
    const expected = new Map([
      ['max by (effect) (veneer_nodewatcher_nodes_by_effect_current)', byEffect],
      [
        'sum(max by (capacity_type) (veneer_nodewatcher_nodes_influenced_current))',
        [{ labels: '{}', value: nodes.filter((l) => l['veneer.io/overlay-influenced'] === 'true').length }],
      ],
    ]);
    t.same(
      [...expected.keys()].filter((e) => !exprs.includes(e)),
      [],
      'the queries checked are in the docs',
    );
    const text = await env.watcher.metrics.registry.metrics();
    const scrapes = [
      { minute: 0, text },
      { minute: 10, text },
    ];
    const metricsUsed = [...new Set([...expected.keys()].flatMap((e) => e.match(/veneer_nodewatcher_[a-z_]+/g) ?? []))];
    const tests = stringify({
      rule_files: ['rules.yaml'],
      evaluation_interval: '1m',
      tests: [
        {
          interval: '1m',
          input_series: metricsUsed.flatMap((m) => inputSeries(scrapes, m)),
          promql_expr_test: [...expected].map(([expr, exp_samples]) => ({ expr, eval_time: '10m', exp_samples })),
        },
      ],
    });
    const run = testRules(tests);
    t.equal(run.status, 0, 'on the scraped series they say what the Nodes say', { output: run.output, tests });
  },
);

t.test(
  "what the overlays steered is worth an hour, and their launches: the watcher's series and the dashboard's panel, evaluated by promtool",
  async (t) => {
    // From the Nodes: each record naming an overlay, and the list price its effect was judged with.
    const counts: Record<string, number> = {};
    const steered = new Map<string, number>();
    for (const n of (await core.listNode()).items) {
      const l = n.metadata?.labels ?? {};
      const overlay = l['veneer.io/matching-overlay'];
      if (l['veneer.io/overlay-influenced'] !== 'true' || !overlay) continue;
      const effect = l['veneer.io/overlay-effect'] ?? 'unknown';
      counts[`${overlay} ${effect}`] = (counts[`${overlay} ${effect}`] ?? 0) + 1;
      if (effect !== 'capacity-type' && effect !== 'instance-type') continue;
      const listPrice = storyOf(n.metadata)?.effect?.launched?.listPrice;
      t.ok(listPrice !== undefined, `${n.metadata?.name}: the record has the launched list price`);
      steered.set(overlay, Math.round(((steered.get(overlay) ?? 0) + (listPrice ?? 0)) * 10_000) / 10_000);
    }
    t.ok(steered.size >= 3, `overlays that steered: ${JSON.stringify(Object.fromEntries(steered))}`);
    const text = await env.watcher.metrics.registry.metrics();
    const series = (metric: string) =>
      Object.fromEntries(
        [...text.matchAll(new RegExp(`^${metric}\\{overlay="([^"]+)",effect="([^"]+)"\\} (\\S+)$`, 'gm'))]
          .filter((m) => Number(m[3]) > 0)
          .map((m) => [`${m[1]} ${m[2]}`, Number(m[3])]),
      );
    t.same(
      series('veneer_nodewatcher_launches_total'),
      counts,
      'launches_total: each record once, by overlay and effect',
    );

    const expr = dashboardQueries().find((q) => q.expr.includes('veneer_nodewatcher_overlay_dollars_per_hour'))!.expr;
    const scrapes = [
      { minute: 0, text },
      { minute: 10, text },
    ];
    const tests = stringify({
      rule_files: ['rules.yaml'],
      evaluation_interval: '1m',
      tests: [
        {
          interval: '1m',
          input_series: inputSeries(scrapes, 'veneer_nodewatcher_overlay_dollars_per_hour'),
          promql_expr_test: [
            {
              expr,
              eval_time: '10m',
              exp_samples: [...steered].map(([overlay, value]) => ({ labels: `{overlay="${overlay}"}`, value })),
            },
          ],
        },
      ],
    });
    const run = testRules(tests);
    t.equal(run.status, 0, "the steered $/h panel gives each overlay its nodes' list price, as the records say", {
      output: run.output,
      tests,
    });
  },
);

t.test('footprint', async (t) => {
  const u = karpenter.usage();
  t.ok(u.karpenter && u.scheduler, 'Karpenter and kube-scheduler still running');
  t.comment(
    `karpenter-aws RSS ${u.karpenter?.rssMiB.toFixed(0)} MiB (peak ${u.karpenter?.peakRssMiB.toFixed(0)}), ${u.karpenter?.cpuSeconds.toFixed(1)} CPU-s; file wall time ${((Date.now() - started) / 1000).toFixed(1)} s`,
  );
});

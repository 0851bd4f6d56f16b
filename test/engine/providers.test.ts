// Which cloud provider's keys a launch is judged with: `auto` follows the NodeClaim's
// spec.nodeClassRef.group (else the node's labels, else, past the grace period, the provider most
// NodeClaims show); an explicit setting is used as set. A provider the watcher does not know, or a
// setting the NodeClaim (or the node's labels) contradicts, makes the decision approximate and
// says why: never a confident record on a guess.
import t from 'tap';
import {
  buildReport,
  decide,
  explainer,
  KNOWN_PROVIDERS,
  MAX_UNKNOWN_GROUPS,
  parseSelector,
  providerCensus,
  readStory,
  toNodeClaimView,
  toNodeView,
  toOverlayView,
  withExtraKeys,
  type EngineSettings,
  type NodeObject,
  type OverlayObject,
} from '../../src/engine/index.ts';
import type { Decision } from '../../src/engine/decide.ts';
import type { NodeClaimObject } from '../../src/engine/node.ts';
import { countGroups, matchesSetting } from '../../src/engine/provider-census.ts';
import { chooseProvider, mostCommonGroup } from '../../src/engine/provider-choice.ts';
import { AWS_KEYS, KWOK_KEYS } from '../../src/engine/providers.ts';
import { karpenterNode, reservedInstance } from '../../kit/veneer.ts';
import { indexWith, iso, settings, T0 } from './fixtures.ts';

const auto: EngineSettings = { ...settings, provider: 'auto' };
const explicitAws: EngineSettings = { ...settings, provider: AWS_KEYS };
const policy = { selector: parseSelector('app.kubernetes.io/managed-by=veneer'), requireOverlayReady: false };
const AWS_GROUP = 'karpenter.k8s.aws';
const KWOK_GROUP = 'karpenter.kwok.sh';
const AZURE_GROUP = 'karpenter.azure.com';

// An overlay on a key only KWOK's instance types define: it prices a KWOK launch, and nothing on
// AWS (where the key is undefined). What Veneer's overlays on KWOK name.
const kwokFamily: OverlayObject = {
  metadata: { name: 'kwok-m5', labels: { 'app.kubernetes.io/managed-by': 'veneer' } },
  spec: {
    price: '0.01',
    weight: 20,
    requirements: [
      { key: 'karpenter.sh/capacity-type', operator: 'In', values: ['on-demand'] },
      { key: 'karpenter.kwok.sh/instance-family', operator: 'In', values: ['m5'] },
    ],
  },
};

/** A node as KWOK's Karpenter creates it: every NodeClaim label, KWOK's own domain among them. */
function kwokNode(name: string, createdAt = T0, extra: Record<string, string> = {}): NodeObject {
  return {
    metadata: {
      name,
      creationTimestamp: iso(createdAt),
      labels: {
        'karpenter.sh/nodepool': 'default',
        'karpenter.sh/capacity-type': 'on-demand',
        'kubernetes.io/arch': 'amd64',
        'kubernetes.io/os': 'linux',
        'node.kubernetes.io/instance-type': 'm5.xlarge',
        'topology.kubernetes.io/zone': 'us-west-2a',
        'karpenter.kwok.sh/instance-family': 'm5',
        'karpenter.kwok.sh/instance-size': 'xlarge',
        'karpenter.kwok.sh/kwoknodeclass': 'default',
        ...extra,
      },
    },
    spec: { providerID: `kwok://${name}` },
  };
}

function claimOf(name: string, group: string | undefined, labels: Record<string, string> = {}): NodeClaimObject {
  return {
    metadata: {
      name: `${name}-claim`,
      labels: { 'karpenter.sh/nodepool': 'default', 'karpenter.sh/capacity-type': 'on-demand', ...labels },
      creationTimestamp: iso(T0 - 2_000),
    },
    ...(group !== undefined ? { spec: { nodeClassRef: { group, kind: 'NodeClass', name: 'default' } } } : {}),
    status: { providerID: `kwok://${name}`, nodeName: name },
  };
}

const decideWith = (
  s: EngineSettings,
  node: NodeObject,
  claim?: NodeClaimObject,
  o: { now?: number; groups?: Map<string, number>; overlays?: OverlayObject[] } = {},
): Decision =>
  decide(
    {
      node: toNodeView(node),
      nodeClaim: claim ? toNodeClaimView(claim) : undefined,
      now: o.now ?? T0 + 5_000,
      decidedBy: 'reconciler',
      nodeClassGroups: o.groups,
    },
    indexWith(o.overlays ?? [kwokFamily]),
    s,
  );

const decided = (d: Decision) => {
  if (d.outcome !== 'influenced' && d.outcome !== 'not-influenced')
    throw new Error(`not decided: ${d.outcome}${'reason' in d ? `: ${d.reason}` : ''}`);
  return d;
};
const storyOf = (d: Decision) => readStory(decided(d).record.annotations['veneer.io/overlay-decision']);

t.test('the NodeClaim keeps only its NodeClass group, one shared string for the known groups', async (t) => {
  const a = toNodeClaimView(JSON.parse(JSON.stringify(claimOf('a', KWOK_GROUP))) as NodeClaimObject);
  const b = toNodeClaimView(JSON.parse(JSON.stringify(claimOf('b', KWOK_GROUP))) as NodeClaimObject);
  t.equal(a.nodeClassGroup, KWOK_GROUP);
  t.ok(Object.is(a.nodeClassGroup, b.nodeClassGroup) && a.nodeClassGroup === KWOK_KEYS.group, 'the same string');
  t.equal(toNodeClaimView(claimOf('c', AZURE_GROUP)).nodeClassGroup, AZURE_GROUP, 'an unknown group is kept as it is');
  t.notOk('nodeClassGroup' in toNodeClaimView(claimOf('d', undefined)), 'no nodeClassRef: no group');
  t.notOk(
    'nodeClassGroup' in toNodeClaimView({ ...claimOf('e', undefined), spec: { nodeClassRef: { group: '' } } }),
    'an empty group is none',
  );
  t.same(
    Object.keys(toNodeClaimView(claimOf('f', KWOK_GROUP))).sort(),
    ['createdAt', 'labels', 'name', 'nodeClass', 'nodeClassGroup', 'nodeName', 'providerID'],
    'nothing else of the spec (without requirements, no launch to replay)',
  );
});

t.test("auto: the NodeClaim's nodeClassRef.group picks the keys, exactly", async (t) => {
  const kwok = decided(decideWith(auto, kwokNode('k'), claimOf('k', KWOK_GROUP)));
  t.match(kwok, {
    outcome: 'influenced',
    basis: 'exact',
    overlay: { name: 'kwok-m5' },
    provider: { name: 'kwok', from: 'nodeclaim', group: KWOK_GROUP, guessed: false },
  });
  t.notOk(kwok.provider.warning);
  t.match(storyOf(kwok), { provider: 'kwok', providerFrom: 'nodeclaim', basis: 'exact' });
  t.notOk(storyOf(kwok)?.providerWarning, 'no warning in the record');
  // The very same node judged with AWS's keys: karpenter.kwok.sh/instance-family is undefined there.
  t.match(
    decideWith(explicitAws, kwokNode('k')),
    { outcome: 'not-influenced' },
    'what the default aws did to every KWOK node',
  );
  const aws = decided(
    decideWith(
      auto,
      karpenterNode({ name: 'a', instanceType: 'm5.xlarge', createdAt: iso(T0) }),
      claimOf('a', AWS_GROUP, { 'karpenter.k8s.aws/instance-family': 'm5' }),
      { overlays: [reservedInstance('m5.xlarge', 'us-west-2')] },
    ),
  );
  t.match(aws, { outcome: 'influenced', basis: 'exact', provider: { name: 'aws', from: 'nodeclaim' } });
});

t.test("auto without a NodeClaim: the domain of the node's own labels", async (t) => {
  t.match(
    decideWith(auto, kwokNode('k')),
    { outcome: 'influenced', basis: 'exact', provider: { name: 'kwok', from: 'node-labels', guessed: false } },
    'a KWOK node: karpenter.kwok.sh/*',
  );
  const kubelet = karpenterNode({ name: 'a', stage: 'kubelet', createdAt: iso(T0) });
  t.match(
    decideWith(auto, kubelet, undefined, { overlays: [] }),
    { outcome: 'not-influenced', basis: 'exact', provider: { name: 'aws', from: 'node-labels' } },
    "an AWS node at the kubelet's CREATE: karpenter.k8s.aws/ec2nodeclass",
  );
  const both = kwokNode('b', T0, { 'karpenter.k8s.aws/ec2nodeclass': 'default' });
  t.match(
    decideWith(auto, both, undefined, { now: T0 + 61_000, groups: new Map([[KWOK_GROUP, 3]]) }),
    { provider: { name: 'kwok', from: 'cluster' } },
    'labels of two providers name neither',
  );
  t.match(
    decideWith(auto, kwokNode('n'), claimOf('n', undefined)),
    { basis: 'exact', provider: { from: 'node-labels' } },
    'a NodeClaim without a nodeClassRef names nothing: the labels do',
  );
});

t.test(
  "auto with nothing that names the provider: wait for the NodeClaim, then assume the cluster's, approximately",
  async (t) => {
    const bare = kwokNode('x');
    for (const k of [
      'karpenter.kwok.sh/instance-family',
      'karpenter.kwok.sh/instance-size',
      'karpenter.kwok.sh/kwoknodeclass',
    ])
      delete bare.metadata!.labels![k];
    const groups = new Map([
      [KWOK_GROUP, 5],
      [AWS_GROUP, 1],
    ]);
    t.match(
      decideWith(auto, bare, undefined, { groups, overlays: [] }),
      {
        outcome: 'undetermined',
        reason: /its NodeClaim, whose nodeClassRef\.group names the cloud provider, is unknown/,
        retryAt: T0 + 60_000,
        provider: { from: 'cluster', guessed: true },
      },
      'within the grace period',
    );
    const late = decided(decideWith(auto, bare, undefined, { groups, overlays: [], now: T0 + 61_000 }));
    t.match(late, { outcome: 'not-influenced', basis: 'approximate', provider: { name: 'kwok', from: 'cluster' } });
    t.match(storyOf(late), {
      basis: 'approximate',
      provider: 'kwok',
      providerFrom: 'cluster',
      providerWarning: /assumed kwok, the provider most NodeClaims in the cluster show/,
    });
    const registered = {
      ...bare,
      metadata: { ...bare.metadata, labels: { ...bare.metadata!.labels, 'karpenter.sh/registered': 'true' } },
    };
    t.match(
      decideWith(auto, registered, undefined, { groups, overlays: [] }),
      { basis: 'approximate', provider: { from: 'cluster' } },
      'registered (its NodeClaim gone): decided at once, approximately',
    );
    t.match(
      decideWith(auto, bare, undefined, { overlays: [], now: T0 + 61_000 }),
      {
        basis: 'approximate',
        provider: {
          name: 'unknown',
          from: 'none',
          keys: undefined,
          warning: /nor does any NodeClaim in the cluster: judged on all the node's labels/,
        },
      },
      'no NodeClaim anywhere: unknown, all the labels stand in',
    );
    t.match(
      decideWith(auto, bare, undefined, { overlays: [], now: T0 + 61_000, groups: new Map([[AZURE_GROUP, 2]]) }),
      {
        provider: {
          name: 'unknown',
          warning: /most NodeClaims in the cluster name karpenter\.azure\.com, a provider the watcher does not know/,
        },
      },
    );
    t.match(
      decideWith(auto, bare, undefined, {
        overlays: [],
        now: T0 + 61_000,
        groups: new Map([
          [AWS_GROUP, 2],
          [KWOK_GROUP, 2],
        ]),
      }),
      { provider: { from: 'none' } },
      'a tie assumes nothing',
    );
  },
);

t.test(
  "auto, a group the watcher does not know: the node's labels stand in, approximately, and the record says why",
  async (t) => {
    const node = kwokNode('z', T0, { 'karpenter.azure.com/sku-family': 'D' });
    const azure: OverlayObject = {
      ...kwokFamily,
      metadata: { ...kwokFamily.metadata, name: 'azure-d' },
      spec: {
        ...kwokFamily.spec,
        requirements: [{ key: 'karpenter.azure.com/sku-family', operator: 'In', values: ['D'] }],
      },
    };
    const d = decided(decideWith(auto, node, claimOf('z', AZURE_GROUP), { overlays: [azure] }));
    t.match(d, {
      outcome: 'influenced',
      basis: 'approximate',
      overlay: { name: 'azure-d' },
      provider: { name: 'unknown', from: 'nodeclaim', group: AZURE_GROUP, keys: undefined },
    });
    t.match(storyOf(d), {
      basis: 'approximate',
      provider: 'unknown',
      providerFrom: 'nodeclaim',
      providerWarning:
        /NodeClaim z-claim's nodeClassRef\.group karpenter\.azure\.com is not a provider the watcher knows \(aws: karpenter\.k8s\.aws, kwok: karpenter\.kwok\.sh\).*judged on all the node's labels/,
    });
    t.match(
      decideWith(auto, node, claimOf('z', AZURE_GROUP), { overlays: [] }),
      { outcome: 'not-influenced', basis: 'approximate' },
      'never a confident false',
    );
  },
);

t.test(
  'an explicit setting is used as set; a NodeClaim or the labels of another provider make it approximate',
  async (t) => {
    const contradicted = decided(decideWith(explicitAws, kwokNode('k'), claimOf('k', KWOK_GROUP)));
    t.match(contradicted, {
      outcome: 'not-influenced',
      basis: 'approximate',
      provider: { name: 'aws', from: 'setting', group: KWOK_GROUP },
    });
    t.match(storyOf(contradicted), {
      influenced: false,
      basis: 'approximate',
      provider: 'aws',
      providerFrom: 'setting',
      providerWarning:
        "karpenterProvider is aws, but NodeClaim k-claim belongs to kwok (nodeClassRef.group karpenter.kwok.sh): Karpenter compared kwok's keys, this decision used aws's",
    });
    t.match(
      decideWith(explicitAws, kwokNode('k')),
      {
        basis: 'approximate',
        provider: {
          warning: /but the node's labels are kwok's \(karpenter\.kwok\.sh\/\.\.\.\) and its NodeClaim is unknown/,
        },
      },
      'no NodeClaim yet: its labels contradict',
    );
    t.match(decideWith(explicitAws, kwokNode('k'), claimOf('k', AZURE_GROUP)), {
      basis: 'approximate',
      provider: {
        name: 'aws',
        warning: /is not a provider the watcher knows.*judged with karpenterProvider aws's keys/,
      },
    });
    const agreed = decided(decideWith({ ...settings, provider: KWOK_KEYS }, kwokNode('k'), claimOf('k', KWOK_GROUP)));
    t.match(agreed, { basis: 'exact', overlay: { name: 'kwok-m5' }, provider: { name: 'kwok', from: 'setting' } });
    t.notOk(agreed.provider.warning, 'the NodeClaim agrees');
    t.match(
      decideWith({ ...settings, provider: KWOK_KEYS }, kwokNode('k'), claimOf('k', undefined)),
      { basis: 'exact' },
      'a NodeClaim without a group contradicts nothing',
    );
    const extended = withExtraKeys(KWOK_KEYS, ['example.com/gen']);
    t.match(
      decideWith(
        {
          ...settings,
          provider: extended,
          knownProviders: KNOWN_PROVIDERS.map((p) => withExtraKeys(p, ['example.com/gen'])),
        },
        kwokNode('k'),
        claimOf('k', KWOK_GROUP),
      ),
      { basis: 'exact' },
      'compared by name, extra keys and all',
    );
  },
);

t.test('chooseProvider, mostCommonGroup, matchesSetting and countGroups on their own', async (t) => {
  t.equal(mostCommonGroup(undefined), undefined);
  t.equal(mostCommonGroup(new Map()), undefined);
  t.equal(
    mostCommonGroup(
      new Map([
        [AWS_GROUP, 1],
        [KWOK_GROUP, 3],
      ]),
    ),
    KWOK_GROUP,
  );
  t.equal(mostCommonGroup(new Map([[AWS_GROUP, 0]])), undefined, 'no NodeClaim at all');
  t.equal(
    mostCommonGroup(
      new Map([
        [AWS_GROUP, 2],
        [KWOK_GROUP, 2],
        [AZURE_GROUP, 3],
      ]),
    ),
    AZURE_GROUP,
    'a tie below the top does not matter',
  );
  t.ok(matchesSetting('auto', 'kwok'));
  t.notOk(matchesSetting('auto', 'unknown'));
  t.ok(matchesSetting(AWS_KEYS, 'aws'));
  t.notOk(matchesSetting(AWS_KEYS, 'kwok'));
  t.same(
    [
      ...countGroups([
        { nodeClassGroup: AWS_GROUP },
        {},
        { nodeClassGroup: AWS_GROUP },
        { nodeClassGroup: KWOK_GROUP },
      ]),
    ],
    [
      [AWS_GROUP, 2],
      [KWOK_GROUP, 1],
    ],
  );
  t.match(chooseProvider('auto', KNOWN_PROVIDERS, { labels: {} }), { name: 'unknown', from: 'none', guessed: true });
});

t.test(
  'the census: every provider counted, unknown groups bounded, a warning for each provider in doubt',
  async (t) => {
    const groups = new Map([
      [KWOK_GROUP, 4],
      [AWS_GROUP, 1],
      [AZURE_GROUP, 2],
      ['example.com', 0],
    ]);
    t.same(providerCensus('auto', KNOWN_PROVIDERS, groups), {
      setting: 'auto',
      nodeClaims: [
        { provider: 'aws', nodeClaims: 1, matchesSetting: true },
        { provider: 'kwok', nodeClaims: 4, matchesSetting: true },
        { provider: 'unknown', nodeClaims: 2, matchesSetting: false },
      ],
      unknownGroups: [{ group: AZURE_GROUP, nodeClaims: 2 }],
      assumed: 'kwok',
      warnings: [
        '2 NodeClaims name nodeClassRef.group karpenter.azure.com, a provider the watcher does not know (aws: karpenter.k8s.aws, kwok: karpenter.kwok.sh): their nodes are recorded with basis approximate',
      ],
    });
    const explicit = providerCensus(AWS_KEYS, KNOWN_PROVIDERS, new Map([[KWOK_GROUP, 1]]));
    t.same(
      explicit.nodeClaims.map((c) => [c.provider, c.nodeClaims, c.matchesSetting]),
      [
        ['aws', 0, true],
        ['kwok', 1, false],
        ['unknown', 0, false],
      ],
    );
    t.same(explicit.warnings, [
      'karpenterProvider is aws, but 1 NodeClaim belongs to kwok (nodeClassRef.group karpenter.kwok.sh): their nodes are recorded with basis approximate; set karpenterProvider to auto or kwok',
    ]);
    t.equal(explicit.assumed, null, 'set explicitly: nothing is assumed');
    t.equal(providerCensus('auto', KNOWN_PROVIDERS, new Map([[AZURE_GROUP, 1]])).assumed, 'unknown');
    t.equal(providerCensus('auto', KNOWN_PROVIDERS, new Map()).assumed, null);
    const many = new Map(
      Array.from(
        { length: MAX_UNKNOWN_GROUPS + 3 },
        (_, i) => [`g${String(i).padStart(2, '0')}.example.com`, 1] as [string, number],
      ),
    );
    const bounded = providerCensus('auto', KNOWN_PROVIDERS, many);
    t.equal(bounded.unknownGroups.length, MAX_UNKNOWN_GROUPS, 'at most this many groups named');
    t.equal(bounded.warnings.at(-1), '3 more unknown nodeClassRef groups');
    t.same(
      bounded.nodeClaims.find((c) => c.provider === 'unknown'),
      { provider: 'unknown', nodeClaims: MAX_UNKNOWN_GROUPS + 3, matchesSetting: false },
      'all counted',
    );
  },
);

t.test(
  'explain says which provider and why; report counts NodeClaims by provider and the nodes in doubt',
  async (t) => {
    const overlays = [
      toOverlayView({ ...kwokFamily, metadata: { ...kwokFamily.metadata, creationTimestamp: iso(T0 - 3_600_000) } }),
    ];
    const claims = [
      toNodeClaimView(claimOf('k', KWOK_GROUP)),
      toNodeClaimView(claimOf('z', AZURE_GROUP)),
      toNodeClaimView(claimOf('k2', KWOK_GROUP)),
    ];
    const groups = countGroups(claims);
    const lookup = {
      byProviderID: (id: string) => claims.find((c) => c.providerID === id),
      byName: () => undefined,
      groups,
    };
    const explain = explainer(
      { overlays, nodePools: [], nodeClaims: lookup },
      { now: T0 + 5_000, knownSince: T0 - 3_600_000 },
      auto,
      policy,
    );
    t.match(explain(toNodeView(kwokNode('k'))), {
      outcome: 'influenced',
      provider: { name: 'kwok', from: 'nodeclaim', group: KWOK_GROUP },
    });
    t.notOk(explain(toNodeView(kwokNode('k'))).provider?.warning);
    t.match(explain(toNodeView(kwokNode('z'))), {
      basis: 'approximate',
      provider: { name: 'unknown', group: AZURE_GROUP, warning: /not a provider the watcher knows/ },
    });
    const spot = kwokNode('s', T0, { 'karpenter.sh/capacity-type': 'spot' });
    t.notOk('provider' in explain(toNodeView(spot)), 'out of scope: no provider to speak of');
    const young = kwokNode('y');
    for (const k of [
      'karpenter.kwok.sh/instance-family',
      'karpenter.kwok.sh/instance-size',
      'karpenter.kwok.sh/kwoknodeclass',
    ])
      delete young.metadata!.labels![k];
    const waiting = explainer(
      { overlays: [], nodePools: [], nodeClaims: lookup },
      { now: T0 + 5_000, knownSince: T0 - 3_600_000 },
      auto,
      policy,
    )(toNodeView(young));
    t.match(
      waiting,
      { outcome: 'undetermined', provider: { name: 'kwok', from: 'cluster', warning: /assumed kwok/ } },
      'waiting for its NodeClaim: what would be assumed',
    );

    const report = buildReport({
      nodes: [kwokNode('k'), kwokNode('z'), young, spot],
      overlays,
      nodePools: [],
      nodeClaims: lookup,
      now: T0 + 5_000,
      settings: auto,
      policy,
    });
    t.match(
      report.provider,
      { setting: 'auto', assumed: 'kwok', nodesInDoubt: 2, unknownGroups: [{ group: AZURE_GROUP, nodeClaims: 1 }] },
      'z (unknown group) and the waiting node (assumed)',
    );
    t.same(
      report.provider.nodeClaims.map((c) => [c.provider, c.nodeClaims]),
      [
        ['aws', 0],
        ['kwok', 2],
        ['unknown', 1],
      ],
    );
    const plain = buildReport({
      nodes: [kwokNode('k')],
      overlays,
      nodePools: [],
      nodeClaims: { byProviderID: () => undefined, byName: () => undefined },
      now: T0 + 5_000,
      settings: auto,
      policy,
    });
    t.match(
      plain.provider,
      { nodesInDoubt: 0, assumed: null, warnings: [] },
      'no NodeClaims given: the labels name the provider',
    );
    const wrong = buildReport({
      nodes: [kwokNode('k')],
      overlays,
      nodePools: [],
      nodeClaims: lookup,
      now: T0 + 5_000,
      settings: explicitAws,
      policy,
    });
    t.match(wrong.provider, {
      setting: 'aws',
      nodesInDoubt: 1,
      warnings: [
        /^1 NodeClaim names nodeClassRef\.group karpenter\.azure\.com/,
        /karpenterProvider is aws, but 2 NodeClaims belong to kwok/,
      ],
    });
  },
);

// The effect's verdicts, one case per rule of the replay; the judge (test/engine/launch-differential
// .test.ts) compares the engine with Karpenter's own AWS launch code on generated launches.
import t from 'tap';
import { toNodePoolView, toOverlayView, type OverlayObject, type PriceBook } from '../../../src/engine/index.ts';
import { annotatedWith, launchEffect } from '../../../src/engine/effect/effect.ts';
import type { ClaimForEffect } from '../../../src/engine/effect/types.ts';
import { AWS_KEYS, KWOK_KEYS } from '../../../src/engine/providers.ts';
import { computeSavingsPlan, ec2InstanceSavingsPlan, reservedInstance } from '../../../kit/veneer.ts';

const ZONES = ['us-east-1a', 'us-east-1b', 'us-east-1c'];
const OD: Record<string, number> = {
  'm5.large': 0.096,
  'm5.xlarge': 0.192,
  'c6i.large': 0.085,
  'c6i.xlarge': 0.17,
  'r6i.large': 0.126,
  'p3.2xlarge': 3.06,
  'm5.metal': 4.608,
};
const SPOT: Record<string, number> = {
  'm5.large': 0.04,
  'm5.xlarge': 0.0672,
  'c6i.large': 0.03,
  'c6i.xlarge': 0.06,
  'r6i.large': 0.05,
  'p3.2xlarge': 0.9,
  'm5.metal': 1.5,
};

/** `spot` null: a source without spot prices. */
function prices(od = OD, spot: Record<string, number> | null = SPOT): PriceBook {
  return {
    source: 'test',
    asOf: 0,
    region: 'us-east-1',
    hasSpot: spot !== null,
    onDemand: (x) => od[x],
    spot: (x) => spot?.[x],
  };
}
const pool = toNodePoolView({ metadata: { name: 'default' } });
const overlay = (
  o: OverlayObject,
  extra: Partial<{ name: string; weight: number; labels: Record<string, string> }> = {},
) =>
  toOverlayView({
    ...o,
    metadata: {
      ...o.metadata,
      ...(extra.name ? { name: extra.name } : {}),
      ...(extra.labels ? { labels: extra.labels } : {}),
    },
    spec: { ...o.spec, ...(extra.weight !== undefined ? { weight: extra.weight } : {}) },
  });
const RI = overlay(reservedInstance('m5.xlarge', 'us-east-1'));
const CSP = overlay(computeSavingsPlan());
const claimOf = (
  candidates: string[],
  capacityTypes = ['on-demand', 'spot'],
  extra: Partial<ClaimForEffect> = {},
): ClaimForEffect => ({
  candidates,
  pinned: { 'kubernetes.io/arch': 'amd64' },
  capacityTypes: new Set(capacityTypes),
  minValues: false,
  priceOverlayApplied: true,
  ...extra,
});

function effect(o: {
  candidates: string[];
  launched: string;
  overlays: { overlay: ReturnType<typeof overlay>; selected?: boolean }[];
  capacityTypes?: string[];
  claim?: Partial<ClaimForEffect>;
  prices?: PriceBook | undefined;
  zones?: string[] | undefined;
  conflicted?: ReturnType<typeof overlay>[];
}) {
  return launchEffect({
    provider: AWS_KEYS,
    launched: { instanceType: o.launched, capacityType: 'on-demand' },
    claim: claimOf(o.candidates, o.capacityTypes, o.claim),
    pool,
    counted: o.overlays.map((c) => ({ overlay: c.overlay, selected: c.selected ?? true })),
    conflicted: o.conflicted ?? [],
    prices: 'prices' in o ? o.prices : prices(),
    zones: 'zones' in o ? (o.zones ? new Set(o.zones) : undefined) : new Set(ZONES),
  });
}

t.test('the RI overlay flips a spot launch to on-demand: capacity-type', async (t) => {
  const e = effect({ candidates: ['m5.xlarge'], launched: 'm5.xlarge', overlays: [{ overlay: RI }] });
  t.equal(e.verdict, 'capacity-type');
  t.match(e, {
    with: { capacityType: 'on-demand', strategy: 'prioritized', instanceTypes: ['m5.xlarge'] },
    without: { capacityType: 'spot', strategy: 'price-capacity-optimized', instanceTypes: ['m5.xlarge'] },
    launched: { listPrice: 0.192, price: 0 },
    overlays: ['cost-aware-ri-m5.xlarge-us-east-1'],
  });
});

t.test(
  'an on-demand-only NodePool where the overlay reorders the candidates: instance-type, naming the type',
  async (t) => {
    const e = effect({
      candidates: ['m5.xlarge', 'm5.large', 'c6i.large'],
      capacityTypes: ['on-demand'],
      launched: 'm5.xlarge',
      overlays: [{ overlay: RI }],
    });
    t.equal(e.verdict, 'instance-type');
    t.match(e.without, {
      capacityType: 'on-demand',
      strategy: 'lowest-price',
      instanceTypes: ['c6i.large'],
      listPrice: 0.085,
    });
  },
);

t.test('an overlay on the type that was cheapest anyway: none', async (t) => {
  const ri = overlay(reservedInstance('c6i.large', 'us-east-1'));
  const e = effect({
    candidates: ['m5.xlarge', 'c6i.large'],
    capacityTypes: ['on-demand'],
    launched: 'c6i.large',
    overlays: [{ overlay: ri }],
  });
  t.equal(e.verdict, 'none');
});

t.test(
  'a Compute SP pricing every candidate at 0: the tie EC2 breaks among them, none where the cheapest won',
  async (t) => {
    const e = effect({
      candidates: ['m5.xlarge', 'm5.large', 'c6i.large'],
      capacityTypes: ['on-demand'],
      launched: 'c6i.large',
      overlays: [{ overlay: CSP }],
    });
    t.equal(e.verdict, 'none');
    t.same(
      e.with?.instanceTypes,
      ['c6i.large', 'm5.large', 'm5.xlarge'],
      'with the overlay every candidate ties at priority 0',
    );
    const other = effect({
      candidates: ['m5.xlarge', 'm5.large', 'c6i.large'],
      capacityTypes: ['on-demand'],
      launched: 'm5.large',
      overlays: [{ overlay: CSP }],
    });
    t.equal(other.verdict, 'instance-type', 'EC2 broke the tie for m5.large; without the overlay c6i.large');
  },
);

t.test('without the selected overlays EC2 breaks a tie that includes the launched type: unknown (tie)', async (t) => {
  const od = { ...OD, 'c6i.large': 0.096 };
  const ri = overlay(reservedInstance('c6i.large', 'us-east-1'));
  const e = effect({
    candidates: ['m5.large', 'c6i.large'],
    capacityTypes: ['on-demand'],
    launched: 'c6i.large',
    overlays: [{ overlay: ri }],
    prices: prices(od),
  });
  t.match(e, { verdict: 'unknown', reasonCode: 'tie' });
  t.match(e.reason, /c6i\.large, m5\.large/);
});

t.test("a launch Karpenter's prices do not predict: unknown (fallback)", async (t) => {
  const e = effect({
    candidates: ['m5.xlarge', 'c6i.large'],
    capacityTypes: ['on-demand'],
    launched: 'c6i.large',
    overlays: [{ overlay: RI }],
  });
  t.match(e, { verdict: 'unknown', reasonCode: 'fallback' });
  t.match(e.reason, /predict on-demand m5\.xlarge/);
});

t.test('an overlay the selector does not pick stays in both worlds', async (t) => {
  const foreign = overlay(computeSavingsPlan(), { name: 'platform-team-discount', labels: { team: 'platform' } });
  // The foreign overlay alone already makes every on-demand offering 0: the RI changes nothing.
  const e = effect({
    candidates: ['m5.xlarge'],
    launched: 'm5.xlarge',
    overlays: [{ overlay: RI }, { overlay: foreign, selected: false }],
  });
  t.equal(e.verdict, 'none');
  t.same(e.overlays, ['cost-aware-ri-m5.xlarge-us-east-1'], 'only the selected overlay is named');
  t.equal(e.without?.strategy, 'prioritized', 'the foreign overlay still priced a candidate: the annotation stays');
});

t.test('no selected overlay priced a candidate: none, prices or not', async (t) => {
  const ec2sp = overlay(ec2InstanceSavingsPlan('r6i', 'us-east-1'));
  // With no overlay on its candidate, an on-demand-only NodeClaim is launched alike in both worlds.
  const plain = {
    candidates: ['m5.xlarge'],
    capacityTypes: ['on-demand'],
    launched: 'm5.xlarge',
    overlays: [{ overlay: ec2sp }],
    claim: { priceOverlayApplied: false },
  };
  t.equal(effect(plain).verdict, 'none');
  t.equal(effect({ ...plain, prices: undefined }).verdict, 'none', 'no price source needed');
  t.match(
    effect({ ...plain, capacityTypes: ['on-demand', 'spot'] }),
    { verdict: 'unknown', reasonCode: 'fallback' },
    'allowed spot, Karpenter would have launched spot: an on-demand node is a fallback',
  );
  t.match(
    effect({ candidates: ['m5.xlarge'], launched: 'm5.xlarge', overlays: [{ overlay: RI }], prices: undefined }),
    { verdict: 'unknown', reasonCode: 'no-prices' },
  );
});

t.test('what the price source or the cluster leaves unknown', async (t) => {
  t.match(
    effect({ candidates: ['m5.xlarge'], launched: 'm5.xlarge', overlays: [{ overlay: RI }], prices: prices(OD, null) }),
    { verdict: 'unknown', reasonCode: 'no-spot-prices' },
  );
  t.equal(
    effect({
      candidates: ['m5.xlarge', 'c6i.large'],
      capacityTypes: ['on-demand'],
      launched: 'm5.xlarge',
      overlays: [{ overlay: RI }],
      prices: prices(OD, null),
    }).verdict,
    'instance-type',
    'on-demand only: spot prices are not needed',
  );
  t.match(effect({ candidates: ['m5.xlarge'], launched: 'm5.xlarge', overlays: [{ overlay: RI }], zones: undefined }), {
    verdict: 'unknown',
    reasonCode: 'zones',
  });
  t.equal(
    effect({
      candidates: ['m5.xlarge'],
      launched: 'm5.xlarge',
      overlays: [{ overlay: RI }],
      zones: undefined,
      claim: { zones: new Set(['us-east-1a']) },
    }).verdict,
    'capacity-type',
    "the NodeClaim's own zones suffice",
  );
  t.match(
    effect({
      candidates: Array.from({ length: 600 }, (_, i) => `m5.x${i}`),
      launched: 'm5.x1',
      overlays: [{ overlay: RI }],
    }),
    { verdict: 'unknown', reasonCode: 'candidates-cut' },
  );
  t.match(
    effect({
      candidates: ['m5.xlarge'],
      launched: 'm5.xlarge',
      overlays: [{ overlay: RI }],
      capacityTypes: ['on-demand', 'spot', 'reserved'],
    }),
    { verdict: 'unknown', reasonCode: 'reserved' },
  );
});

t.test(
  'an overlay on a key the watcher does not know for a candidate: unknown (attributes), unless it is outranked there',
  async (t) => {
    const byCpu = overlay(
      {
        ...computeSavingsPlan(),
        spec: {
          requirements: [{ key: 'karpenter.k8s.aws/instance-cpu', operator: 'Gt', values: ['2'] }],
          price: '0.01',
          weight: 5,
        },
      },
      { name: 'big' },
    );
    t.match(
      effect({
        candidates: ['m5.xlarge', 'c6i.large'],
        capacityTypes: ['on-demand'],
        launched: 'm5.xlarge',
        overlays: [{ overlay: RI }, { overlay: byCpu }],
      }),
      { verdict: 'unknown', reasonCode: 'attributes' },
    );
    // With the candidates' node labels known (a node of each type was seen), it is decided.
    const e = launchEffect({
      provider: AWS_KEYS,
      launched: { instanceType: 'm5.xlarge', capacityType: 'on-demand' },
      claim: claimOf(['m5.xlarge', 'c6i.large'], ['on-demand']),
      pool,
      counted: [
        { overlay: RI, selected: true },
        { overlay: byCpu, selected: false },
      ],
      conflicted: [],
      prices: prices(),
      zones: new Set(ZONES),
      instanceLabels: new Map(
        ['m5.xlarge', 'c6i.large'].map((x) => [
          x,
          { 'node.kubernetes.io/instance-type': x, 'karpenter.k8s.aws/instance-cpu': x === 'm5.xlarge' ? '4' : '2' },
        ]),
      ),
    });
    t.equal(
      e.verdict,
      'none',
      'it prices m5.xlarge (4 vCPU) at 0.01 without the RI too, below c6i.large (2 vCPU, unpriced): the same launch',
    );
    t.equal(e.without?.strategy, 'prioritized');
  },
);

t.test('GPUs, accelerators and metal only when nothing else is left (the exotic filter)', async (t) => {
  const gpu = overlay(reservedInstance('p3.2xlarge', 'us-east-1'));
  t.equal(
    effect({
      candidates: ['p3.2xlarge', 'm5.xlarge'],
      capacityTypes: ['on-demand'],
      launched: 'm5.xlarge',
      overlays: [{ overlay: gpu }],
    }).verdict,
    'none',
    'the GPU type is filtered out, its overlay with it',
  );
  const metal = overlay(reservedInstance('m5.metal', 'us-east-1'));
  t.equal(
    effect({
      candidates: ['p3.2xlarge', 'm5.metal'],
      capacityTypes: ['on-demand'],
      launched: 'm5.metal',
      overlays: [{ overlay: metal }],
    }).verdict,
    'instance-type',
    'only exotic types: the overlay decides between them',
  );
  t.match(
    effect({
      candidates: ['dl1.24xlarge', 'm5.xlarge'],
      capacityTypes: ['on-demand'],
      launched: 'm5.xlarge',
      overlays: [{ overlay: RI }],
      prices: prices({ ...OD, 'dl1.24xlarge': 13 }),
    }),
    { verdict: 'unknown', reasonCode: 'exotic' },
  );
});

t.test('minValues: the spot filter stands aside, so spot stays', async (t) => {
  const e = effect({
    candidates: ['m5.xlarge'],
    launched: 'm5.xlarge',
    overlays: [{ overlay: RI }],
    claim: { minValues: true },
  });
  t.match(
    e,
    { verdict: 'unknown', reasonCode: 'fallback' },
    'Karpenter would have launched spot even with the overlay',
  );
});

t.test('a priceAdjustment overlay on spot too', async (t) => {
  const cut = overlay(
    {
      ...computeSavingsPlan(),
      spec: {
        requirements: [{ key: 'karpenter.k8s.aws/instance-family', operator: 'In', values: ['c6i'] }],
        priceAdjustment: '-90%',
        weight: 10,
      },
    },
    { name: 'c6i-cut' },
  );
  // -90% on c6i's on-demand and spot: c6i.large on-demand 0.0085 < every other spot price... but its spot is 0.003: spot stays.
  const e = effect({ candidates: ['m5.xlarge', 'c6i.large'], launched: 'c6i.large', overlays: [{ overlay: cut }] });
  t.match(
    e,
    { verdict: 'unknown', reasonCode: 'fallback' },
    'with the overlay Karpenter launches spot: an on-demand node is a fallback',
  );
  const odOnly = overlay(
    {
      ...computeSavingsPlan(),
      spec: {
        requirements: [
          { key: 'karpenter.k8s.aws/instance-family', operator: 'In', values: ['c6i'] },
          { key: 'karpenter.sh/capacity-type', operator: 'In', values: ['on-demand'] },
        ],
        priceAdjustment: '-90%',
        weight: 10,
      },
    },
    { name: 'c6i-od-cut' },
  );
  const flip = effect({
    candidates: ['m5.xlarge', 'c6i.large'],
    launched: 'c6i.large',
    overlays: [{ overlay: odOnly }],
    prices: prices(OD, { ...SPOT, 'c6i.large': 0.03 }),
  });
  t.equal(flip.verdict, 'capacity-type', 'c6i on-demand at 0.0085 drops every spot offering priced above it');
});

t.test('a non-selected overlay refused as a Conflict: unknown (Karpenter would judge it again)', async (t) => {
  const rival = overlay(reservedInstance('m5.xlarge', 'us-east-1'), { name: 'a-rival', labels: {} });
  t.match(
    effect({ candidates: ['m5.xlarge'], launched: 'm5.xlarge', overlays: [{ overlay: RI }], conflicted: [rival] }),
    { verdict: 'unknown', reasonCode: 'conflict' },
  );
});

t.test('providers: KWOK launches by raw price, an unknown provider is unknown', async (t) => {
  t.equal(
    launchEffect({
      provider: KWOK_KEYS,
      launched: { instanceType: 'm5.xlarge', capacityType: 'on-demand' },
      claim: undefined,
      pool: undefined,
      counted: [],
      conflicted: [],
      prices: undefined,
      zones: undefined,
    }).verdict,
    'none',
  );
  t.match(
    launchEffect({
      provider: undefined,
      launched: { instanceType: 'm5.xlarge', capacityType: 'on-demand' },
      claim: undefined,
      pool: undefined,
      counted: [],
      conflicted: [],
      prices: undefined,
      zones: undefined,
    }),
    { verdict: 'unknown', reasonCode: 'provider' },
  );
  t.match(
    launchEffect({
      provider: AWS_KEYS,
      launched: { instanceType: 'm5.xlarge', capacityType: 'on-demand' },
      claim: undefined,
      pool,
      counted: [],
      conflicted: [],
      prices: prices(),
      zones: undefined,
    }),
    { verdict: 'unknown', reasonCode: 'no-nodeclaim' },
  );
  t.match(
    launchEffect({
      provider: AWS_KEYS,
      launched: { instanceType: 'm5.xlarge', capacityType: 'on-demand' },
      claim: undefined,
      nodeClaimFound: true,
      pool,
      counted: [],
      conflicted: [],
      prices: prices(),
      zones: undefined,
    }),
    {
      verdict: 'unknown',
      reasonCode: 'no-nodeclaim',
      reason: /its NodeClaim has no node\.kubernetes\.io\/instance-type In requirement/,
    },
    'a NodeClaim without candidates says so',
  );
});

t.test('more than 60 candidates: the cut by price, and a tie across it', async (t) => {
  const names = Array.from({ length: 70 }, (_, i) => `m5.s${i}`);
  const od = Object.fromEntries(names.map((n, i) => [n, 1 + i / 100]));
  const ri = overlay(reservedInstance('m5.s65', 'us-east-1'));
  const e = effect({
    candidates: names,
    capacityTypes: ['on-demand'],
    launched: 'm5.s65',
    overlays: [{ overlay: ri }],
    prices: prices(od, {}),
  });
  t.equal(e.verdict, 'instance-type', 'the overlay brought a type past the cut to the front');
  const flat = Object.fromEntries(names.map((n) => [n, 1]));
  const tie = effect({
    candidates: names,
    capacityTypes: ['on-demand'],
    launched: 'm5.s65',
    overlays: [{ overlay: ri }],
    prices: prices(flat, {}),
  });
  t.match(
    tie,
    { verdict: 'unknown', reasonCode: 'truncation' },
    "without it, 70 types at one price: which 60 survive Karpenter's cut is its sort's business",
  );
});

t.test(
  'a tie across the cut in both worlds, and EC2 breaking a tie at the front: the requests may differ, so not none',
  async (t) => {
    // Found by the million-launch run (seed 786170, case 43142): the selected overlay priced only types
    // past the cut, yet Karpenter's unstable sort let different tied types through the cut in each
    // world, so the two CreateFleet requests differed and EC2's tie-break at the front need not agree.
    const front = ['m5.t0', 'm5.t1'];
    const middle = Array.from({ length: 57 }, (_, i) => `m5.s${i}`);
    const beyond = Array.from({ length: 5 }, (_, i) => `c7a.s${i}`);
    const c7a = overlay(
      {
        ...computeSavingsPlan(),
        spec: {
          requirements: [
            { key: 'karpenter.k8s.aws/instance-family', operator: 'In', values: ['c7a'] },
            { key: 'karpenter.sh/capacity-type', operator: 'In', values: ['on-demand'] },
          ],
          priceAdjustment: '-10%',
          weight: 10,
        },
      },
      { name: 'c7a-discount' },
    );
    // Not selected, and pricing r5 as it is: both worlds keep price-overlay-applied (prioritized).
    const r5 = overlay(
      {
        ...computeSavingsPlan(),
        spec: {
          requirements: [
            { key: 'karpenter.k8s.aws/instance-family', operator: 'In', values: ['r5'] },
            { key: 'karpenter.sh/capacity-type', operator: 'In', values: ['on-demand'] },
          ],
          price: '2.00',
          weight: 20,
        },
      },
      { name: 'r5-as-listed' },
    );
    const run = (atCut: number) => {
      const cut = Array.from({ length: atCut }, (_, i) => `r5.s${i}`);
      const od = Object.fromEntries([
        ...front.map((n) => [n, 0.5]),
        ...middle.map((n) => [n, 1]),
        ...cut.map((n) => [n, 2]),
        ...beyond.map((n) => [n, 3]),
      ]);
      return effect({
        candidates: [...front, ...middle, ...cut, ...beyond],
        capacityTypes: ['on-demand'],
        launched: 'm5.t0',
        overlays: [{ overlay: c7a }, { overlay: r5, selected: false }],
        prices: prices(od, {}),
      });
    };
    t.match(
      run(5),
      { verdict: 'unknown', reasonCode: 'truncation', reason: /tie between m5\.t0, m5\.t1/ },
      'five types at 2.0 for the one place left at the cut',
    );
    t.match(
      run(1),
      { verdict: 'none', reason: /the same CreateFleet request/ },
      'one type at 2.0 fills the last place: both requests are known, and the same',
    );
  },
);

t.test(
  "whether Karpenter's scheduler annotates the NodeClaim price-overlay-applied: an overlay prices an offering of a candidate",
  async (t) => {
    const input = (
      candidates: string[],
      overlays: ReturnType<typeof overlay>[],
      book: PriceBook | null = prices(),
    ) => ({
      provider: AWS_KEYS,
      launched: { instanceType: candidates[0]!, capacityType: 'on-demand' },
      claim: claimOf(candidates, ['on-demand']),
      pool,
      counted: overlays.map((o) => ({ overlay: o, selected: true })),
      conflicted: [],
      prices: book ?? undefined,
      zones: new Set(ZONES),
    });
    t.equal(annotatedWith(input(['m5.xlarge', 'c6i.xlarge'], [RI])), true, 'the RI prices m5.xlarge');
    t.equal(annotatedWith(input(['c6i.xlarge', 'r6i.large'], [RI])), false, 'it prices neither candidate');
    t.equal(annotatedWith(input(['c6i.xlarge'], [])), false, 'no overlay in force');
    t.equal(annotatedWith(input(['m5.xlarge'], [RI], null)), undefined, 'without prices it cannot tell');
  },
);

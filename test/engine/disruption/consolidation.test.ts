// The effect of a launch Karpenter's disruption made, one case per rule of consolidation's price
// test (Karpenter v1.14.3, pkg/controllers/disruption/consolidation.go) and of the methods that
// follow it; the judge (test/judges/replacement-differential.test.ts) compares the engine with
// Karpenter's own consolidation on generated clusters.
import t from 'tap';
import {
  type OverlayView,
  type PriceBook,
  toNodeClaimView,
  toNodePoolView,
  toOverlayView,
} from '../../../src/engine/index.ts';
import { replacementEffect } from '../../../src/engine/disruption/controller.ts';
import { reasonOf } from '../../../src/engine/disruption/reasons.ts';
import type { Candidate } from '../../../src/engine/disruption/types.ts';
import type { ClaimForEffect } from '../../../src/engine/effect/types.ts';
import type { FitSizing } from '../../../src/engine/effect/allocatable.ts';
import { AL2023, DESCRIBED } from './described.ts';
import { AWS_KEYS } from '../../../src/engine/providers.ts';
import { Prices } from '../../../src/prices/book.ts';
import { reservedInstance } from '../../../kit/veneer.ts';

const ZONE = 'us-east-1a';
const OD: Record<string, number> = {
  'm5.large': 0.096,
  'c6i.large': 0.085,
  'r6i.large': 0.126,
  't3.medium': 0.0416,
  'm5.xlarge': 0.192,
  'm5a.large': 0.086,
};
const SPOT: Record<string, number> = {
  'm5.large': 0.04,
  'c6i.large': 0.03,
  'r6i.large': 0.05,
  't3.medium': 0.015,
  'm5.xlarge': 0.07,
  'm5a.large': 0.035,
};

function prices(catalog = true, described = false, offered?: Record<string, string[]>): PriceBook {
  return {
    ...(offered ? { offeredZones: (x: string) => (offered[x] ? new Set(offered[x]) : undefined) } : {}),
    source: 'test',
    asOf: 0,
    region: 'us-east-1',
    hasSpot: true,
    onDemand: (x) => OD[x],
    spot: (x) => SPOT[x],
    ...(catalog ? { instanceTypes: () => Object.keys(OD) } : {}),
    ...(described ? { instanceInfo: (x: string) => DESCRIBED[x] } : {}),
  };
}
const pool = toNodePoolView({ metadata: { name: 'on-demand' } });
const RI = toOverlayView(reservedInstance('m5.large', 'us-east-1'));

/** The NodePool's families, as the replacement NodeClaim carries them. */
const FAMILIES = new Map([['karpenter.k8s.aws/instance-family', new Set(['m5', 'c6i', 'r6i'])]]);
const claimOf = (candidates: string[], capacityTypes = ['on-demand'], extra: Partial<ClaimForEffect> = {}) => ({
  candidates,
  pinned: { 'kubernetes.io/arch': 'amd64' },
  capacityTypes: new Set(capacityTypes),
  zones: new Set([ZONE]),
  minValues: false,
  priceOverlayApplied: true,
  allowed: FAMILIES,
  ...extra,
});
const node = (instanceType: string, capacityType = 'on-demand', name = `old-${instanceType}`): Candidate => ({
  nodeClaim: name,
  node: `ip-${name}`,
  labels: {
    'node.kubernetes.io/instance-type': instanceType,
    'karpenter.sh/capacity-type': capacityType,
    'topology.kubernetes.io/zone': ZONE,
    'karpenter.k8s.aws/instance-family': instanceType.split('.')[0]!,
    'kubernetes.io/arch': 'amd64',
  },
  pool,
});

function effect(o: {
  candidates: string[];
  launched: [string, string];
  replaced: Candidate[];
  overlays?: { overlay: OverlayView; selected: boolean }[];
  capacityTypes?: string[];
  reason?: string;
  claim?: Partial<ClaimForEffect>;
  catalog?: boolean;
  nodeLabelsOf?: (instanceType: string) => Record<string, string> | undefined;
  /** The NodeClass's sizing, and DescribeInstanceTypes in the price source: the pods' fit is Karpenter's. */
  sizing?: FitSizing;
  /** DescribeInstanceTypeOfferings in the price source, and the NodeClass's subnets' zones. */
  offered?: Record<string, string[]>;
  zones?: string[];
}) {
  const labelsOf = o.nodeLabelsOf;
  return replacementEffect(
    { reason: reasonOf(o.reason ?? 'Underutilized'), candidates: o.replaced, churn: [] },
    {
      provider: AWS_KEYS,
      launched: { instanceType: o.launched[0], capacityType: o.launched[1] },
      claim: claimOf(o.candidates, o.capacityTypes, o.claim),
      pool,
      counted: o.overlays ?? [{ overlay: RI, selected: true }],
      conflicted: [],
      prices: prices(o.catalog ?? true, o.sizing !== undefined, o.offered),
      zones: new Set(o.zones ?? [ZONE]),
      ...(o.sizing ? { sizing: o.sizing } : {}),
      // A node of each type the function knows, as the caches hand them out: one map.
      ...(labelsOf
        ? { instanceLabels: new Map(Object.keys(OD).flatMap((x) => (labelsOf(x) ? [[x, labelsOf(x)!]] : []))) }
        : {}),
    },
  );
}

t.test('an overlay that prices the only cheaper option at 0.00 caused the replacement', async (t) => {
  // Measured through real Karpenter on AWS: c6i.large replaced by m5.large once the RI overlay priced it at 0.
  const e = effect({ candidates: ['m5.large'], launched: ['m5.large', 'on-demand'], replaced: [node('c6i.large')] });
  t.equal(e.verdict, 'replacement');
  t.same(e.overlays, [RI.name]);
  t.same(e.disruption?.price, { with: 0.085, without: 0.085 });
  t.equal(e.disruption?.savings, 0.085, "Karpenter's estimate: the replaced price less the option's 0.00");
  t.equal(e.disruption?.cheaperWithout, 0);
  t.same(e.launched, { listPrice: 0.096, price: 0 });
  t.same(e.disruption?.replaced[0], {
    nodeClaim: 'old-c6i.large',
    node: 'ip-old-c6i.large',
    instanceType: 'c6i.large',
    capacityType: 'on-demand',
    zone: ZONE,
    price: { with: 0.085, without: 0.085 },
  });
});

t.test('a replacement that undercuts without the overlays too reads the launch replay', async (t) => {
  const e = effect({
    candidates: ['c6i.large', 'm5.large'],
    launched: ['m5.large', 'on-demand'],
    replaced: [node('r6i.large')],
  });
  t.not(e.verdict, 'replacement');
  t.equal(e.disruption?.cheaperWithout, 2);
  t.equal(e.verdict, 'instance-type', 'without the RI overlay the cheaper c6i.large would have been launched');
});

t.test('an overlay that is not selected is in both worlds', async (t) => {
  const e = effect({
    candidates: ['m5.large'],
    launched: ['m5.large', 'on-demand'],
    replaced: [node('c6i.large')],
    overlays: [{ overlay: RI, selected: false }],
  });
  t.equal(e.verdict, 'none');
  t.equal(e.disruption?.cheaperWithout, 1);
});

/** A selected overlay that prices t3.medium up: with it t3.medium undercuts nothing, without it, it might. */
const dearer = toOverlayView({
  metadata: { name: 'dearer-t3', labels: { 'app.kubernetes.io/managed-by': 'veneer' } },
  spec: {
    weight: 5,
    priceAdjustment: '+500%',
    requirements: [{ key: 'node.kubernetes.io/instance-type', operator: 'In', values: ['t3.medium'] }],
  },
});

t.test(
  'a type the overlays priced up may have been cut from the options, unless the NodePool rules it out',
  async (t) => {
    const withAllowed = (allowed: ClaimForEffect['allowed']) =>
      effect({
        candidates: ['m5.large'],
        launched: ['m5.large', 'on-demand'],
        replaced: [node('c6i.large')],
        overlays: [
          { overlay: RI, selected: true },
          { overlay: dearer, selected: true },
        ],
        claim: { allowed },
      });
    const open = withAllowed(new Map());
    t.equal(open.verdict, 'unknown', 'any family: t3.medium might have undercut c6i.large without the overlays');
    t.equal(open.reasonCode, 'unseen-options');
    t.match(open.reason, /t3\.medium/);
    t.equal(withAllowed(FAMILIES).verdict, 'replacement', "the NodePool's families leave t3 out: its name says so");
  },
);

t.test('without a catalog the options cut by price are not known', async (t) => {
  const e = effect({
    candidates: ['m5.large'],
    launched: ['m5.large', 'on-demand'],
    replaced: [node('c6i.large')],
    catalog: false,
  });
  t.equal(e.reasonCode, 'unseen-options');
  t.equal(e.disruption?.reason, 'Underutilized', 'the story is kept with an unknown');
});

t.test('a replacement narrowed to spot compares spot prices', async (t) => {
  // A mixed NodePool: the on-demand 0.00 never counts while spot is allowed.
  const e = effect({
    candidates: ['c6i.large', 'm5.large'],
    capacityTypes: ['spot'],
    launched: ['c6i.large', 'spot'],
    replaced: [node('r6i.large')],
  });
  t.not(e.verdict, 'replacement');
  t.equal(e.disruption?.cheaperWithout, 2);
});

t.test('a single spot node needs 15 cheaper options without the overlays', async (t) => {
  const e = effect({
    candidates: ['c6i.large', 'm5.large', 't3.medium'],
    capacityTypes: ['spot'],
    launched: ['t3.medium', 'spot'],
    replaced: [node('m5.xlarge', 'spot')],
    claim: { allowed: new Map() },
  });
  t.equal(e.verdict, 'replacement', 'three options are short of 15 either way, and the catalog has no more');
  t.equal(e.disruption?.cheaperWithout, 3);
});

t.test('prices that do not reproduce the options Karpenter kept are unknown', async (t) => {
  const e = effect({
    candidates: ['r6i.large'],
    launched: ['r6i.large', 'on-demand'],
    replaced: [node('c6i.large')],
  });
  t.equal(e.reasonCode, 'replaced-prices');
});

t.test('drift has no price test: the launch replay answers, with what it replaced', async (t) => {
  const e = effect({
    candidates: ['m5.large', 'c6i.large'],
    launched: ['m5.large', 'on-demand'],
    replaced: [node('c6i.large')],
    reason: 'Drifted',
  });
  t.equal(e.verdict, 'instance-type');
  t.equal(e.disruption?.reason, 'Drifted');
  t.equal(e.disruption?.replacedCount, 1);
  t.equal(e.disruption?.price, undefined);
});

t.test('what is not known stays unknown, with its reason', async (t) => {
  t.equal(
    effect({ candidates: ['m5.large'], launched: ['m5.large', 'on-demand'], replaced: [] }).reasonCode,
    'replaced-set',
  );
  const reserved = node('c6i.large', 'reserved');
  t.equal(
    effect({ candidates: ['m5.large'], launched: ['m5.large', 'on-demand'], replaced: [reserved] }).reasonCode,
    'reserved',
  );
  t.equal(
    effect({ candidates: ['m5.large'], launched: ['c6i.large', 'on-demand'], replaced: [node('r6i.large')] })
      .reasonCode,
    'fallback',
  );
});

/** minValues as the replacement NodeClaim carries them. */
const minValues = (entries: [string, number][]): Partial<ClaimForEffect> => ({
  minValues: true,
  minValuesByKey: new Map(entries),
  allowed: new Map(),
});

t.test('minValues: the options left without the overlays must meet them, as SatisfiesMinValues counts', async (t) => {
  // c6i.large ($0.085) replaced by m5.large at 0.00; without the RI only t3.medium undercuts it: one type of two.
  const twoTypes = effect({
    candidates: ['m5.large', 't3.medium'],
    launched: ['m5.large', 'on-demand'],
    replaced: [node('c6i.large')],
    claim: minValues([['node.kubernetes.io/instance-type', 2]]),
  });
  t.equal(twoTypes.verdict, 'replacement');
  t.equal(twoTypes.disruption?.cheaperWithout, 1, 'one option undercuts, short of minValues');
  t.equal(twoTypes.disruption?.replacedWithout, false);
  t.match(twoTypes.reason, /minValues: node\.kubernetes\.io\/instance-type has 1 of 2/);
  const oneType = effect({
    candidates: ['m5.large', 't3.medium'],
    launched: ['m5.large', 'on-demand'],
    replaced: [node('c6i.large')],
    claim: minValues([['node.kubernetes.io/instance-type', 1]]),
  });
  t.not(oneType.verdict, 'replacement');
  t.equal(oneType.disruption?.replacedWithout, true);
  const families = effect({
    candidates: ['m5.large', 't3.medium', 'c6i.large'],
    launched: ['m5.large', 'on-demand'],
    replaced: [node('r6i.large')],
    claim: minValues([['karpenter.k8s.aws/instance-family', 2]]),
  });
  t.equal(families.disruption?.replacedWithout, true, 't3 and c6i: two families undercut r6i.large without the RI');
});

t.test("minValues on zones: a type's zones are its offerings' with a subnet of the NodeClass", async (t) => {
  const zones = [ZONE, 'us-east-1b'];
  const zoneMinValues = (offered?: Record<string, string[]>) =>
    effect({
      candidates: ['m5.large', 't3.medium'],
      launched: ['m5.large', 'on-demand'],
      replaced: [node('c6i.large')],
      claim: { ...minValues([['topology.kubernetes.io/zone', 2]]), zones: new Set(zones) },
      zones,
      ...(offered ? { offered } : {}),
    });
  // Without the RI only t3.medium undercuts c6i.large: its zones decide.
  const both = zoneMinValues({ 'm5.large': zones, 't3.medium': [...zones, 'us-east-1c'] });
  t.equal(both.disruption?.replacedWithout, true, 't3.medium in both zones the NodeClass has: it stands');
  const one = zoneMinValues({ 'm5.large': zones, 't3.medium': [ZONE, 'us-east-1c'] });
  t.equal(one.verdict, 'replacement', 'us-east-1c has no subnet: one zone of two');
  t.match(one.reason, /topology\.kubernetes\.io\/zone has 1 of 2/);
  const unknown = zoneMinValues();
  t.equal(unknown.reasonCode, 'min-values', 'where the offerings are not known: unknown');
});

t.test('minValues on capacity types: an on-demand replacement counts on-demand on each option', async (t) => {
  const capacityMinValues = (min: number, capacityTypes = ['on-demand']) =>
    effect({
      candidates: ['m5.large', 't3.medium'],
      launched: ['m5.large', 'on-demand'],
      replaced: [node('c6i.large')],
      capacityTypes,
      claim: minValues([['karpenter.sh/capacity-type', min]]),
    });
  t.equal(capacityMinValues(1).disruption?.replacedWithout, true, 't3.medium is offered on-demand: it stands');
  const two = capacityMinValues(2);
  t.equal(two.reasonCode, 'min-values', 'two capacity types of on-demand alone: Karpenter could not have kept these');
  t.match(two.reason, /karpenter\.sh\/capacity-type has 1 of 2/);
  // With spot allowed too, the types' usage classes decide, which the watcher does not read.
  t.equal(capacityMinValues(2, ['on-demand', 'spot']).reasonCode, 'min-values');
});

t.test('minValues on a key the names do not tell: unknown where it decides', async (t) => {
  const e = effect({
    candidates: ['m5.large', 't3.medium'],
    launched: ['m5.large', 'on-demand'],
    replaced: [node('c6i.large')],
    claim: minValues([['karpenter.k8s.aws/instance-cpu', 2]]),
  });
  t.equal(e.verdict, 'unknown');
  t.equal(e.reasonCode, 'min-values');
  t.equal(e.disruption?.replacedWithout, undefined);
  const region = effect({
    candidates: ['m5.large', 't3.medium'],
    launched: ['m5.large', 'on-demand'],
    replaced: [node('c6i.large')],
    claim: minValues([['team', 1]]),
  });
  t.equal(
    region.reasonCode,
    'min-values',
    'a key no instance type defines has no values: Karpenter would not have kept them',
  );
});

/** An RI on the larger type the small nodes' pods are packed into. */
const RI_XL = toOverlayView(reservedInstance('m5.xlarge', 'us-east-1'));

t.test(
  'several nodes: filterOutSameInstanceType drops what does not undercut a replaced type among the options',
  async (t) => {
    const packed = (candidates: string[]) =>
      effect({
        candidates,
        launched: ['m5.xlarge', 'on-demand'],
        replaced: [node('m5.large', 'on-demand', 'a'), node('m5.large', 'on-demand', 'b')],
        overlays: [{ overlay: RI_XL, selected: true }],
      });
    // Two m5.large ($0.192) into one m5.xlarge at 0.00. Without the RI m5.large undercuts the pair
    // if the pods fit it, yet not m5.large itself: Karpenter would delete one instead. c6i.large and
    // r6i.large would have been kept with the RI had they fitted.
    const caused = packed(['m5.xlarge']);
    t.equal(caused.verdict, 'replacement');
    t.equal(caused.disruption?.replacedWithout, false);
    t.match(caused.reason, /filterOutSameInstanceType/);
    t.same(caused.disruption?.price, { with: 0.192, without: 0.192 });
    // c6i.large ($0.085) is an option and undercuts m5.large without the RI: the command stands.
    const anyway = packed(['m5.xlarge', 'c6i.large']);
    t.equal(anyway.disruption?.replacedWithout, true);
    t.not(anyway.verdict, 'replacement');
  },
);

t.test(
  'several nodes: an option kept that does not undercut a replaced type among them is not what Karpenter did',
  async (t) => {
    const e = effect({
      candidates: ['c6i.large', 'm5.large'],
      launched: ['m5.large', 'on-demand'],
      replaced: [node('c6i.large', 'on-demand', 'a'), node('c6i.large', 'on-demand', 'b')],
      overlays: [{ overlay: RI_XL, selected: true }],
    });
    t.equal(e.reasonCode, 'replaced-prices', 'm5.large ($0.096) does not undercut c6i.large ($0.085), an option');
  },
);

t.test('several nodes: whether a replaced type not among the options fitted the pods may decide', async (t) => {
  // Two c6i.large ($0.17) into m5.large at 0.00. Without the RI m5.large ($0.096) undercuts the
  // pair, not c6i.large ($0.085): the command stands only if the pods did not fit c6i.large.
  const e = effect({
    candidates: ['m5.large'],
    launched: ['m5.large', 'on-demand'],
    replaced: [node('c6i.large', 'on-demand', 'a'), node('c6i.large', 'on-demand', 'b')],
  });
  t.equal(e.verdict, 'unknown');
  t.equal(e.reasonCode, 'unseen-options');
  t.match(e.reason, /c6i\.large/);
});

t.test("several nodes: a replaced node's own NodeClaim tells whether the pods fit its type", async (t) => {
  // Two c6i.large ($0.17) packed into m5.large at 0.00, as real Karpenter on AWS does it
  // (test/aws/multi-node.test.ts): the pods request 1.2 CPU, 256 MiB and 4 pods, within what
  // Karpenter holds c6i.large to hold (each replaced NodeClaim's status.allocatable). So c6i.large
  // was an option too, and without the RI filterOutSameInstanceType leaves nothing: no command.
  const claim = toNodeClaimView({
    metadata: { name: 'replacement', annotations: { 'karpenter.sh/price-overlay-applied': 'true' } },
    spec: {
      requirements: [
        { key: 'node.kubernetes.io/instance-type', operator: 'In', values: ['m5.large'] },
        { key: 'karpenter.sh/capacity-type', operator: 'In', values: ['on-demand'] },
        { key: 'topology.kubernetes.io/zone', operator: 'In', values: [ZONE] },
        { key: 'karpenter.k8s.aws/instance-family', operator: 'In', values: ['m5', 'c6i', 'r6i'] },
      ],
      resources: { requests: { cpu: '1200m', memory: '256Mi', pods: '4' } },
    },
  }).launch!;
  const held = (allocatable: Candidate['allocatable']) =>
    effect({
      candidates: ['m5.large'],
      launched: ['m5.large', 'on-demand'],
      replaced: ['a', 'b'].map((name) => ({
        ...node('c6i.large', 'on-demand', name),
        ...(allocatable ? { allocatable } : {}),
      })),
      claim,
    });
  const c6iLarge = { cpu: 1.93, memory: 3114 * 2 ** 20, pods: 29 };
  const e = held(c6iLarge);
  t.equal(e.verdict, 'replacement', e.reason ?? '');
  t.equal(e.disruption?.replacedWithout, false);
  t.equal(held(undefined).reasonCode, 'unseen-options', "without the NodeClaims' allocatable it is not known");
  const sized = effect({
    candidates: ['m5.large'],
    launched: ['m5.large', 'on-demand'],
    replaced: ['a', 'b'].map((name) => node('c6i.large', 'on-demand', name)),
    claim,
    sizing: AL2023,
  });
  t.equal(sized.verdict, 'replacement', `sized as Karpenter sizes c6i.large, the fit is known: ${sized.reason ?? ''}`);
  t.equal(sized.disruption?.replacedWithout, false);
  t.equal(
    effect({
      candidates: ['m5.large'],
      launched: ['m5.large', 'on-demand'],
      replaced: ['a', 'b'].map((name) => node('c6i.large', 'on-demand', name)),
      claim,
      sizing: { ...AL2023, registered: new Set(['c6i.large']) },
    }).reasonCode,
    'unseen-options',
    'a c6i.large registered: Karpenter may hold the memory it reported, not its formula',
  );
  const crowded = held({ ...c6iLarge, pods: 3 });
  t.equal(crowded.disruption?.replacedWithout, true, 'more pods than c6i.large holds: it was no option');
  t.not(crowded.verdict, 'replacement', 'and without the RI m5.large ($0.096) would have replaced the pair');
});

t.test('several nodes: a replaced type smaller than what the replacement requests was no option', async (t) => {
  // The same two c6i.large into m5.large at 0.00, their pods requesting 6 GiB: more than c6i.large's
  // 4 GiB, so c6i.large was no option, and without the RI m5.large would have replaced them.
  const memory: Record<string, string> = { 'c6i.large': '4096', 'm5.large': '8192', 'r6i.large': '16384' };
  const e = effect({
    candidates: ['m5.large'],
    launched: ['m5.large', 'on-demand'],
    replaced: [node('c6i.large', 'on-demand', 'a'), node('c6i.large', 'on-demand', 'b')],
    claim: { requests: { cpu: 1, memory: 6 * 2 ** 30 } },
    nodeLabelsOf: (x) =>
      memory[x] === undefined
        ? undefined
        : { 'karpenter.k8s.aws/instance-cpu': '2', 'karpenter.k8s.aws/instance-memory': memory[x]! },
  });
  t.equal(e.disruption?.replacedWithout, true);
  t.not(e.verdict, 'replacement');
});

t.test("a NodeClaim's minValues by key and its requests are read from its spec", async (t) => {
  const claim = toNodeClaimView({
    metadata: { name: 'c' },
    spec: {
      requirements: [
        { key: 'node.kubernetes.io/instance-type', operator: 'In', values: ['m5.large', 'c6i.large'], minValues: 2 },
        { key: 'karpenter.k8s.aws/instance-family', operator: 'Exists', minValues: 1 },
        { key: 'karpenter.k8s.aws/instance-family', operator: 'Exists', minValues: 2 },
      ],
      resources: { requests: { cpu: '1500m', memory: '1536Mi', pods: '3' } },
    },
  }).launch!;
  t.equal(claim.minValues, true);
  t.same(
    [...claim.minValuesByKey!],
    [
      ['node.kubernetes.io/instance-type', 2],
      ['karpenter.k8s.aws/instance-family', 2],
    ],
    "the larger of a key's, as Karpenter merges them",
  );
  t.same(claim.requests, { cpu: 1.5, memory: 1536 * 2 ** 20, pods: 3 });
});

/** A Savings Plan rate on the m5 family: the replaced m5.xlarge is discounted too. */
const m5Rate = toOverlayView({
  metadata: { name: 'sp-m5', labels: { 'app.kubernetes.io/managed-by': 'veneer' } },
  spec: {
    weight: 20,
    priceAdjustment: '-60%',
    requirements: [
      { key: 'karpenter.sh/capacity-type', operator: 'In', values: ['on-demand'] },
      { key: 'karpenter.k8s.aws/instance-family', operator: 'In', values: ['m5'] },
    ],
  },
});

/** The labels of a node of each type, where one was seen. */
const SEEN: Record<string, [cpu: number, memory: number]> = {
  'm5.large': [2, 8192],
  'm5a.large': [2, 8192],
  'c6i.large': [2, 4096],
  'm5.xlarge': [4, 16384],
};
const seen =
  (...unseen: string[]) =>
  (x: string) => {
    const capacity = SEEN[x];
    if (capacity === undefined || unseen.includes(x)) return undefined;
    return {
      'node.kubernetes.io/instance-type': x,
      'kubernetes.io/arch': 'amd64',
      'karpenter.k8s.aws/instance-family': x.split('.')[0]!,
      'karpenter.k8s.aws/instance-cpu': String(capacity[0]),
      'karpenter.k8s.aws/instance-memory': String(capacity[1]),
    };
  };

/** The replacement of an m5.xlarge as Karpenter writes it with the m5 rate: only m5.large undercuts its overlaid $0.0768/h. */
const discountedClaim = (memory: string) =>
  toNodeClaimView({
    metadata: { name: 'replacement', annotations: { 'karpenter.sh/price-overlay-applied': 'true' } },
    spec: {
      requirements: [
        { key: 'node.kubernetes.io/instance-type', operator: 'In', values: ['m5.large'] },
        { key: 'karpenter.sh/capacity-type', operator: 'In', values: ['on-demand'] },
        { key: 'topology.kubernetes.io/zone', operator: 'In', values: [ZONE] },
        { key: 'kubernetes.io/arch', operator: 'In', values: ['amd64'] },
        { key: 'karpenter.k8s.aws/instance-family', operator: 'In', values: ['m5', 'm5a', 'c6i', 'r6i'] },
      ],
      resources: { requests: { cpu: '1', memory, pods: '4' } },
    },
  }).launch!;

t.test(
  'a replaced node a selected overlay discounted: without it, types its overlaid price cut would have been options',
  async (t) => {
    const replaced = (memory: string, nodeLabelsOf = seen()) =>
      effect({
        candidates: ['m5.large'],
        launched: ['m5.large', 'on-demand'],
        replaced: [node('m5.xlarge')],
        overlays: [{ overlay: m5Rate, selected: true }],
        claim: discountedClaim(memory),
        nodeLabelsOf,
      });
    // Without the rate m5.xlarge lists at $0.192/h: m5a.large ($0.086) undercuts it, and the pods
    // (5 GiB) fit it as they fit m5.large, which has no more CPU or memory. c6i.large has 4 GiB,
    // too little; r6i.large, whose size no node told, lists above m5a.large: whether they fit
    // changes nothing.
    const e = replaced('5Gi');
    t.equal(e.disruption?.replacedWithout, true);
    t.equal(e.verdict, 'instance-type', 'the replay over the NodeClaim alone (m5.large) would read none');
    t.same(e.without?.instanceTypes, ['m5a.large']);
    t.same(e.with?.instanceTypes, ['m5.large']);
    // 2 GiB: c6i.large ($0.085) might have held the pods too, and it would be launched.
    const small = replaced('2Gi');
    t.equal(small.verdict, 'unknown');
    t.equal(small.reasonCode, 'unseen-options');
    t.match(small.reason, /c6i\.large/);
    t.match(small.reason, /changes its launch/);
    t.equal(small.disruption?.replacedWithout, true, 'the replacement would have been made: only its launch is open');
    // No node of m5a.large seen: whether the pods fit it is not known, and it decides.
    const unseen = replaced('5Gi', seen('m5a.large'));
    t.equal(unseen.reasonCode, 'unseen-options');
    t.match(unseen.reason, /m5a\.large/);
  },
);

t.test('a price book refreshed with the same source and time still prices with its own spot prices', async (t) => {
  // After a refresh whose on-demand read failed and spot read succeeded, the new book carries the
  // old book's source and read time (asOf: the earlier of the two): the options must be priced
  // with its spot prices all the same (they were found under the old book's once, by source|asOf).
  const book = (m5Spot: number) =>
    new Prices({
      source: 'aws',
      asOf: 1_000,
      region: 'us-east-1',
      onDemand: new Map(Object.entries(OD)),
      spot: new Map(Object.entries(SPOT).map(([x, p]) => [x, new Map([[ZONE, x === 'm5.large' ? m5Spot : p]])])),
    });
  const replaced = [node('c6i.large')];
  const claim = claimOf(['m5.large'], ['spot', 'on-demand']);
  const decide = (prices: PriceBook) =>
    replacementEffect(
      { reason: reasonOf('Underutilized'), candidates: replaced, churn: [] },
      {
        provider: AWS_KEYS,
        launched: { instanceType: 'm5.large', capacityType: 'on-demand' },
        claim,
        pool,
        counted: [{ overlay: RI, selected: true }],
        conflicted: [],
        prices,
        zones: claim.zones,
      },
    );
  t.not(decide(book(0.04)).reasonCode, 'replaced-prices', 'm5.large at $0.04/h spot undercuts the $0.085/h replaced');
  const dearer = decide(book(0.09));
  t.equal(dearer.reasonCode, 'replaced-prices', 'at $0.09/h spot it does not: Karpenter could not have kept it');
});

t.test('two replacements alike but for their pods per node are tested apart', async (t) => {
  // The same two candidates (c6i.large, r6i.large, each holding 10 pods), the same options, prices
  // and overlays; the pods ask for 5 of them or for 20. At 20 neither type could have held them, so
  // without the RI m5.large would have replaced both anyway; at 5 c6i.large could have, and
  // filterOutSameInstanceType then keeps nothing without the RI. Everything but the requests is
  // one object, as the caches hand them out, so only a complete key tells the two apart.
  const candidates = [node('c6i.large', 'on-demand', 'a'), node('r6i.large', 'on-demand', 'b')].map((c) => ({
    ...c,
    allocatable: { cpu: 2, memory: 8e9, pods: 10 },
  }));
  const options = ['m5.large'];
  const requirements = Object.freeze([]);
  const book = prices();
  const instanceLabels = new Map(
    Object.keys(OD).map((x) => [
      x,
      {
        'node.kubernetes.io/instance-type': x,
        'karpenter.k8s.aws/instance-cpu': '2',
        'karpenter.k8s.aws/instance-memory': '8192',
      },
    ]),
  );
  const counted = [{ overlay: RI, selected: true }];
  const zones = new Set([ZONE]);
  const decide = (pods: number) =>
    replacementEffect(
      { reason: reasonOf('Underutilized'), candidates, churn: [] },
      {
        provider: AWS_KEYS,
        launched: { instanceType: 'm5.large', capacityType: 'on-demand' },
        claim: claimOf(options, ['on-demand'], { requests: { cpu: 1, memory: 1e9, pods }, requirements }),
        pool,
        counted,
        conflicted: [],
        prices: book,
        zones,
        instanceLabels,
      },
    );
  t.equal(decide(5).verdict, 'replacement');
  const many = decide(20);
  t.equal(many.disruption?.replacedWithout, true, 'at 20 pods the command stands without the RI');
  t.not(many.verdict, 'replacement');
});

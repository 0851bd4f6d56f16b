// The prices Karpenter launches with, in one world: each candidate offering's list price with the
// overlay that wins it applied (pkg/controllers/nodeoverlay store: the first overlay in weight
// order whose requirements the NodePool, the instance type and the offering meet; never stacked;
// cloudprovider.AdjustedPrice). The effect compares two worlds: the overlays as they were, and the
// same without the ones the watcher's selector picks (moment.ts makes both).
import { KarpenterView } from '../karpenter-view.ts';
import { Memo, UNANCHORED } from '../memo.ts';
import type { NodePoolView } from '../nodepool.ts';
import { outranks, type OverlayView } from '../overlay.ts';
import type { ProviderKeys } from '../providers.ts';
import { combinedOperator, type Requirement } from '../requirements.ts';
import { CAPACITY_TYPE, REGION, ZONE } from '../well-known.ts';
import { Abstain, abstain } from './abstain.ts';
import type { CandidateType } from './candidates.ts';
import { type Offering, type OfferingSource, offeringsOf } from './offerings.ts';

export interface PricedOffering extends Offering {
  /** The price Karpenter compares: `list` with the winning overlay applied. */
  readonly price: number;
  /** The overlay whose price was applied, if any. */
  readonly overlay?: OverlayView;
}

export interface PricedCandidate {
  readonly type: CandidateType;
  readonly offerings: readonly PricedOffering[];
  /** The overlays that priced any of its offerings. */
  readonly overlays: readonly OverlayView[];
}

/** The overlays of both worlds: those Karpenter applied, and those left without the selected ones. */
export interface Worlds {
  readonly with: readonly OverlayView[];
  readonly without: readonly OverlayView[];
  /** The selected overlays of the world with them: those a record names as steering. */
  readonly selected: ReadonlySet<OverlayView>;
}

/** cloudprovider.AdjustedPrice: `price` replaces, `priceAdjustment` is `±N%` or `±abs`, never below 0. */
function adjustedPrice(list: number, overlay: Pick<OverlayView, 'price' | 'priceAdjustment'>): number {
  const change = overlay.price ?? overlay.priceAdjustment ?? '';
  if (change === '') return list;
  if (!change.startsWith('+') && !change.startsWith('-')) return Number.parseFloat(change);
  const adjusted = change.endsWith('%')
    ? list * (1 + Number.parseFloat(change.slice(0, -1)) / 100)
    : list + Number.parseFloat(change);
  // biome-ignore lint/complexity/useMathMinMax: Karpenter's lo.Ternary(adjusted >= 0, adjusted, 0); a NaN (an unparsable adjustment) is 0 there, and Math.max would keep it.
  return adjusted >= 0 ? adjusted : 0;
}

interface Ranked {
  readonly overlay: OverlayView;
}

/**
 * The overlays of a world, filed by one `In` requirement each (the value fewest share), so that a
 * candidate meets a handful of them rather than all.
 */
class WorldIndex {
  readonly anchored = new Map<string, Map<string, Ranked[]>>();
  readonly unanchored: Ranked[] = [];

  constructor(overlays: readonly OverlayView[]) {
    const frequency = new Map<string, number>();
    const pair = (k: string, v: string) => `${k}\u0000${v}`;
    const ins = (o: OverlayView) => o.requirements.filter((r) => combinedOperator(r) === 'In');
    for (const o of overlays)
      for (const r of ins(o))
        for (const v of r.values) frequency.set(pair(r.key, v), (frequency.get(pair(r.key, v)) ?? 0) + 1);
    for (const overlay of [...overlays].sort((a, b) => (outranks(a, b) ? -1 : 1))) {
      const ranked = { overlay };
      let anchor: { req: Requirement; cost: number } | undefined;
      for (const r of ins(overlay)) {
        let cost = 0;
        for (const v of r.values) cost += frequency.get(pair(r.key, v)) ?? 0;
        if (!anchor || cost < anchor.cost) anchor = { req: r, cost };
      }
      if (!anchor) {
        this.unanchored.push(ranked);
        continue;
      }
      let byValue = this.anchored.get(anchor.req.key);
      if (!byValue) {
        byValue = new Map();
        this.anchored.set(anchor.req.key, byValue);
      }
      for (const v of anchor.req.values) {
        const list = byValue.get(v);
        if (list) list.push(ranked);
        else byValue.set(v, [ranked]);
      }
    }
  }
}

const rankOrder = (a: Ranked, b: Ranked) => (outranks(a.overlay, b.overlay) ? -1 : 1);

/** What a world prices: candidate types, their offerings, for a NodePool and a provider in a region. */
export type WorldInput = OfferingSource & {
  readonly candidates: readonly CandidateType[];
  readonly pool: NodePoolView;
  readonly provider: ProviderKeys;
  readonly region: string | undefined;
};

/** A world with every candidate's offerings priced, or the abstention of the first that cannot be. */
export type PricedWorld = readonly PricedCandidate[] | Abstain;

type Pricing = PricedCandidate | Abstain;
type PricingInput = OfferingSource & {
  readonly pool: NodePoolView;
  readonly provider: ProviderKeys;
  readonly region: string | undefined;
  readonly overlays: readonly OverlayView[];
};

/**
 * Each candidate's pricing, kept per type and world: NodeClaims list the same types again and
 * again, mostly under the same overlays and prices, so a decision prices only the types no
 * decision priced before in that world. Candidate types are shared objects (candidates.ts), so a
 * type nothing references any more takes its pricings with it.
 */
const PRICINGS = new Memo<CandidateType, PricingInput, Pricing>(
  (type, world) => priceCandidate(type, offeringsOf(type.name, world), worldIndex(world.overlays), world),
  8,
);
/** The overlays of a world filed for lookup, per overlays list (one shared list per world: moment.ts). */
const INDEXES = new Memo<readonly OverlayView[], object, WorldIndex>((overlays) => new WorldIndex(overlays), 1);
const worldIndex = (overlays: readonly OverlayView[]) => INDEXES.of(overlays, UNANCHORED);

/**
 * Prices every candidate offering with `overlays` (those that count: validated, not deleted). An
 * overlay whose requirements name an instance-type value that is not known for a candidate leaves
 * that candidate's price, and so the world, unknown, unless a higher-ranked overlay wins first.
 */
export function priceWorld(input: WorldInput, overlays: readonly OverlayView[]): PricedWorld {
  const { candidates, ...world } = input;
  const pricingOf = PRICINGS.over({ ...world, overlays });
  const priced: PricedCandidate[] = [];
  for (const type of candidates) {
    const pricing = pricingOf(type);
    if (pricing instanceof Abstain) return pricing;
    priced.push(pricing);
  }
  return priced;
}

function priceCandidate(
  type: CandidateType,
  offerings: readonly Offering[],
  index: WorldIndex,
  input: PricingInput,
): Pricing {
  const labels: Record<string, string> = { ...type.labels };
  if (input.region !== undefined) labels[REGION] = input.region;
  const view = new KarpenterView(labels, input.pool, input.provider);
  // The overlays this candidate could meet: those filed under one of its values, in rank order.
  const seen = new Set<Ranked>();
  const shortlist: Ranked[] = [];
  const add = (list: readonly Ranked[] | undefined) => {
    for (const r of list ?? []) {
      if (seen.has(r)) continue;
      seen.add(r);
      shortlist.push(r);
    }
  };
  for (const [key, byValue] of index.anchored) {
    if (key === CAPACITY_TYPE || key === ZONE) {
      for (const o of offerings) add(byValue.get(key === ZONE ? o.zone : o.capacityType));
    } else if (type.known !== undefined && !type.known.has(key) && view.role(key) === 'instance-type') {
      // Which value it has is unknown: every overlay filed under the key might be met.
      for (const list of byValue.values()) add(list);
    } else {
      for (const value of view.valuesFor(key)) add(byValue.get(value));
    }
  }
  add(index.unanchored);
  shortlist.sort(rankOrder);
  const out: PricedOffering[] = [];
  for (const o of offerings) {
    labels[CAPACITY_TYPE] = o.capacityType;
    labels[ZONE] = o.zone;
    let winner: OverlayView | undefined;
    for (const r of shortlist) {
      let unknownKey: string | undefined;
      let fails = false;
      for (const req of r.overlay.requirements) {
        if (
          type.known !== undefined &&
          !type.known.has(req.key) &&
          req.key !== CAPACITY_TYPE &&
          req.key !== ZONE &&
          view.role(req.key) === 'instance-type'
        ) {
          unknownKey ??= req.key;
        } else if (!view.passes(req)) {
          fails = true;
          break;
        }
      }
      if (fails) continue;
      if (unknownKey === undefined) {
        winner = r.overlay;
        break;
      }
      // Met or not depends on a value of this candidate's that is not known.
      return abstain(
        'attributes',
        `overlay ${r.overlay.name} names ${unknownKey}, whose value for candidate ${type.name} is not known`,
      );
    }
    out.push({ ...o, price: winner ? adjustedPrice(o.list, winner) : o.list, ...(winner ? { overlay: winner } : {}) });
  }
  return { type, offerings: out, overlays: [...new Set(out.flatMap((o) => (o.overlay ? [o.overlay] : [])))] };
}

// "Are the overlays working?" overlay by overlay: which overlays won nodes, which matched only
// where a heavier one won, and which matched nothing. Recorded nodes count as their record
// says; a node without a record counts as `explain` would decide it now.
import { decide, decisionInput, karpenterView, launchTime, providerOf, type EngineSettings } from './decide.ts';
import { characteristics, OPTED_OUT, scope } from './scope.ts';
import type { NodePoolView } from './nodepool.ts';
import { rfc3339, fromBasicTimestamp } from './labels.ts';
import { nodeClaimFor, toNodeView, type NodeClaimLookup, type NodeObject } from './node.ts';
import { OverlayIndex } from './overlay-index.ts';
import type { OverlayPolicy, OverlayView } from './overlay.ts';
import {
  MAX_NAMED_UNREADABLE,
  NO_OVERLAY,
  noEffects,
  overlayRows,
  type EffectCounts,
  type OverlayReport,
  type ReportTotals,
  type Tally,
} from './report-rows.ts';
import { readStory, type EffectStory } from './record.ts';
import { providerCensus, type ProviderCensus } from './provider-census.ts';
import { KNOWN_PROVIDERS } from './providers.ts';

/** Whose keys Karpenter compares: karpenterProvider, the NodeClaims by provider, and the nodes in doubt. */
export interface ProviderReport extends ProviderCensus {
  /** On-demand Karpenter nodes judged now with a provider in doubt (unknown, contradicting the setting, or assumed). */
  nodesInDoubt: number;
}

export interface Report {
  generatedAt: string;
  overlays: OverlayReport[];
  totals: ReportTotals;
  provider: ProviderReport;
}

interface ReportInput {
  nodes: Iterable<NodeObject>;
  overlays: readonly OverlayView[];
  nodePools: readonly NodePoolView[];
  nodeClaims: NodeClaimLookup;
  now: number;
  settings: EngineSettings;
  policy: OverlayPolicy;
}

function countEffect(c: EffectCounts, effect: EffectStory): void {
  switch (effect.verdict) {
    case 'capacity-type':
      c.steeredFromSpot++;
      break;
    case 'instance-type':
      c.movedType++;
      break;
    case 'replacement':
      c.replaced++;
      break;
    case 'none':
      c.none++;
      return;
    default:
      c.unknown++;
      return;
  }
  c.steeredListPricePerHour += effect.launched?.listPrice ?? 0;
}

/** What a report is built from besides the nodes. */
type ReportContext = Omit<ReportInput, 'nodes'>;

/**
 * A report built a node at a time, so that the nodes of a cluster need not be held at once: a
 * recorded node counts as its record says, one without a record as `explain` would decide it now.
 */
export class ReportBuilder {
  private readonly ctx: ReportContext;
  private readonly index: OverlayIndex;
  private readonly byLabelValue: Map<string, string>;
  private readonly groups: ReadonlyMap<string, number>;
  private readonly tallies = new Map<string, Tally>();
  private readonly totals: ReportTotals = {
    onDemandNodes: 0,
    influenced: 0,
    notInfluenced: 0,
    pending: 0,
    records: 0,
    recordedInline: 0,
    inlineShare: null,
    approximate: 0,
    inactiveOverlays: 0,
    effects: noEffects(),
    unreadableRecords: 0,
    unreadableNodes: [],
    optedOut: 0,
  };
  private nodesInDoubt = 0;

  constructor(ctx: ReportContext) {
    this.ctx = ctx;
    this.index = OverlayIndex.ofCurrent(ctx.overlays, ctx.policy, ctx.now, ctx.nodePools);
    this.byLabelValue = new Map(ctx.overlays.map((o) => [o.nameLabelValue, o.name]));
    this.groups = ctx.nodeClaims.groups ?? new Map<string, number>();
  }

  private tally(name: string): Tally {
    let t = this.tallies.get(name);
    if (!t) {
      t = { won: 0, wonWithoutRecord: 0, lost: 0, lostTo: new Map(), newestWin: undefined, effects: noEffects() };
      this.tallies.set(name, t);
    }
    return t;
  }

  add(obj: NodeObject): void {
    const { settings, now } = this.ctx;
    const keys = settings.keys;
    const node = toNodeView(obj);
    if (node.labels[keys.optOut] === OPTED_OUT) {
      this.totals.optedOut++;
      return;
    }
    const claim = nodeClaimFor(node, this.ctx.nodeClaims);
    const s = scope(node, claim, keys);
    if (!s.inScope) return;
    this.totals.onDemandNodes++;
    let winner: string | undefined;
    if (s.recorded) {
      const story = readStory(obj.metadata?.annotations?.[keys.decisionAnnotation] ?? undefined);
      this.totals.records++;
      if (story === undefined) {
        this.totals.unreadableRecords++;
        if (this.totals.unreadableNodes.length < MAX_NAMED_UNREADABLE) this.totals.unreadableNodes.push(node.name);
      }
      if (story?.decidedBy === 'webhook') this.totals.recordedInline++;
      if (story?.basis === 'approximate') this.totals.approximate++;
      if (story?.effect) {
        countEffect(this.totals.effects, story.effect);
        for (const name of story.effect.overlays ?? []) countEffect(this.tally(name).effects, story.effect);
        for (const c of story.effect.disruption?.churn ?? []) {
          this.totals.effects.churned += c.nodes;
          this.tally(c.overlay).effects.churned += c.nodes;
        }
      }
      if (node.labels[keys.influenced] !== 'true') {
        this.totals.notInfluenced++;
        winner = NO_OVERLAY;
      } else {
        this.totals.influenced++;
        const label = node.labels[keys.matchingOverlay] ?? '';
        winner = story?.overlay ?? this.byLabelValue.get(label) ?? label;
        const t = this.tally(winner);
        t.won++;
        const at = story ? Date.parse(story.labeledAt) : fromBasicTimestamp(node.labels[keys.labeledAt]);
        if (at !== undefined && !Number.isNaN(at) && (t.newestWin === undefined || at > t.newestWin)) t.newestWin = at;
        t.recordLabels ??= node.labels;
      }
    } else {
      this.totals.pending++;
      const d = decide(decisionInput(node, this.ctx, now, 'cli'), this.index, settings);
      // A node still waiting for its labels matches nothing yet.
      if (d.outcome === 'undetermined') {
        if (d.provider.warning !== undefined) this.nodesInDoubt++;
        return;
      }
      winner = d.outcome === 'influenced' && d.overlay ? d.overlay.name : NO_OVERLAY;
      if (winner !== NO_OVERLAY) {
        this.tally(winner).won++;
        this.tally(winner).wonWithoutRecord++;
      }
    }
    const at = launchTime(node, claim, now);
    const provider = providerOf(node, claim, settings, this.groups);
    if (provider.warning !== undefined) this.nodesInDoubt++;
    for (const v of this.index.matchesAt(karpenterView(characteristics(node, claim), at, this.index, provider), at)) {
      if (v.overlay.name === winner || !v.selected) continue;
      const t = this.tally(v.overlay.name);
      t.lost++;
      t.lostTo.set(winner, (t.lostTo.get(winner) ?? 0) + 1);
    }
  }

  finish(): Report {
    const { settings, policy, now } = this.ctx;
    const totals = this.totals;
    totals.inlineShare = totals.records > 0 ? totals.recordedInline / totals.records : null;
    totals.effects.steeredListPricePerHour = Math.round(totals.effects.steeredListPricePerHour * 10_000) / 10_000;
    const rows = overlayRows(this.ctx.overlays, this.tallies, totals, policy, now, settings.keys);
    const census = providerCensus(settings.provider, settings.knownProviders ?? KNOWN_PROVIDERS, this.groups);
    return {
      generatedAt: rfc3339(now),
      overlays: rows,
      totals,
      provider: { ...census, nodesInDoubt: this.nodesInDoubt },
    };
  }
}

export function buildReport(input: ReportInput): Report {
  const builder = new ReportBuilder(input);
  for (const node of input.nodes) builder.add(node);
  return builder.finish();
}

// "Are the overlays working?" overlay by overlay: which overlays won nodes, which matched only
// where a heavier one won, and which matched nothing. Recorded nodes count as their record
// says; a node without a record counts as `explain` would decide it now.
import { decide, decisionInput, karpenterView, launchTime, providerOf, type EngineSettings } from './decide.ts';
import { characteristics, scope } from './scope.ts';
import type { NodePoolView } from './nodepool.ts';
import { rfc3339, fromBasicTimestamp } from './labels.ts';
import { nodeClaimFor, toNodeView, type NodeClaimLookup, type NodeObject } from './node.ts';
import { OverlayIndex } from './overlay-index.ts';
import { ineligibility, NOT_VALIDATED, outranks, REJECTED, type OverlayPolicy, type OverlayView } from './overlay.ts';
import { readStory, type EffectStory } from './record.ts';
import { providerCensus, type ProviderCensus } from './provider-census.ts';
import { KNOWN_PROVIDERS } from './providers.ts';

/**
 * `steering`: it won nodes and changed some of their launches (or nothing says it did not);
 * `no-effect`: it won nodes, and every one of their launches would have been the same without the
 * selected overlays; `rejected`: Karpenter's validation failed (its reason in the note);
 * `unvalidated`: Karpenter has not validated it.
 */
export type Verdict =
  | 'steering'
  | 'no-effect'
  | 'outranked'
  | 'idle'
  | 'rejected'
  | 'unvalidated'
  | 'inactive'
  | 'gone';

/** Recorded nodes by what the selected overlays changed about their launch (a record's effect). */
export interface EffectCounts {
  /** Without the selected overlays Karpenter would have launched spot. */
  steeredFromSpot: number;
  /** Without them, another instance type. */
  movedType: number;
  /** Consolidation replacements that without them would not have happened at all. */
  replaced: number;
  /** Without them, the same launch. */
  none: number;
  unknown: number;
  /** On-demand USD an hour, at list price, of the nodes steered from spot, moved to another type or launched to replace others. */
  steeredListPricePerHour: number;
  /** Recorded nodes replaced after the overlay their record named changed or went, as the replacements' records tell. */
  churned: number;
}

export interface OverlayReport {
  overlay: string;
  /** Null for an overlay that is gone: only its records remain. */
  weight: number | null;
  capacityType: string | null;
  instanceFamily: string | null;
  instanceType: string | null;
  region: string | null;
  /** Nodes it won: records naming it, plus nodes without a record that it would win now. */
  won: number;
  wonWithoutRecord: number;
  /** Nodes it matched at their launch while another overlay (or none, says the record) won. */
  lost: number;
  lostTo: Record<string, number>;
  /** When the newest record naming it was written. */
  newestWin: string | null;
  /** The records whose launch it priced a candidate of (its effect's overlays), by that effect. */
  effects: EffectCounts;
  verdict: Verdict;
  note?: string;
}

export interface ReportTotals {
  onDemandNodes: number;
  influenced: number;
  notInfluenced: number;
  pending: number;
  records: number;
  recordedInline: number;
  /** Share of records the webhook wrote (null with no records). */
  inlineShare: number | null;
  approximate: number;
  /** Overlays in the cluster that count for nothing (not selected, capacity only, rejected) and no record names. */
  inactiveOverlays: number;
  /** Every record with an effect, each node once. */
  effects: EffectCounts;
}

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

export interface ReportInput {
  nodes: readonly NodeObject[];
  overlays: readonly OverlayView[];
  nodePools: readonly NodePoolView[];
  nodeClaims: NodeClaimLookup;
  now: number;
  settings: EngineSettings;
  policy: OverlayPolicy;
}

/** The record's winner in the lostTo tally when the record says no overlay matched. */
export const NO_OVERLAY = '(none)';

interface Tally {
  won: number;
  wonWithoutRecord: number;
  lost: number;
  lostTo: Map<string, number>;
  newestWin: number | undefined;
  /** From the records, for an overlay that is gone. */
  recordLabels?: Record<string, string>;
  effects: EffectCounts;
}

const noEffects = (): EffectCounts => ({
  steeredFromSpot: 0,
  movedType: 0,
  replaced: 0,
  none: 0,
  unknown: 0,
  steeredListPricePerHour: 0,
  churned: 0,
});

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

export function buildReport(input: ReportInput): Report {
  const { settings, policy, now } = input;
  const keys = settings.keys;
  const index = OverlayIndex.ofCurrent(input.overlays, policy, now, input.nodePools);
  const byLabelValue = new Map(input.overlays.map((o) => [o.nameLabelValue, o.name]));
  const tallies = new Map<string, Tally>();
  const tally = (name: string) => {
    let t = tallies.get(name);
    if (!t) {
      t = { won: 0, wonWithoutRecord: 0, lost: 0, lostTo: new Map(), newestWin: undefined, effects: noEffects() };
      tallies.set(name, t);
    }
    return t;
  };
  const totals: ReportTotals = {
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
  };
  const groups = input.nodeClaims.groups ?? new Map<string, number>();
  let nodesInDoubt = 0;

  for (const obj of input.nodes) {
    const node = toNodeView(obj);
    const claim = nodeClaimFor(node, input.nodeClaims);
    const s = scope(node, claim, keys);
    if (!s.inScope) continue;
    totals.onDemandNodes++;
    let winner: string | undefined;
    if (s.recorded) {
      const story = readStory(obj.metadata?.annotations?.[keys.decisionAnnotation] ?? undefined);
      totals.records++;
      if (story?.decidedBy === 'webhook') totals.recordedInline++;
      if (story?.basis === 'approximate') totals.approximate++;
      if (story?.effect) {
        countEffect(totals.effects, story.effect);
        for (const name of story.effect.overlays ?? []) countEffect(tally(name).effects, story.effect);
        for (const c of story.effect.disruption?.churn ?? []) {
          totals.effects.churned += c.nodes;
          tally(c.overlay).effects.churned += c.nodes;
        }
      }
      if (node.labels[keys.influenced] !== 'true') {
        totals.notInfluenced++;
        winner = NO_OVERLAY;
      } else {
        totals.influenced++;
        const label = node.labels[keys.matchingOverlay] ?? '';
        winner = story?.overlay ?? byLabelValue.get(label) ?? label;
        const t = tally(winner);
        t.won++;
        const at = story ? Date.parse(story.labeledAt) : fromBasicTimestamp(node.labels[keys.labeledAt]);
        if (at !== undefined && !Number.isNaN(at) && (t.newestWin === undefined || at > t.newestWin)) t.newestWin = at;
        t.recordLabels ??= node.labels;
      }
    } else {
      totals.pending++;
      const d = decide(decisionInput(node, input, now, 'cli'), index, settings);
      // A node still waiting for its labels matches nothing yet.
      if (d.outcome === 'undetermined') {
        if (d.provider.warning !== undefined) nodesInDoubt++;
        continue;
      }
      winner = d.outcome === 'influenced' && d.overlay ? d.overlay.name : NO_OVERLAY;
      if (winner !== NO_OVERLAY) {
        tally(winner).won++;
        tally(winner).wonWithoutRecord++;
      }
    }
    const at = launchTime(node, claim, now);
    const provider = providerOf(node, claim, settings, groups);
    if (provider.warning !== undefined) nodesInDoubt++;
    for (const v of index.matchesAt(karpenterView(characteristics(node, claim), at, index, provider), at)) {
      if (v.overlay.name === winner || !v.selected) continue;
      const t = tally(v.overlay.name);
      t.lost++;
      t.lostTo.set(winner, (t.lostTo.get(winner) ?? 0) + 1);
    }
  }
  totals.inlineShare = totals.records > 0 ? totals.recordedInline / totals.records : null;
  totals.effects.steeredListPricePerHour = Math.round(totals.effects.steeredListPricePerHour * 10_000) / 10_000;

  const rows: OverlayReport[] = [];
  const present = new Set<string>();
  for (const o of [...input.overlays].sort((a, b) => (outranks(a, b) ? -1 : 1))) {
    present.add(o.name);
    const why = o.deletingAt !== undefined ? 'being deleted' : ineligibility(o, policy);
    const t = tallies.get(o.name);
    // Overlays Karpenter refused or never validated are always shown: nothing else says so.
    const karpenter = karpenterVerdict(o, why, now);
    if (why !== undefined && !t && karpenter === undefined) {
      totals.inactiveOverlays++;
      continue;
    }
    const row = reportRow(o.name, o.weight, (k) => o.labels[`veneer.io/${k}`], t);
    const noEffect =
      row.verdict === 'no-effect'
        ? {
            note: `won ${row.won} node${row.won === 1 ? '' : 's'}, and each launch would have been the same without the selected overlays`,
          }
        : {};
    rows.push(
      karpenter
        ? { ...row, ...karpenter }
        : why === undefined
          ? { ...row, ...noEffect }
          : { ...row, verdict: 'inactive', note: why },
    );
  }
  const gone = [...tallies.entries()]
    .filter(([name]) => !present.has(name) && name !== NO_OVERLAY)
    .sort(([a], [b]) => a.localeCompare(b));
  for (const [name, t] of gone) {
    const row = reportRow(name, null, (k) => t.recordLabels?.[keys.copied[k]], t);
    rows.push({
      ...row,
      verdict: 'gone',
      note: `no longer in the cluster; named by ${t.won} record${t.won === 1 ? '' : 's'}${t.effects.churned > 0 ? `; ${t.effects.churned} recorded node(s) replaced after it went` : ''}`,
    });
  }
  const census = providerCensus(settings.provider, settings.knownProviders ?? KNOWN_PROVIDERS, groups);
  return { generatedAt: rfc3339(now), overlays: rows, totals, provider: { ...census, nodesInDoubt } };
}

/** Its records say, each of them, that the launch would have been the same without the selected overlays. */
function changedNone(e: EffectCounts | undefined): boolean {
  return (
    e !== undefined && e.none > 0 && e.steeredFromSpot === 0 && e.movedType === 0 && e.replaced === 0 && e.unknown === 0
  );
}

function karpenterVerdict(
  o: OverlayView,
  why: string | undefined,
  now: number,
): { verdict: Verdict; note: string } | undefined {
  if (why?.startsWith(REJECTED)) return { verdict: 'rejected', note: why };
  if (why?.startsWith(NOT_VALIDATED)) {
    const age =
      o.createdAt !== undefined ? ` (created ${Math.max(0, Math.round((now - o.createdAt) / 60_000))} min ago)` : '';
    return { verdict: 'unvalidated', note: `${why}${age}` };
  }
  return undefined;
}

function reportRow(
  name: string,
  weight: number | null,
  label: (k: 'capacity-type' | 'instance-family' | 'instance-type' | 'region') => string | undefined,
  t: Tally | undefined,
): OverlayReport {
  const won = t?.won ?? 0;
  const lost = t?.lost ?? 0;
  return {
    overlay: name,
    weight,
    capacityType: label('capacity-type') ?? null,
    instanceFamily: label('instance-family') ?? null,
    instanceType: label('instance-type') ?? null,
    region: label('region') ?? null,
    won,
    wonWithoutRecord: t?.wonWithoutRecord ?? 0,
    lost,
    lostTo: Object.fromEntries([...(t?.lostTo ?? [])].sort(([, a], [, b]) => b - a)),
    newestWin: t?.newestWin !== undefined ? rfc3339(t.newestWin) : null,
    effects: {
      ...(t?.effects ?? noEffects()),
      steeredListPricePerHour: Math.round((t?.effects.steeredListPricePerHour ?? 0) * 10_000) / 10_000,
    },
    verdict: won > 0 ? (changedNone(t?.effects) ? 'no-effect' : 'steering') : lost > 0 ? 'outranked' : 'idle',
  };
}

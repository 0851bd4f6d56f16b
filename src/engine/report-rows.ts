// The report's rows: each overlay's tally (report.ts counts them a node at a time) with its verdict,
// the overlays Karpenter refused or never validated always among them, and those that are gone
// but still named by records after them.
import { rfc3339 } from './labels.ts';
import { ineligibility, NOT_VALIDATED, outranks, REJECTED, type OverlayPolicy, type OverlayView } from './overlay.ts';
import type { RecordKeys } from './record.ts';

/**
 * `steering`: it won nodes and changed some of their launches (or nothing says it did not);
 * `no-effect`: it won nodes, and every one of their launches would have been the same without the
 * selected overlays; `rejected`: Karpenter's validation failed (its reason in the note);
 * `unvalidated`: Karpenter has not validated it.
 */
type Verdict = 'steering' | 'no-effect' | 'outranked' | 'idle' | 'rejected' | 'unvalidated' | 'inactive' | 'gone';

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
  /** Records without a decision annotation the watcher can read: not the watcher's (stored while its webhook was down). */
  unreadableRecords: number;
  /** The first of those nodes, by name (at most MAX_NAMED_UNREADABLE). */
  unreadableNodes: string[];
  /** Nodes their launcher opted out of a record. */
  optedOut: number;
}

/** Unreadable records named in a report: enough to start looking, never the whole fleet. */
export const MAX_NAMED_UNREADABLE = 10;

/** The record's winner in the lostTo tally when the record says no overlay matched. */
export const NO_OVERLAY = '(none)';

export interface Tally {
  won: number;
  wonWithoutRecord: number;
  lost: number;
  lostTo: Map<string, number>;
  newestWin: number | undefined;
  /** From the records, for an overlay that is gone. */
  recordLabels?: Record<string, string>;
  effects: EffectCounts;
}

export const noEffects = (): EffectCounts => ({
  steeredFromSpot: 0,
  movedType: 0,
  replaced: 0,
  none: 0,
  unknown: 0,
  steeredListPricePerHour: 0,
  churned: 0,
});

/** Every overlay's row, heaviest first, then the gone ones; counts the inactive ones into `totals`. */
export function overlayRows(
  overlays: readonly OverlayView[],
  tallies: ReadonlyMap<string, Tally>,
  totals: ReportTotals,
  policy: OverlayPolicy,
  now: number,
  keys: RecordKeys,
): OverlayReport[] {
  const rows: OverlayReport[] = [];
  const present = new Set<string>();
  for (const o of [...overlays].sort((a, b) => (outranks(a, b) ? -1 : 1))) {
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
  return rows;
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

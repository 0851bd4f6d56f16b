// `veneer-node-watcher report`: every overlay's verdict, from files such as `kubectl get -o yaml`
// writes or live from the cluster (read-only).
import { stringify } from 'yaml';
import type { Config } from '../config/load.ts';
import { claimLookup, readInputFiles, type InputFiles, type Inputs } from './inputs.ts';
import { readLiveNodes } from './live.ts';
import {
  buildReport,
  ReportBuilder,
  toOverlayView,
  UNKNOWN_PROVIDER,
  type OverlayReport,
  type ProviderReport,
  type Report,
} from '../engine/index.ts';
import { engineSettings, overlayPolicy } from '../config/engine-settings.ts';

export interface ReportArgs extends InputFiles {
  output: 'json' | 'table' | 'yaml';
}

export async function runReport(args: ReportArgs, config: Config, now = Date.now()): Promise<string> {
  const settings = engineSettings(config);
  const context = (inputs: Omit<Inputs, 'nodes'>) => ({
    overlays: inputs.overlays.map((o) => toOverlayView(o)),
    nodePools: inputs.nodePools,
    nodeClaims: claimLookup(inputs.nodeClaims),
    now,
    settings,
    policy: overlayPolicy(config),
  });
  let report: Report;
  if (args.nodesFile) {
    const inputs = readInputFiles(args);
    report = buildReport({ ...context(inputs), nodes: inputs.nodes });
  } else {
    let builder: ReportBuilder | undefined;
    await readLiveNodes(
      settings.keys,
      (rest) => {
        const b = new ReportBuilder(context(rest));
        builder = b;
        return (node) => b.add(node);
      },
      progress,
    );
    if (process.stderr.isTTY) process.stderr.write('\n');
    report = builder!.finish();
  }
  if (args.output === 'json') return JSON.stringify(report, null, 2);
  return args.output === 'yaml' ? stringify(report).trimEnd() : table(report);
}

/** On a terminal, a line on stderr that counts the nodes read (a large cluster takes seconds); elsewhere nothing. */
function progress(nodes: number): void {
  if (process.stderr.isTTY) process.stderr.write(`\rreading nodes: ${nodes}`);
}

const dash = (v: string | number | null) => (v === null ? '-' : String(v));

function columns(rows: string[][]): string {
  const width = rows[0]!.map((_, c) => Math.max(...rows.map((r) => r[c]!.length)));
  return rows
    .map((r) => r.map((cell, c) => (c === r.length - 1 ? cell : cell.padEnd(width[c]!))).join('  '))
    .join('\n');
}

const percent = (share: number) => `${Math.round(share * 100)}%`;

function table(report: Report): string {
  const head = [
    'OVERLAY',
    'WEIGHT',
    'CAPACITY-TYPE',
    'FAMILY',
    'TYPE',
    'REGION',
    'WON',
    'LOST',
    'FROM-SPOT',
    'MOVED',
    'REPLACED',
    'CHURNED',
    'NO-EFFECT',
    'STEERED-$/H',
    'NEWEST-WIN',
    'VERDICT',
  ];
  const row = (o: OverlayReport) => [
    o.overlay,
    dash(o.weight),
    dash(o.capacityType),
    dash(o.instanceFamily),
    dash(o.instanceType),
    dash(o.region),
    String(o.won),
    String(o.lost),
    String(o.effects.steeredFromSpot),
    String(o.effects.movedType),
    String(o.effects.replaced),
    String(o.effects.churned),
    String(o.effects.none),
    o.effects.steeredListPricePerHour.toFixed(4),
    dash(o.newestWin),
    o.verdict,
  ];
  const lines = [columns([head, ...report.overlays.map(row)])];
  const notes: string[] = [];
  for (const o of report.overlays) {
    const lostTo = Object.entries(o.lostTo).map(([winner, n]) => `${n} to ${winner}`);
    if (lostTo.length > 0) notes.push(`${o.overlay}: lost ${lostTo.join(', ')}`);
    if (o.wonWithoutRecord > 0)
      notes.push(`${o.overlay}: ${o.wonWithoutRecord} of its wins have no record yet (the decision explain gives)`);
    if (o.note) notes.push(`${o.overlay}: ${o.verdict}: ${o.note}`);
  }
  if (notes.length > 0) lines.push('', ...notes);
  const t = report.totals;
  const inline =
    t.inlineShare === null
      ? 'no records yet'
      : `${t.recordedInline} of ${t.records} records written inline (${percent(t.inlineShare)})`;
  lines.push(
    '',
    `${t.onDemandNodes} on-demand Karpenter nodes: ${t.influenced} influenced, ${t.notInfluenced} not influenced, ${t.pending} pending; ${inline}; ${t.approximate} with basis approximate`,
  );
  const e = t.effects;
  lines.push(
    `Effects of the selected overlays on recorded launches: ${e.steeredFromSpot} steered from spot to on-demand, ${e.movedType} moved to another instance type, ${e.replaced} replacements that would not have happened without them, ${e.none} the same without them, ${e.unknown} unknown; on-demand list price of the nodes steered, moved or replaced: $${e.steeredListPricePerHour.toFixed(4)}/h`,
  );
  if (e.churned > 0)
    lines.push(
      `Churn: ${e.churned} recorded nodes replaced after the overlay their record named changed or went (told by their replacements' records)`,
    );
  if (t.optedOut > 0)
    lines.push(`${t.optedOut} nodes opted out of a record by their launcher (<labelNamespace>/opt-out: "true")`);
  if (t.unreadableRecords > 0)
    lines.push(
      `WARNING: ${t.unreadableRecords} records have no decision annotation the watcher can read: not written by it (set when the node was created while its webhook was down): ${t.unreadableNodes.join(', ')}${t.unreadableRecords > t.unreadableNodes.length ? ` and ${t.unreadableRecords - t.unreadableNodes.length} more` : ''}`,
    );
  if (t.inactiveOverlays > 0)
    lines.push(
      `${t.inactiveOverlays} overlays count for nothing (not selected, capacity only, rejected or being deleted) and no record names them`,
    );
  lines.push(...providerLines(report.provider));
  return lines.join('\n');
}

/** `Karpenter provider: auto, from each NodeClaim's nodeClassRef.group (NodeClaims: kwok 12)`, each warning, and the nodes in doubt. */
export function providerLines(p: ProviderReport): string[] {
  const note = (c: ProviderReport['nodeClaims'][number]) =>
    c.matchesSetting ? '' : c.provider === UNKNOWN_PROVIDER ? ' (keys unknown)' : ' (not karpenterProvider)';
  const shown = p.nodeClaims.filter((c) => c.nodeClaims > 0).map((c) => `${c.provider} ${c.nodeClaims}${note(c)}`);
  const how =
    p.setting === 'auto' ? "auto, from each NodeClaim's nodeClassRef.group" : `${p.setting}, set by karpenterProvider`;
  const lines = [`Karpenter provider: ${how} (NodeClaims: ${shown.length > 0 ? shown.join(', ') : 'none'})`];
  for (const w of p.warnings) lines.push(`WARNING: ${w}`);
  if (p.nodesInDoubt > 0)
    lines.push(
      `WARNING: ${p.nodesInDoubt} on-demand Karpenter node${p.nodesInDoubt === 1 ? ' is' : 's are'} judged with a provider in doubt (basis approximate): explain NODE says why`,
    );
  return lines;
}

// `report`: the offline per-overlay report of 5,000 real-size nodes (about 18 KB each, as
// `kubectl get nodes -o json` writes them), their NodeClaims and 200 Veneer-like overlays, with
// the compiled CLI as shipped. Nine nodes in ten carry a record (three in four written inline);
// the rest are decided as `explain` would.
import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  decide,
  OverlayIndex,
  parseSelector,
  recordKeys,
  toNodeView,
  toOverlayView,
  type Report,
} from '../src/engine/index.ts';
import { AWS_KEYS } from '../src/engine/providers.ts';
import { RUNTIME_NODE_FLAGS } from '../kit/node-flags.ts';
import { veneerOverlaySet } from './decision.ts';
import { spread, timeCommand } from './scale.ts';
import { median, type SuiteResult } from './stats.ts';
import { realNode } from '../kit/real-node.ts';
import { nodeClaimFor } from '../kit/veneer.ts';

const NODES = 5000;
const OVERLAYS = 200;
const RUNS = 5;

function fixtures(dir: string): { nodes: string; overlays: string; claims: string } {
  const now = Date.now();
  const { overlays, types } = veneerOverlaySet(OVERLAYS);
  const dated = overlays.map((o) => ({
    apiVersion: 'karpenter.sh/v1alpha1',
    kind: 'NodeOverlay',
    ...o,
    metadata: { ...o.metadata, creationTimestamp: new Date(now - 86_400_000).toISOString() },
  }));
  const index = OverlayIndex.ofCurrent(
    dated.map((o) => toOverlayView(o)),
    { selector: parseSelector('app.kubernetes.io/managed-by=veneer'), requireOverlayReady: false },
    now - 86_400_000,
  );
  const settings = { keys: recordKeys('veneer.io'), gracePeriodMs: 60_000, provider: AWS_KEYS };
  const claims = [];
  const nodes = [];
  for (let i = 0; i < NODES; i++) {
    // Half run a type an RI names, half a family only the Compute SP covers.
    const instanceType = i % 2 === 0 ? (types[i % types.length] ?? 'm5.large') : `g${i % 50}x.large`;
    const shape = {
      name: `ip-10-1-${i >> 8}-${i & 255}`,
      claimName: `default-${i.toString(36)}`,
      index: i,
      instanceType,
      providerID: `aws:///us-west-2a/i-bench${i}`,
    };
    const node = realNode(shape);
    node.metadata!.creationTimestamp = new Date(now - 3_600_000) as never;
    claims.push(nodeClaimFor({ ...shape, claimCreatedAt: new Date(now - 3_610_000).toISOString() }));
    if (i % 10 !== 9) {
      const d = decide(
        { node: toNodeView(node), now: now - 3_590_000, decidedBy: i % 4 === 3 ? 'reconciler' : 'webhook' },
        index,
        settings,
      );
      if (d.outcome !== 'influenced' && d.outcome !== 'not-influenced')
        throw new Error(`bench fixture: ${shape.name} ${d.outcome}`);
      Object.assign(node.metadata!.labels!, d.record.labels);
      Object.assign(node.metadata!.annotations!, d.record.annotations);
    }
    nodes.push(node);
  }
  const write = (file: string, items: unknown[]) => {
    writeFileSync(join(dir, file), JSON.stringify({ apiVersion: 'v1', kind: 'List', items }));
    return join(dir, file);
  };
  return {
    nodes: write('nodes.json', nodes),
    overlays: write('overlays.json', dated),
    claims: write('claims.json', claims),
  };
}

export async function runReportSuite(progress: (msg: string) => void): Promise<SuiteResult> {
  progress(`report: ${NODES} real-size nodes, their NodeClaims and ${OVERLAYS} overlays, compiled CLI`);
  const dir = mkdtempSync(join(tmpdir(), 'veneer-report-'));
  try {
    const files = fixtures(dir);
    const args = ['report', '--nodes', files.nodes, '--overlays', files.overlays, '--nodeclaims', files.claims];
    // The figure is only worth something if the command did the whole work.
    const out = execFileSync(
      process.execPath,
      [...RUNTIME_NODE_FLAGS, join(import.meta.dirname, '..', 'dist', 'cli.js'), ...args, '-o', 'json'],
      { encoding: 'utf8', maxBuffer: 64 * 2 ** 20 },
    );
    const report = JSON.parse(out) as Report;
    if (report.totals.onDemandNodes !== NODES || report.totals.pending !== NODES / 10)
      throw new Error(`report bench: unexpected totals ${JSON.stringify(report.totals)}`);
    timeCommand([...args, '-o', 'json'], 1);
    const json = timeCommand([...args, '-o', 'json'], RUNS);
    const table = timeCommand(args, RUNS);
    const steering = report.overlays.filter((o) => o.verdict === 'steering').length;
    return {
      keys: { report_5000_ms: Math.round(median(json)) },
      targets: { report_5000_ms: '<= 2000' },
      table: [
        { output: 'json', runs: RUNS, median_ms: Math.round(median(json)), spread_ms: spread(json, 0) },
        { output: 'table', runs: RUNS, median_ms: Math.round(median(table)), spread_ms: spread(table, 0) },
      ],
      raw: {
        report_5000_json_ms: json,
        report_5000_table_ms: table,
        totals: report.totals,
        steering_overlays: steering,
        overlays: report.overlays.length,
      },
    };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

// `veneer-node-watcher explain`: why a node got (or would get) its record, from files such as
// `kubectl get nodes -o yaml` writes, or live from the cluster.
import type { Config } from '../config/load.ts';
import { claimLookup, readInputFiles, type InputFiles } from './inputs.ts';
import { fitSizing, InstanceTypeLabels } from '../state/lookups.ts';
import { PoolOfferings } from '../state/disruption/pool-offerings.ts';
import { readLive } from './live.ts';
import {
  evidenceOfReading,
  explainer,
  readStory,
  toNodeView,
  toOverlayView,
  nodeClaimFor,
  type Effect,
  type LaunchKnowledge,
  type Explanation,
  type ProviderExplanation,
} from '../engine/index.ts';
import { engineSettings, karpenterSettings, overlayPolicy } from '../config/engine-settings.ts';
import { regionOfNodes } from '../prices/region.ts';
import { readPricesOnce } from '../prices/source.ts';

export interface ExplainArgs extends InputFiles {
  nodeName?: string;
  at?: string;
  output: 'json' | 'table' | 'yaml';
}

export async function runExplain(args: ExplainArgs, config: Config, now = Date.now()): Promise<string> {
  const at = args.at !== undefined ? Date.parse(args.at) : now;
  if (Number.isNaN(at))
    throw new Error(`--at ${JSON.stringify(args.at)} is not a time (use RFC 3339, e.g. 2026-01-12T15:30:00Z)`);
  const inputs = args.nodeName ? await readLive(args.nodeName) : readInputFiles(args);
  const overlays = inputs.overlays.map((o) => toOverlayView(o));
  const claims = claimLookup(inputs.nodeClaims);
  // prices.region auto, and no region in the environment: the one most of the nodes read name.
  const nodeRegion = regionOfNodes(inputs.nodes.map((n) => ({ labels: n.metadata?.labels ?? {} })));
  const prices = await readPricesOnce(config, nodeRegion);
  const settings = engineSettings(config);
  const nodes = inputs.nodes.map((n) => toNodeView(n, settings.keys.decisionAnnotation));
  const disruption = evidenceOfReading({
    claims: inputs.nodeClaims,
    records: nodes.map((node) => ({ nodeClaim: nodeClaimFor(node, claims), story: readStory(node.story) })),
    ...(inputs.launching ? { launching: inputs.launching } : {}),
    ...(inputs.candidates ? { candidates: inputs.candidates } : {}),
    ...(inputs.approvals ? { approvals: inputs.approvals } : {}),
  });
  // As the watcher's caches hold them: a registered node's labels per type, the sizing each NodeClass
  // gives, each NodePool's NodeClaims by offering (Balanced's pool cost).
  const instanceLabels = new InstanceTypeLabels();
  for (const node of nodes) instanceLabels.seen(node);
  const poolOfferings = new PoolOfferings();
  for (const claim of inputs.nodeClaims) poolOfferings.upsert(claim);
  const karpenter = karpenterSettings(config);
  const launch: LaunchKnowledge = {
    prices,
    zonesOf: (name) => inputs.nodeClassZones.get(name),
    sizingOf: (name) => {
      const sizing = inputs.nodeClassSizing.get(name);
      return sizing && fitSizing(sizing, karpenter, instanceLabels.current);
    },
    instanceLabels: instanceLabels.current,
    disruption,
    poolOfferings: (pool, createdBefore) => poolOfferings.offerings(pool, createdBefore),
    poolCapacity: (pool, createdBefore, except) => poolOfferings.capacity(pool, createdBefore, except),
  };
  const explain = explainer(
    { overlays, nodePools: inputs.nodePools, nodeClaims: claims, launch },
    { now: at, knownSince: at },
    settings,
    overlayPolicy(config),
  );
  const results = nodes.map((node) => withRecordedEffect(explain(node), node.story));
  // Compact JSON: indenting tens of megabytes (200 nodes, each against every overlay) took a third of the run; jq indents.
  if (args.output === 'json') return JSON.stringify(results);
  if (args.output === 'table') return results.map(table).join('\n\n');
  // yaml (about 25 ms to load) only for the output that needs it.
  const { stringify } = await import('yaml');
  return stringify(results).trimEnd();
}

/**
 * A recorded node's effect is its record's: the watcher decided it live, with the overlays as they
 * were then (one deleted since, or changed while Karpenter decided) and the replaced nodes'
 * records (their churn), which a decision made again from what is there now cannot see. Where
 * that decision reads otherwise, it is shown beside the record's (`effectNow`).
 */
function withRecordedEffect(e: Explanation, story: string | undefined): Explanation {
  const recorded = readStory(story)?.effect;
  if (recorded === undefined) return e;
  const { overlaysCount: _count, prices, ...rest } = recorded;
  const asOf = prices?.asOf === undefined ? Number.NaN : Date.parse(prices.asOf);
  const effect: Effect = {
    ...rest,
    ...(prices ? { prices: { source: prices.source, ...(Number.isNaN(asOf) ? {} : { asOf }) } } : {}),
  };
  const now = e.effect;
  const differs = now !== undefined && (now.verdict !== effect.verdict || now.reasonCode !== effect.reasonCode);
  return { ...e, effect, ...(differs ? { effectNow: now } : {}) };
}

function requirementText(r: {
  key: string;
  operator: string;
  values: readonly string[];
  gte?: string;
  lte?: string;
}): string {
  const bounds = [r.gte !== undefined ? ` >=${r.gte}` : '', r.lte !== undefined ? ` <=${r.lte}` : ''].join('');
  return `${r.key} ${r.operator}${r.values.length ? ` [${r.values.join(', ')}]` : ''}${bounds}`;
}

const FROM: Record<ProviderExplanation['from'], (p: ProviderExplanation) => string> = {
  setting: () => 'karpenterProvider',
  nodeclaim: (p) => `its NodeClaim's nodeClassRef.group ${p.group}`,
  'node-labels': () => 'the domain of its labels; its NodeClaim is unknown',
  cluster: () => 'most NodeClaims in the cluster',
  none: () => 'nothing names it',
};

/** `provider: kwok (from its NodeClaim's nodeClassRef.group karpenter.kwok.sh)`, and a warning when in doubt. */
export function providerLine(p: ProviderExplanation): string[] {
  const lines = [`  provider: ${p.name} (from ${FROM[p.from](p)})`];
  if (p.warning !== undefined) lines.push(`  WARNING: ${p.warning}; basis approximate`);
  return lines;
}

const EFFECT_SAYS: Record<Exclude<Effect['verdict'], 'unknown'>, string> = {
  'capacity-type': 'without the selected overlays Karpenter would have launched spot',
  'instance-type': 'without them, another instance type',
  none: 'without them, the same launch',
  replacement: 'without them, nothing would have undercut the nodes it replaced: no replacement',
};

const dollars = (n: number) => `$${Number(n.toFixed(6))}/h`;

/** A launch of Karpenter's disruption: its reason, what it replaced, and the price test in both worlds. */
function disruptionLines(d: NonNullable<Effect['disruption']>): string[] {
  const lines = [
    d.replacedUnclear === undefined
      ? `    launched by Karpenter's disruption: ${d.reason}, replacing ${d.replacedCount} node(s)`
      : `    launched by Karpenter's disruption: ${d.reason}; ${d.replacedUnclear}`,
  ];
  for (const r of d.replaced) {
    const offering = [r.instanceType, r.capacityType, r.zone].filter((x) => x !== undefined).join(' ');
    const price = r.price ? `: ${dollars(r.price.with)} with the overlays, ${dollars(r.price.without)} without` : '';
    lines.push(`      ${r.node ?? r.nodeClaim} (${offering || 'offering unknown'})${price}`);
  }
  if (d.replacedCount > d.replaced.length) lines.push(`      and ${d.replacedCount - d.replaced.length} more`);
  if (d.price)
    lines.push(
      `    to undercut: ${dollars(d.price.with)} with the overlays, ${dollars(d.price.without)} without the selected ones`,
    );
  if (d.savings !== undefined) lines.push(`    Karpenter's estimated saving: ${dollars(d.savings)}`);
  if (d.cheaperWithout !== undefined)
    lines.push(`    options that undercut without the selected overlays: ${d.cheaperWithout}`);
  if (d.replacedWithout !== undefined)
    lines.push(
      `    without the selected overlays Karpenter's consolidation ${d.replacedWithout ? 'would have made this replacement too' : 'would not have made this replacement'}`,
    );
  if (d.moments !== undefined)
    lines.push(
      `    the overlays changed while Karpenter decided: ${d.moments} moments fit what it kept, each with this verdict; these figures are the latest's`,
    );
  for (const c of d.churn ?? [])
    lines.push(
      `    churn: ${c.nodes} recorded node(s) replaced after ${c.overlay}, which their record names, ${c.state === 'gone' ? 'went' : 'changed'}`,
    );
  return lines;
}

/** The effect, and both worlds' launches side by side. */
export function effectLines(effect: Effect): string[] {
  const says =
    effect.verdict === 'unknown'
      ? (effect.reason ?? 'unknown')
      : `${EFFECT_SAYS[effect.verdict]}${effect.reason ? `: ${effect.reason}` : ''}`;
  const lines = [`  effect: ${effect.verdict} (${says})`];
  const w = effect.with;
  const wo = effect.without;
  if (w || wo) {
    const price = (l: typeof w) => (l?.listPrice !== undefined ? `$${l.listPrice}/h` : '-');
    const rows = [
      ['', 'with the overlays', 'without the selected ones'],
      ['capacity type', w?.capacityType ?? '?', wo?.capacityType ?? '?'],
      ['instance type', w?.instanceTypes.join(' | ') ?? '?', wo?.instanceTypes.join(' | ') ?? '?'],
      ['CreateFleet strategy', w?.strategy ?? '?', wo?.strategy ?? '?'],
      ['on-demand list price', price(w), price(wo)],
    ];
    const width = [0, 1].map((c) => Math.max(...rows.map((r) => r[c]!.length)));
    for (const r of rows) lines.push(`    ${r[0]!.padEnd(width[0]!)}  ${r[1]!.padEnd(width[1]!)}  ${r[2]}`);
  }
  if (effect.launched)
    lines.push(
      `    launched at list $${effect.launched.listPrice}/h, priced $${effect.launched.price}/h by the overlays`,
    );
  if (effect.disruption) lines.push(...disruptionLines(effect.disruption));
  if (effect.overlays?.length)
    lines.push(`    selected overlays that priced a candidate: ${effect.overlays.join(', ')}`);
  if (effect.prices)
    lines.push(
      `    prices: ${effect.prices.source}${effect.prices.asOf !== undefined ? `, read ${new Date(effect.prices.asOf).toISOString()}` : ''}`,
    );
  return lines;
}

function table(e: Explanation): string {
  const head =
    e.outcome === 'influenced'
      ? `${e.node}: influenced by ${e.overlay} (launch ${e.evaluatedAt}, basis ${e.basis})`
      : e.outcome === 'not-influenced'
        ? `${e.node}: not influenced: no active overlay matched (launch ${e.evaluatedAt}, basis ${e.basis})`
        : `${e.node}: ${e.outcome}: ${e.reason}`;
  const lines = [head];
  if (e.provider) lines.push(...providerLine(e.provider));
  if (e.existingRecord)
    lines.push(
      `  existing record: ${Object.entries(e.existingRecord)
        .map(([k, v]) => `${k}=${v}`)
        .join(' ')}`,
    );
  if (Object.keys(e.labels).length > 0)
    lines.push(
      `  labels: ${Object.entries(e.labels)
        .map(([k, v]) => `${k}=${v}`)
        .join(' ')}`,
    );
  if (e.effect) lines.push(...effectLines(e.effect));
  if (e.effectNow)
    lines.push(
      `  decided again now, with the overlays as they are: ${e.effectNow.verdict}${e.effectNow.reason ? ` (${e.effectNow.reason})` : ''}`,
    );
  for (const o of e.overlays) {
    const state = o.winner
      ? 'WINS'
      : !o.active
        ? `inactive: ${o.inactiveReason}`
        : o.matched
          ? 'matches (outranked)'
          : 'no match';
    lines.push(`  - ${o.name} (weight ${o.weight}): ${state}`);
    for (const r of o.requirements) {
      lines.push(
        `      ${r.pass ? 'pass' : 'FAIL'}  ${requirementText(r)}  node: ${r.nodeValue === null ? '(missing)' : JSON.stringify(r.nodeValue)}${r.note ? ` (${r.note})` : ''}`,
      );
      // Say what was written when Karpenter compares something else: several requirements
      // on one key, or a deprecated key.
      const [only] = r.from;
      if (r.from.length > 1 || (only && only.key !== r.key)) {
        lines.push(
          `            from: ${r.from.map((f) => requirementText({ key: f.key, operator: f.operator, values: f.values ?? [] })).join('; ')}`,
        );
      }
    }
  }
  return lines.join('\n');
}

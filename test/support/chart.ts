// The Helm chart rendered by the real helm, and the tools run on what it renders.
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseAllDocuments, stringify } from 'yaml';
import { binary } from '../../kit/control-plane.ts';
import { promtool } from './prometheus.ts';

export const CHART = join(import.meta.dirname, '..', '..', 'charts', 'veneer-node-watcher');
/**
 * The last released chart, kept as it was released: upgrades are tested from it. When a version
 * is released, its chart replaces this one (CHANGELOG.md).
 */
export const PREVIOUS_CHART = join(import.meta.dirname, '..', 'fixtures', 'charts', 'veneer-node-watcher-0.1.0');
export const RELEASE = 'veneer-node-watcher';
export const NS = 'veneer-system';
export const KUBE_VERSION = '1.35.4';

export type Obj = {
  apiVersion: string;
  kind: string;
  metadata: { name: string; namespace?: string; annotations?: Record<string, string> };
  [k: string]: unknown;
};

export interface RuleGroup {
  name: string;
  rules: { alert?: string; record?: string; expr: string; for?: string; annotations?: Record<string, string> }[];
}

export const helm = (args: string[], env: NodeJS.ProcessEnv = process.env) =>
  spawnSync(binary('helm'), args, { encoding: 'utf8', env });

/** `helm template` of the chart as release x, its exit status and output as they are (to see a refusal). */
export const renderRaw = (extra: string[] = []) =>
  helm(['template', 'x', CHART, '--kube-version', KUBE_VERSION, ...extra]);

/** `helm template` of the chart as release veneer-node-watcher in veneer-system. */
export function template(extra: string[] = [], release = RELEASE, chart = CHART): Obj[] {
  const r = helm(['template', release, chart, '--namespace', NS, '--kube-version', KUBE_VERSION, ...extra]);
  if (r.status !== 0) throw new Error(r.stderr);
  return parseAllDocuments(r.stdout)
    .map((d) => d.toJSON() as Obj)
    .filter(Boolean);
}

export const find = (objs: Obj[], kind: string, suffix = '') =>
  objs.find((o) => o.kind === kind && o.metadata.name.endsWith(suffix));

/** The watcher's ConfigMap: named by its content, so found by what it holds. */
export const configMapOf = (objs: Obj[]) =>
  objs.find(
    (o) => o.kind === 'ConfigMap' && (o as { data?: Record<string, string> }).data?.['config.yaml'] !== undefined,
  );

/** The chart's PrometheusRule groups, as a Prometheus rule file would hold them (the alerts that are off by default on). */
export function ruleGroups(extra = ['--set', 'metrics.prometheusRule.overlayIdle.enabled=true']): RuleGroup[] {
  const rule = find(
    template(['--set', 'metrics.prometheusRule.enabled=true', '--set', 'nodeWatcher.enabled=true', ...extra]),
    'PrometheusRule',
  ) as unknown as { spec: { groups: RuleGroup[] } };
  return rule.spec.groups;
}

/** `promtool test rules` of `tests` (a test file's content) against the chart's rules. */
export function testRules(tests: string): { status: number | null; output: string } {
  const dir = mkdtempSync(join(tmpdir(), 'vnw-rules-'));
  writeFileSync(join(dir, 'rules.yaml'), stringify({ groups: ruleGroups() }));
  writeFileSync(join(dir, 'rules.test.yaml'), tests);
  try {
    const r = promtool(['test', 'rules', join(dir, 'rules.test.yaml')]);
    return { status: r.status, output: r.stdout + r.stderr };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

export interface DashboardVariables {
  /** What Grafana puts for `$__rate_interval`: at least four scrape intervals. */
  rateInterval: string;
  /** The cluster variable's value: `.*` is its All, which also matches series without the label. */
  cluster: string;
}

/**
 * The dashboard's panel queries as Grafana sends them to Prometheus: its variables substituted
 * (the data source is not in the query). Throws on a variable left over, so a new one cannot
 * slip past the tools that run the queries.
 */
export function dashboardQueries(
  vars: Partial<DashboardVariables> = {},
): { title: string; expr: string; datasource: unknown }[] {
  const { rateInterval = '2m', cluster = '.*' } = vars;
  const dashboard = JSON.parse(readFileSync(join(CHART, 'dashboards', 'veneer-node-watcher.json'), 'utf8')) as {
    panels: { title: string; datasource?: unknown; targets: { expr: string; datasource?: unknown }[] }[];
  };
  return dashboard.panels.flatMap((p) =>
    p.targets.map((x) => {
      const expr = x.expr.replaceAll('$__rate_interval', rateInterval).replace(/\$\{cluster\}|\$cluster\b/g, cluster);
      if (expr.includes('$')) throw new Error(`a dashboard variable this helper does not know: ${x.expr}`);
      return { title: p.title, expr, datasource: x.datasource ?? p.datasource };
    }),
  );
}

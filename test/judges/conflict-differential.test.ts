// Karpenter's own NodeOverlay controller judges the engine's replay of its validation without the
// selected overlays (src/engine/effect/conflicts.ts). Each generated cluster
// (karpenter-cluster.ts: equal weights, Conflicts and capacity overlays are common) goes to the
// judge twice: with every overlay, and without a random subset taken as the selected ones. The
// engine gets what the watcher gets live (the overlays with the statuses Karpenter wrote in the
// first run, the NodePools, the catalog as a price source, a node's labels per type) and must give
// every overlay not selected the verdict Karpenter wrote in the second run, or abstain.
//
// The generated types' offerings span every zone of the cluster, available only where the type is
// offered: as the AWS provider makes them (offering/base_resolver.go, every zone of the region).
//
// VENEER_CONFLICT_ORACLE_CASES sets the clusters (default 1,000), VENEER_CONFLICT_ORACLE_SEED replays a run.
import t from 'tap';
import { OverlayIndex, parseSelector, type PriceBook, toNodePoolView, toOverlayView } from '../../src/engine/index.ts';
import { Abstain } from '../../src/engine/effect/abstain.ts';
import { revalidatedWithout } from '../../src/engine/effect/conflicts.ts';
import { AWS_KEYS } from '../../src/engine/providers.ts';
import { Choices, generateCluster, watchedNodePools, watchedOverlays } from './karpenter-cluster.ts';
import {
  type JudgeAnswer,
  type JudgeCase,
  type JudgeInstanceType,
  JUDGE_VERSIONS,
  KarpenterJudge,
} from './karpenter-oracle.ts';
import { nodeLabelsOfType } from './launch-cases.ts';

const CASES = Number(process.env.VENEER_CONFLICT_ORACLE_CASES ?? 1000);
const SEED = Number(process.env.VENEER_CONFLICT_ORACLE_SEED ?? Date.now() % 1_000_000);
const SELECTED = { 'app.kubernetes.io/managed-by': 'veneer' };
const policy = { selector: parseSelector('app.kubernetes.io/managed-by=veneer'), requireOverlayReady: true };
const ZONE = 'topology.kubernetes.io/zone';

const valuesOf = (it: JudgeInstanceType, key: string) => it.requirements.find((r) => r.key === key)?.values ?? [];

/** The AWS provider's offerings: every zone of the region for every type, available where it is offered. */
function regionWide(c: JudgeCase): JudgeCase {
  const zones = new Map<string, string>();
  for (const it of c.instanceTypes)
    for (const o of it.offerings) {
      const zone = o.requirements.find((r) => r.key === ZONE)?.values?.[0];
      const id = o.requirements.find((r) => r.key === 'topology.k8s.aws/zone-id')?.values?.[0];
      if (zone && id) zones.set(zone, id);
    }
  return {
    ...c,
    instanceTypes: c.instanceTypes.map((it) => {
      const offered = new Set(valuesOf(it, ZONE));
      return {
        ...it,
        offerings: [...zones].flatMap(([zone, id]) =>
          (['on-demand', 'spot'] as const).map((ct) => ({
            requirements: [
              { key: 'karpenter.sh/capacity-type', operator: 'In', values: [ct] },
              { key: ZONE, operator: 'In', values: [zone] },
              { key: 'topology.k8s.aws/zone-id', operator: 'In', values: [id] },
            ],
            price: 0.1,
            available: offered.has(zone),
          })),
        ),
      };
    }),
  };
}

/** The generated catalog as the watcher's price source: which types, in which zones. */
function catalogOf(c: JudgeCase): PriceBook {
  const types = c.instanceTypes.map((it) => it.name);
  const zones = new Map(c.instanceTypes.map((it) => [it.name, new Set(valuesOf(it, ZONE))]));
  return {
    source: 'generated',
    asOf: undefined,
    region: valuesOf(c.instanceTypes[0]!, 'topology.kubernetes.io/region')[0],
    onDemand: () => 0.1,
    hasSpot: false,
    spot: () => undefined,
    offeredZones: (name) => zones.get(name),
    instanceTypes: () => types,
  };
}

type Verdict = 'accepted' | 'conflict' | 'other';
function verdictIn(answer: JudgeAnswer, name: string): Verdict {
  const v = answer.statuses[name]?.conditions.find((c) => c.type === 'ValidationSucceeded');
  if (v?.status === 'True') return 'accepted';
  return v?.reason === 'Conflict' ? 'conflict' : 'other';
}

for (const version of JUDGE_VERSIONS) {
  t.test(`Karpenter ${version}'s NodeOverlay controller without the selected overlays`, async (t) => {
    const judge = new KarpenterJudge(version);
    t.teardown(() => judge.close());
    t.comment(`seed ${SEED} (rerun with VENEER_CONFLICT_ORACLE_SEED=${SEED})`);
    const stats = { doubted: 0, decided: 0, changed: 0, abstained: new Map<string, number[]>() };
    for (let n = 0; n < CASES; n++) {
      const c = new Choices(SEED * 100_003 + n);
      const g = generateCluster(c, 1);
      const full = regionWide(g.judgeCase);
      const selected = new Set(full.overlays.filter(() => c.chance(0.4)).map((o) => o.name));
      const withAll = await judge.judge(full);
      const without = await judge.judge({ ...full, overlays: full.overlays.filter((o) => !selected.has(o.name)) });
      if (withAll.error || without.error) throw new Error(`case ${n}: ${withAll.error ?? without.error}`);

      const since = Date.parse('2026-01-12T14:00:00Z');
      const createdAt = new Date(since).toISOString();
      const index = new OverlayIndex({ policy, retentionMs: Number.POSITIVE_INFINITY });
      index.replaceAll(
        watchedOverlays(full, withAll, createdAt).map((o) =>
          toOverlayView({
            ...o,
            metadata: { ...o.metadata, labels: selected.has(o.metadata?.name ?? '') ? SELECTED : {} },
          }),
        ),
        since,
      );
      index.markSynced(since);
      const at = since + 7_200_000;
      const replayed = revalidatedWithout(index.activeVersionsAt(at), {
        pools: watchedNodePools(g.pools, createdAt).map((p) => toNodePoolView(p)),
        prices: catalogOf(full),
        provider: AWS_KEYS,
        instanceLabels: new Map(full.instanceTypes.map((it) => [it.name, nodeLabelsOfType(it)])),
      });
      const remaining = full.overlays.filter((o) => !selected.has(o.name));
      const doubted = remaining.some((o) => verdictIn(withAll, o.name) !== verdictIn(without, o.name));
      if (doubted) stats.doubted++;
      if (replayed instanceof Abstain) {
        const why = replayed.reason.replace(/overlay \S+/g, 'overlay X').replace(/weight \d+/g, 'weight N');
        stats.abstained.set(why, [...(stats.abstained.get(why) ?? []), n]);
        continue;
      }
      stats.decided++;
      for (const o of remaining) {
        const before = verdictIn(withAll, o.name);
        if (before === 'other') continue;
        const change = [...replayed].find(([view]) => view.name === o.name)?.[1];
        const engine = change === 'accepted' ? 'accepted' : change === 'refused' ? 'conflict' : before;
        if (change) stats.changed++;
        if (engine !== verdictIn(without, o.name)) {
          t.fail(
            `case ${n} (seed ${SEED}): overlay ${o.name}: Karpenter says ${verdictIn(without, o.name)} without the selected overlays, the engine ${engine}`,
            {
              selected: [...selected],
              overlays: full.overlays,
              nodePools: full.nodePools,
              with: withAll.statuses,
              without: without.statuses,
            },
          );
          return;
        }
      }
    }
    const abstained = [...stats.abstained.values()].reduce((a, b) => a + b.length, 0);
    t.comment(
      `${CASES} clusters: ${stats.doubted} where a verdict changes without the selected overlays; the engine decided ${stats.decided} (${stats.changed} verdicts changed), abstained on ${abstained}: ${[...stats.abstained].map(([why, k]) => `${k.length} × ${why} (clusters ${k.slice(0, 5).join(', ')})`).join('; ')}`,
    );
    t.pass(`every verdict the engine gave is Karpenter's, in ${stats.decided} clusters`);
    // A judge that never sees a verdict change, or an engine that decides none, would prove little.
    t.ok(stats.changed > CASES / 100, `verdicts change without the selected overlays (${stats.changed})`);
    t.ok(
      abstained < stats.doubted,
      `the engine decides most clusters where a verdict changes (abstained on ${abstained} of ${stats.doubted})`,
    );
  });
}

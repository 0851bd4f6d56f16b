// What an operator reads of a record: `explain NODE -o json`, run live on the cluster as the CLI, must
// tell the overlay, verdict and disruption reason the record tells (issue 51: explain and report
// read the candidate and approval Events as the live path does, and agree with the record).
import { execFile } from 'node:child_process';
import { join } from 'node:path';
import { promisify } from 'node:util';
import type { Test } from 'tap';
import { REGION } from '../../../kit/aws/karpenter.ts';
import type { Explanation } from '../../../src/engine/explain.ts';
import type { Report } from '../../../src/engine/report.ts';
import type { DecisionStory } from '../../../src/engine/record.ts';

const CLI = join(import.meta.dirname, '..', '..', '..', 'src', 'cli.ts');
/** The prices the scenes' watchers judge with: Karpenter's static table, the local EC2's spot. */
const PRICES = ['--prices-source', 'isolated', '--prices-region', REGION];

/** The CLI's stdout, live on the cluster of `kubeconfig`. */
export const runCli = async (kubeconfig: string, args: string[]): Promise<string> =>
  (await promisify(execFile)(process.execPath, [CLI, ...args], { env: { ...process.env, KUBECONFIG: kubeconfig } }))
    .stdout;

/** `explain NODE -o json`, live. */
const explainLive = async (kubeconfig: string, node: string): Promise<Explanation | undefined> =>
  (JSON.parse(await runCli(kubeconfig, ['explain', node, '-o', 'json', ...PRICES])) as Explanation[])[0];

/** Where `explain`'s answer departs from the record: none, while the overlays the record read are there. */
function departures(e: Explanation | undefined, story: DecisionStory, overlayGone: boolean): string[] {
  const out: string[] = [];
  if (e?.overlay !== story.overlay) out.push(`overlay ${e?.overlay} where the record names ${story.overlay}`);
  if (e?.effect?.verdict !== story.effect?.verdict)
    out.push(`verdict ${e?.effect?.verdict} where the record reads ${story.effect?.verdict}`);
  if (e?.effect?.disruption?.reason !== story.effect?.disruption?.reason)
    out.push(
      `disruption reason ${e?.effect?.disruption?.reason} where the record's is ${story.effect?.disruption?.reason}`,
    );
  // Decided again from what is there now: the same, unless an overlay that decided it is gone.
  if (!overlayGone && e?.effectNow !== undefined)
    out.push(`decided again now: ${e.effectNow.verdict} (${e.effectNow.reason ?? ''})`);
  if (overlayGone && e?.effectNow === undefined) out.push('decided again without the overlay, it reads the same');
  return out;
}

/**
 * `explain` gives the record's overlay, effect and disruption reason, and, while the overlays the
 * record read are there, decides the same again (no `effectNow`). `overlayGone`: one that decided
 * it was deleted since, and the decision made again from what is there now is shown beside.
 */
export async function explainAgrees(
  t: Test,
  kubeconfig: string,
  node: string,
  story: DecisionStory,
  opts: { overlayGone?: boolean } = {},
): Promise<void> {
  const e = await explainLive(kubeconfig, node);
  t.same(
    departures(e, story, opts.overlayGone ?? false),
    [],
    `explain agrees with the record (${story.effect?.verdict})`,
  );
  if (opts.overlayGone) t.comment(`decided again now: ${e?.effectNow?.verdict} (${e?.effectNow?.reason ?? ''})`);
}

/** The verdicts `report` tallies (ReportTotals.effects), from the records themselves. */
function tally(stories: readonly DecisionStory[]): Record<string, number> {
  const out = { steeredFromSpot: 0, movedType: 0, replaced: 0, none: 0, unknown: 0 };
  const key = {
    'capacity-type': 'steeredFromSpot',
    'instance-type': 'movedType',
    replacement: 'replaced',
    none: 'none',
  } as const;
  for (const s of stories) if (s.effect) out[key[s.effect.verdict as keyof typeof key] ?? 'unknown']++;
  return out;
}

/**
 * Every recorded node of the cluster explained live (a few CLIs at a time) as its record says, and
 * `report`'s tally of the effects the records'. `recorded`: every node with a record, and its story.
 */
export async function everyRecordExplained(
  t: Test,
  kubeconfig: string,
  recorded: readonly { node: string; story: DecisionStory }[],
): Promise<void> {
  const queue = [...recorded];
  const found: string[] = [];
  const worker = async () => {
    for (let r = queue.shift(); r !== undefined; r = queue.shift()) {
      const e = await explainLive(kubeconfig, r.node);
      for (const d of departures(e, r.story, false)) found.push(`${r.node}: ${d}`);
    }
  };
  await Promise.all([worker(), worker(), worker(), worker()]);
  t.same(found, [], `explain agrees with the record on all ${recorded.length} recorded nodes`);
  const report = JSON.parse(await runCli(kubeconfig, ['report', '-o', 'json', ...PRICES])) as Report;
  const { steeredFromSpot, movedType, replaced, none, unknown } = report.totals.effects;
  t.same(
    { steeredFromSpot, movedType, replaced, none, unknown },
    tally(recorded.map((r) => r.story)),
    "report tallies the records' effects",
  );
}

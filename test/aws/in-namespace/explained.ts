// What an operator reads of a record: `explain NODE -o json`, run live on the cluster as the CLI, must
// tell the overlay, verdict and disruption reason the record tells (issue 51: explain and report
// read the candidate and approval Events as the live path does, and agree with the record).
import { execFile } from 'node:child_process';
import { join } from 'node:path';
import { promisify } from 'node:util';
import type { Test } from 'tap';
import { REGION } from '../../../kit/aws/karpenter.ts';
import type { Explanation } from '../../../src/engine/explain.ts';
import type { DecisionStory } from '../../../src/engine/record.ts';

const CLI = join(import.meta.dirname, '..', '..', '..', 'src', 'cli.ts');

/** The CLI's stdout, live on the cluster of `kubeconfig`. */
export const runCli = async (kubeconfig: string, args: string[]): Promise<string> =>
  (await promisify(execFile)(process.execPath, [CLI, ...args], { env: { ...process.env, KUBECONFIG: kubeconfig } }))
    .stdout;

export async function explainAgrees(t: Test, kubeconfig: string, node: string, story: DecisionStory): Promise<void> {
  const [e] = JSON.parse(
    await runCli(kubeconfig, ['explain', node, '-o', 'json', '--prices-source', 'isolated', '--prices-region', REGION]),
  ) as Explanation[];
  t.equal(e?.overlay, story.overlay, 'explain names the overlay the record names');
  t.equal(e?.effect?.verdict, story.effect?.verdict, `explain reads the record's verdict (${story.effect?.verdict})`);
  t.equal(e?.effect?.disruption?.reason, story.effect?.disruption?.reason, 'and the same disruption reason');
}

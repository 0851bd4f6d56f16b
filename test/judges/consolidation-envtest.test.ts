// The consolidation judge's store cross-checked: the judge (test/judges/oracle consolidate.go)
// keeps each world's cluster in a controller-runtime fake client, as it must to answer the
// thousands of cases `npm test` asks (test/judges/replacement-differential.test.ts). Here the same
// generated clusters (test/judges/replacement-cases.ts) are asked of it twice: once over the fake
// client, once with its worlds written to the kit's real kube-apiserver and etcd with Karpenter's
// CRDs installed and read back through a cache with the field indexes Karpenter's operator
// registers (test/judges/oracle/apiserver_store.go), as Karpenter's envtest-based tests do. Every
// answer must be the same: each command's decision, candidate price, reason, error, replacement
// (NodePool, requirements, instance types) in both worlds, and the overlays' statuses.
//
// VENEER_CONSOLIDATION_ENVTEST_CASES sets the clusters (default 50), VENEER_CONSOLIDATION_ENVTEST_SEED
// replays a run. The judge is v1.14.3's (the AWS provider's version, whose CRDs the kit installs).
import t from 'tap';
import * as k8s from '@kubernetes/client-node';
import { ControlPlane } from '../../kit/control-plane.ts';
import { installAwsCRDs } from '../../kit/aws/karpenter.ts';
import { type ConsolidateAnswer, KarpenterJudge, type WorldCommand } from './karpenter-oracle.ts';
import { Choices } from './karpenter-cluster.ts';
import { type ConsolidationCase, generateConsolidationCase } from './replacement-cases.ts';

const CASES = Number(process.env.VENEER_CONSOLIDATION_ENVTEST_CASES ?? 50);
const SEED = Number(process.env.VENEER_CONSOLIDATION_ENVTEST_SEED ?? Date.now() % 1_000_000);
const VERSION = 'v1.14.3';
/** The apiserver's count of successful requests (its /metrics) of one verb on one resource, main resource only. */
async function requests(verb: string, resource: string): Promise<number> {
  const { body } = await cp.get('/metrics');
  let n = 0;
  for (const line of body.split('\n')) {
    if (!line.startsWith('apiserver_request_total{')) continue;
    const labels = line.slice(line.indexOf('{') + 1, line.lastIndexOf('}'));
    if (
      labels.includes(`verb="${verb}"`) &&
      labels.includes(`resource="${resource}"`) &&
      labels.includes('subresource=""') &&
      /code="2\d\d"/.test(labels)
    )
      n += Number(line.slice(line.lastIndexOf(' ') + 1));
  }
  return n;
}

/** Requests written ahead to the apiserver judge: it builds one world at a time, and prepares the next meanwhile. */
const IN_FLIGHT = 2;

const cp = await ControlPlane.start();
t.teardown(() => cp.stop());
await installAwsCRDs(cp);
const kubeconfig = cp.writeKubeConfig();

const fakeJudge = new KarpenterJudge(VERSION);
t.teardown(() => fakeJudge.close());
const apiJudge = new KarpenterJudge(VERSION, undefined, { kubeconfig });
t.teardown(() => apiJudge.close());

/**
 * Karpenter lists the pods that would not schedule from a Go map (Results.NonPendingPodSchedulingErrors,
 * five at most): their order, and which five, change from run to run in either store. Such a reason
 * is compared by how many pods it names.
 */
function podOrderFree(a: ConsolidateAnswer): ConsolidateAnswer {
  const reason = (text: string | undefined) => {
    const m = /^not all pods would schedule, (.*)$/is.exec(text ?? '');
    if (!m) return text;
    const others = Number(/ and (\d+) other\(s\)/.exec(m[1]!)?.[1] ?? 0);
    return `Not all pods would schedule: ${(m[1]!.match(/ => /g) ?? []).length + others} pod(s)`;
  };
  const command = (w: WorldCommand): WorldCommand => ({
    ...w,
    ...(w.reason !== undefined ? { reason: reason(w.reason)! } : {}),
  });
  return { ...a, commands: a.commands.map((c) => ({ with: command(c.with), without: command(c.without) })) };
}

t.test(
  `${CASES} generated clusters: Karpenter's consolidation answers the same over the fake client and over kube-apiserver and etcd`,
  async (t) => {
    t.comment(`seed ${SEED} (rerun with VENEER_CONSOLIDATION_ENVTEST_SEED=${SEED})`);
    const cases: ConsolidationCase[] = Array.from({ length: CASES }, (_, n) =>
      generateConsolidationCase(new Choices(SEED * 100_003 + n)),
    );
    // The fake client's answers first (seconds), then the apiserver's, timed alone.
    const fake = await Promise.all(cases.map((c) => fakeJudge.consolidate(c.request)));
    const createdBefore = await requests('POST', 'nodeclaims');
    const started = Date.now();
    const real: ConsolidateAnswer[] = [];
    const ahead: Promise<ConsolidateAnswer>[] = [];
    let asked = 0;
    for (let n = 0; n < CASES; n++) {
      while (asked < CASES && ahead.length < IN_FLIGHT) ahead.push(apiJudge.consolidate(cases[asked++]!.request));
      real.push(await ahead.shift()!);
    }
    const seconds = (Date.now() - started) / 1000;

    const stats = { commands: 0, replace: 0, delete: 0, none: 0, errors: 0, multi: 0, requestErrors: 0 };
    let disagreements = 0;
    for (const [n, c] of cases.entries()) {
      const f = fake[n]!;
      const r = real[n]!;
      if (f.error !== undefined) stats.requestErrors++;
      const same = t.same(podOrderFree(r), podOrderFree(f), `cluster ${n}: the same answer`);
      if (!same) {
        disagreements++;
        t.comment(
          `cluster ${n} (VENEER_CONSOLIDATION_ENVTEST_SEED=${SEED}) disagrees: ${JSON.stringify({ request: c.request, fake: f, apiserver: r })}`,
        );
      }
      for (const [i, set] of c.request.commands.entries()) {
        const w = f.commands[i];
        if (w === undefined) continue;
        for (const wc of [w.with, w.without]) {
          stats.commands++;
          if (set.length > 1) stats.multi++;
          if (wc.error) stats.errors++;
          stats[wc.decision]++;
        }
      }
    }
    const summary =
      `${CASES} clusters, ${stats.commands} world-commands compared (${stats.multi} of several nodes): ` +
      `replace ${stats.replace}, delete ${stats.delete}, none ${stats.none}, computeConsolidation errors ${stats.errors}, ` +
      `requests the judge could not run ${stats.requestErrors}; over the apiserver ${seconds.toFixed(1)} s, ` +
      `${(seconds / CASES).toFixed(2)} s per cluster; disagreements ${disagreements}`;
    t.comment(summary);
    console.error(`consolidation envtest cross-check: ${summary}, seed ${SEED}`);
    // The second judge really went through the apiserver: each world created every NodeClaim there,
    // and deleted them all again.
    const nodes = cases.reduce((sum, c) => sum + c.request.nodes.length, 0);
    t.equal(
      (await requests('POST', 'nodeclaims')) - createdBefore,
      2 * nodes,
      'each world created its NodeClaims in the apiserver',
    );
    const admin = cp.adminKubeConfig();
    t.equal((await admin.makeApiClient(k8s.CoreV1Api).listNode()).items.length, 0, 'no Node is left');
    t.equal(
      (await admin.makeApiClient(k8s.CoreV1Api).listNamespacedPod({ namespace: 'default' })).items.length,
      0,
      'no pod is left',
    );
    for (const plural of ['nodeclaims', 'nodepools']) {
      const list = (await admin
        .makeApiClient(k8s.CustomObjectsApi)
        .listClusterCustomObject({ group: 'karpenter.sh', version: 'v1', plural })) as { items: unknown[] };
      t.equal(list.items.length, 0, `no ${plural} are left`);
    }
    // A degenerate sample proves nothing.
    t.ok(stats.replace > 0, 'the sample has replacements');
    t.ok(stats.none + stats.delete > 0, 'the sample has commands that are not replacements');
    t.equal(stats.requestErrors, 0, 'every cluster ran');
  },
);

// Real Karpenter judges the overlays, not a stand-in, whichever its cloud provider (KWOK in
// test/karpenter/statuses.test.ts, AWS in test/aws/statuses.test.ts): Veneer's three kinds on the
// provider's keys, an equal-weight pair that conflicts, overlays Karpenter's runtime validation
// refuses and one that changes only capacity. The watcher (karpenterProvider auto) counts exactly the
// ones Karpenter validated, by the statuses Karpenter itself wrote, and `report` names each
// rejected overlay with Karpenter's reason. Karpenter's own NodeOverlay controller as the judge
// (test/judges/oracle) gets the same instance types, NodePools and overlays and must write the
// same verdicts, except where the cloud provider's registered label domains differ.
import { execFile } from 'node:child_process';
import { join } from 'node:path';
import { promisify } from 'node:util';
import type { Test } from 'tap';
import * as k8s from '@kubernetes/client-node';
import type { Report } from '../../src/engine/index.ts';
import type { RunningWatcher } from '../../src/commands/serve.ts';
import type { ControlPlane } from '../../kit/control-plane.ts';
import { OVERLAY_API, sleep, until } from '../../kit/fleet.ts';
import type { ProcessUsage } from '../../kit/karpenter-controller.ts';
import {
  computeSavingsPlan,
  ec2InstanceSavingsPlan,
  FAMILY_KEY,
  type OverlayProvider,
  reservedInstance,
  type VeneerOverlay,
} from '../../kit/veneer.ts';
import { type JudgeCase, KarpenterJudge, type JudgeVersion } from '../judges/karpenter-oracle.ts';

const cli = join(import.meta.dirname, '..', '..', 'src', 'cli.ts');

export interface StatusesEnv {
  cp: ControlPlane;
  admin: k8s.KubeConfig;
  watcher: RunningWatcher;
  karpenter: { usage(): { karpenter: ProcessUsage | undefined; scheduler: ProcessUsage | undefined } };
}

export interface StatusesTarget {
  provider: OverlayProvider;
  region: string;
  judgeVersion: JudgeVersion;
  /** What Karpenter was given, for these overlays, as the judge's case. */
  judgeCase(overlays: VeneerOverlay[]): JudgeCase;
  /** A key in the provider's own (restricted) label domain that it does not define. */
  restrictedKey: string;
  /**
   * Who refuses it: Karpenter's runtime validation (KWOK), or already the provider's NodeOverlay CRD
   * (AWS: its rule lists the karpenter.k8s.aws keys the provider defines), so Karpenter never sees it.
   */
  restrictedRefusedBy: 'karpenter' | 'crd';
  /** The judge registers the AWS provider's label domains: a KWOK key there is a custom one. */
  judgeAcceptsRestrictedKey: boolean;
}

export function overlayStatuses(t: Test, env: StatusesEnv, target: StatusesTarget): void {
  const { provider, region } = target;
  const started = Date.now();
  const custom = env.admin.makeApiClient(k8s.CustomObjectsApi);
  type Overlay = VeneerOverlay;
  const named = (o: Overlay, name: string, labels: Record<string, string> = {}): Overlay => ({
    ...o,
    metadata: { ...o.metadata, name, labels: { ...o.metadata.labels, ...labels } },
  });
  const veneer = { 'app.kubernetes.io/managed-by': 'veneer' };

  const RI = reservedInstance('m5.xlarge', region);
  const EC2_M5 = ec2InstanceSavingsPlan('m5', region, provider);
  const COMPUTE = computeSavingsPlan(provider);
  // The same EC2 Instance Savings Plan twice at weight 20 (two Veneer installs, or a copy): both price
  // c6i on-demand. Karpenter takes equal weights in reverse name order, so the name that sorts first loses.
  const EC2_C6I = ec2InstanceSavingsPlan('c6i', region, provider);
  const EC2_C6I_COPY = named(EC2_C6I, `${EC2_C6I.metadata.name}-copy`);
  // A preference on a key in the provider's own domain that the provider does not define (a
  // restricted domain: kwok/apis/v1alpha1's init for karpenter.kwok.sh, the AWS apis' for karpenter.k8s.aws).
  const RESTRICTED = named(
    {
      ...COMPUTE,
      spec: {
        ...COMPUTE.spec,
        weight: 15,
        requirements: [{ key: target.restrictedKey, operator: 'In', values: ['5'] }],
      },
    },
    'pref-default-1',
    { 'veneer.io/type': 'preference' },
  );
  // Veneer's own capacity-type word where Karpenter expects on-demand/spot/reserved.
  const BAD_CAPACITY_TYPE = named(
    {
      ...COMPUTE,
      spec: {
        ...COMPUTE.spec,
        weight: 15,
        requirements: [{ key: 'karpenter.sh/capacity-type', operator: 'In', values: ['reserved-instance'] }],
      },
    },
    'pref-default-2',
    { 'veneer.io/type': 'preference' },
  );
  const CAPACITY_ONLY: Overlay = {
    apiVersion: 'karpenter.sh/v1alpha1',
    kind: 'NodeOverlay',
    metadata: { name: 'license-slots', labels: veneer },
    spec: {
      weight: 5,
      requirements: [{ key: FAMILY_KEY[provider], operator: 'Exists' }],
      capacity: { 'example.com/license': '1' },
    },
  };
  const HOSTNAME = named(
    {
      ...COMPUTE,
      spec: {
        ...COMPUTE.spec,
        weight: 15,
        requirements: [{ key: 'kubernetes.io/hostname', operator: 'In', values: ['node-1'] }],
      },
    },
    'pref-default-3',
  );
  const byKarpenter = target.restrictedRefusedBy === 'karpenter';
  const created = [
    RI,
    EC2_M5,
    COMPUTE,
    EC2_C6I,
    EC2_C6I_COPY,
    ...(byKarpenter ? [RESTRICTED] : []),
    BAD_CAPACITY_TYPE,
    CAPACITY_ONLY,
  ];
  const refusedByValidation = byKarpenter ? [RESTRICTED, BAD_CAPACITY_TYPE] : [BAD_CAPACITY_TYPE];

  interface Condition {
    type: string;
    status: string;
    reason: string;
    message: string;
    observedGeneration?: number;
  }
  interface Stored {
    metadata: { name: string; generation: number };
    status?: { conditions?: Condition[] };
  }
  const overlays = async () => ((await custom.listClusterCustomObject(OVERLAY_API)) as { items: Stored[] }).items;
  const condition = (o: Stored | undefined, type: string) => o?.status?.conditions?.find((c) => c.type === type);
  const states = async () =>
    Object.fromEntries(
      [
        ...(await env.watcher.metrics.registry.metrics()).matchAll(
          /^veneer_nodewatcher_overlays\{state="(\w+)"\} (\d+)$/gm,
        ),
      ].map((m) => [m[1], Number(m[2])]),
    );
  const report = (args: string[]) =>
    promisify(execFile)(process.execPath, [cli, 'report', ...args], {
      env: { ...process.env, KUBECONFIG: env.cp.writeKubeConfig() },
    });

  t.test(
    `the NodeOverlay CRD of Karpenter ${target.judgeVersion} refuses kubernetes.io/hostname before Karpenter sees it`,
    async (t) => {
      const refused = await custom.createClusterCustomObject({ ...OVERLAY_API, body: HOSTNAME }).then(
        () => undefined,
        (e: { code?: number; body?: string }) => e,
      );
      t.equal(refused?.code, 422, 'the apiserver refuses it (the CRD rule), so it never gets a status');
      t.match(String(refused?.body), /label \\?"kubernetes.io\/hostname\\?" is restricted/);
      if (byKarpenter) return;
      const domain = target.restrictedKey.split('/')[0]!;
      const crd = await custom.createClusterCustomObject({ ...OVERLAY_API, body: RESTRICTED }).then(
        () => undefined,
        (e: { code?: number; body?: string }) => e,
      );
      t.equal(
        crd?.code,
        422,
        `${target.restrictedKey}: the provider's CRD refuses a key of its own domain that it does not define`,
      );
      t.match(String(crd?.body), `label domain \\"${domain}\\" is restricted`);
    },
  );

  t.test("Karpenter's own statuses: validated, Conflict, RuntimeValidation", async (t) => {
    const t0 = Date.now();
    for (const o of created) await custom.createClusterCustomObject({ ...OVERLAY_API, body: o });
    await until(
      'Karpenter judged every overlay',
      async () => {
        const all = await overlays();
        return (
          all.length === created.length &&
          all.every((o) => condition(o, 'ValidationSucceeded')?.observedGeneration === o.metadata.generation)
        );
      },
      30_000,
    );
    t.comment(`Karpenter wrote all ${created.length} statuses ${Date.now() - t0} ms after the first create`);
    const all = new Map((await overlays()).map((o) => [o.metadata.name, o]));
    const verdict = (name: string) => {
      const v = condition(all.get(name), 'ValidationSucceeded');
      const r = condition(all.get(name), 'Ready');
      return [v?.status, v?.reason, r?.status, r?.reason];
    };
    for (const o of [RI, EC2_M5, COMPUTE, EC2_C6I_COPY, CAPACITY_ONLY])
      t.same(
        verdict(o.metadata.name),
        ['True', 'ValidationSucceeded', 'True', 'Ready'],
        `${o.metadata.name}: validated`,
      );
    t.same(
      verdict(EC2_C6I.metadata.name),
      ['False', 'Conflict', 'False', 'UnhealthyDependents'],
      'the equal-weight name that sorts first: Conflict',
    );
    t.equal(condition(all.get(EC2_C6I.metadata.name), 'ValidationSucceeded')?.message, 'conflict with another overlay');
    for (const o of refusedByValidation)
      t.same(
        verdict(o.metadata.name),
        ['False', 'RuntimeValidation', 'False', 'UnhealthyDependents'],
        `${o.metadata.name}: RuntimeValidation`,
      );
    if (byKarpenter)
      t.match(
        condition(all.get(RESTRICTED.metadata.name), 'ValidationSucceeded')?.message,
        `using label ${target.restrictedKey} is not allowed`,
      );
    t.match(
      condition(all.get(BAD_CAPACITY_TYPE.metadata.name), 'ValidationSucceeded')?.message,
      /no valid values found in \[reserved-instance\] for karpenter\.sh\/capacity-type/,
    );

    // The judge: Karpenter's NodeOverlay controller over the same catalog, NodePools and overlays.
    const judge = new KarpenterJudge(target.judgeVersion);
    t.teardown(() => judge.close());
    const answer = await judge.judge(target.judgeCase(created));
    t.notOk(answer.error, answer.error ?? "the judge's Reconcile succeeded");
    for (const o of created) {
      const judged = answer.statuses[o.metadata.name]?.conditions.find((c) => c.type === 'ValidationSucceeded');
      const live = condition(all.get(o.metadata.name), 'ValidationSucceeded');
      if (o === RESTRICTED && target.judgeAcceptsRestrictedKey) {
        // The judge registers the AWS provider's label domains (its init), not KWOK's: there
        // karpenter.kwok.sh is a custom domain, and the overlay is valid. Which keys are restricted
        // depends on the provider Karpenter runs with.
        t.same(
          [judged?.status, judged?.reason],
          ['True', 'ValidationSucceeded'],
          `${o.metadata.name}: valid under the AWS provider's label domains`,
        );
        continue;
      }
      t.same(
        [judged?.status, judged?.reason, judged?.message],
        [live?.status, live?.reason, live?.message],
        `${o.metadata.name}: the judge writes what Karpenter wrote`,
      );
    }
  });

  t.test('the watcher counts what Karpenter validated, and report names each rejection with its reason', async (t) => {
    const want = {
      counted: 4,
      rejected_conflict: 1,
      rejected_validation: refusedByValidation.length,
      unvalidated: 0,
      capacity_only: 1,
      deleting: 0,
    };
    await until(
      'the gauge follows Karpenter',
      async () => JSON.stringify(await states()) === JSON.stringify(want),
      20_000,
    ).catch(() => undefined);
    t.same(await states(), want, 'veneer_nodewatcher_overlays{state}');
    const live = JSON.parse((await report(['-o', 'json'])).stdout) as Report;
    const row = (name: string) => live.overlays.find((o) => o.overlay === name);
    t.match(row(EC2_C6I.metadata.name), {
      verdict: 'rejected',
      note: 'rejected by Karpenter (ValidationSucceeded=False, Conflict)',
    });
    if (byKarpenter)
      t.match(row(RESTRICTED.metadata.name), {
        verdict: 'rejected',
        note: 'rejected by Karpenter (ValidationSucceeded=False, RuntimeValidation)',
      });
    t.match(row(BAD_CAPACITY_TYPE.metadata.name), {
      verdict: 'rejected',
      note: 'rejected by Karpenter (ValidationSucceeded=False, RuntimeValidation)',
    });
    t.match(row(EC2_C6I_COPY.metadata.name), { verdict: 'idle' }, 'the winner of the pair counts (no node yet)');
    t.equal(
      row(CAPACITY_ONLY.metadata.name),
      undefined,
      'capacity only: no row (it changes no price and no record names it)',
    );
    t.equal(live.totals.inactiveOverlays, 1, '...counted among the overlays that count for nothing');
    const table = (await report([])).stdout;
    t.match(
      table,
      new RegExp(
        `^${EC2_C6I.metadata.name}: rejected: rejected by Karpenter \\(ValidationSucceeded=False, Conflict\\)$`,
        'm',
      ),
    );
  });

  t.test('deleting the winner of the pair: Karpenter validates the other, and the watcher follows', async (t) => {
    const t0 = Date.now();
    await custom.deleteClusterCustomObject({ ...OVERLAY_API, name: EC2_C6I_COPY.metadata.name });
    await until(
      'Karpenter lifts the Conflict',
      async () =>
        condition(
          (await overlays()).find((o) => o.metadata.name === EC2_C6I.metadata.name),
          'ValidationSucceeded',
        )?.status === 'True',
      20_000,
    );
    const flipped = Date.now() - t0;
    await until('the gauge follows', async () => (await states()).rejected_conflict === 0, 20_000);
    t.same(await states(), {
      counted: 4,
      rejected_conflict: 0,
      rejected_validation: refusedByValidation.length,
      unvalidated: 0,
      capacity_only: 1,
      deleting: 0,
    });
    t.comment(
      `Conflict lifted ${flipped} ms after the delete; the watcher's gauge followed ${Date.now() - t0} ms after it`,
    );
    await sleep(0);
  });

  t.test('footprint', async (t) => {
    const u = env.karpenter.usage();
    t.ok(u.karpenter && u.scheduler, 'both still running');
    t.comment(
      `karpenter RSS ${u.karpenter?.rssMiB.toFixed(0)} MiB (peak ${u.karpenter?.peakRssMiB.toFixed(0)}), ${u.karpenter?.cpuSeconds.toFixed(1)} CPU-s; kube-scheduler RSS ${u.scheduler?.rssMiB.toFixed(0)} MiB, ${u.scheduler?.cpuSeconds.toFixed(1)} CPU-s; file wall time so far ${((Date.now() - started) / 1000).toFixed(1)} s`,
    );
  });
}

// The body of test/aws/disruption.test.ts, run in a network namespace with only loopback. Real
// Karpenter on AWS with disruption open (budgets 100%, WhenEmptyOrUnderutilized, consolidateAfter 5s)
// in two on-demand NodePools:
//
// - `steady`: one pod pinned to c6i.large, the cheapest type it can run on, so consolidation has
//   nothing to do. Nothing changes about its NodeClaim, and it must never be Drifted. Karpenter's
//   drift check (sigs.k8s.io/karpenter v1.14.3 nodeclaim/disruption/drift.go) runs on every
//   reconcile of a launched NodeClaim (each of its status writes, a change of its NodePool or
//   EC2NodeClass) and again every 5 minutes; the AWS part (aws/pkg/cloudprovider/drift.go) compares
//   the instance as DescribeInstances reports it (security groups, subnet) and its image with the
//   EC2NodeClass. Before the local EC2 gave instances their launch template's security group, every
//   NodeClaim was marked Drifted (SecurityGroupDrift) within a second of its launch and replaced on
//   the disruption controller's next 10 s pass. So the watch below, from the launch through both
//   consolidations (a minute or more, many drift evaluations and disruption passes), would see it;
//   the 5-minute requeue re-reads the same inputs.
// - `shrink`: one unpinned 500m pod in a pool that allows only c6i.xlarge. Then the pool also allows
//   c6i.large (half the price, no drift: requirements are outside the NodePool's hash and the node
//   still meets them), and Karpenter's single-node consolidation replaces the node: the candidate
//   NodeClaim gets DisruptionReason=Underutilized and its Node the karpenter.sh/disrupted taint, a
//   c6i.large NodeClaim is launched (Event DisruptionLaunching), and the candidate is drained and
//   deleted. The pod is evicted (a bare pod: nothing makes it again), so the replacement is empty,
//   and Karpenter deletes it too (DisruptionReason=Empty).
//
// Last, the positive control: a second security group added to the EC2NodeClass makes the steady
// NodeClaim Drifted with SecurityGroupDrift within seconds: the drift check does run, and compares
// what the local EC2 reports.
import t from 'tap';
import * as k8s from '@kubernetes/client-node';
import { CreateSecurityGroupCommand, EC2Client } from '@aws-sdk/client-ec2';
import {
  AWS_KARPENTER_VERSION,
  EC2_NODECLASS_API,
  OPEN_DISRUPTION,
  startAwsKarpenterEnv,
} from '../../../kit/aws/karpenter.ts';
import { NODECLAIM_API, NODEPOOL_API, podObject } from '../../../kit/karpenter-controller.ts';
import { assertInOwnNetworkNamespace } from '../../../kit/netns.ts';
import { sleep } from '../../../kit/process.ts';

assertInOwnNetworkNamespace();
t.setTimeout(300_000);
const started = Date.now();
const env = await startAwsKarpenterEnv({
  karpenter: {
    nodePools: [
      { name: 'steady', capacityTypes: ['on-demand'], disruption: OPEN_DISRUPTION },
      { name: 'shrink', capacityTypes: ['on-demand'], instanceTypes: ['c6i.xlarge'], disruption: OPEN_DISRUPTION },
    ],
  },
});
const { karpenter, admin } = env;
t.teardown(async () => {
  if (!t.passing()) console.error(`--- karpenter-aws's log ends:\n${karpenter.controller.logTail(80)}`);
  await env.cp.stop();
});
const custom = admin.makeApiClient(k8s.CustomObjectsApi);
const core = admin.makeApiClient(k8s.CoreV1Api);
const secs = (ms: number) => `${(ms / 1000).toFixed(1)} s`;
t.comment(
  `control plane, local EC2 and Karpenter ${AWS_KARPENTER_VERSION} up in ${secs(Date.now() - started)} (ms: ${JSON.stringify(karpenter.startup)})`,
);

interface Condition {
  type: string;
  status: string;
  reason?: string;
}
interface Claim {
  metadata: { name: string; labels?: Record<string, string>; deletionTimestamp?: string };
  status?: { conditions?: Condition[]; nodeName?: string };
}
/** Everything seen of one NodeClaim while the watch ran. */
interface Seen {
  pool: string;
  type: string;
  firstSeenAt: number;
  node?: string;
  deletingAt?: number;
  goneAt?: number;
  /** `type=status/reason` of every condition it ever had, with when it was first seen. */
  conditions: Map<string, number>;
}
const seen = new Map<string, Seen>();
/** Taint keys ever seen per Node. */
const taints = new Map<string, Set<string>>();
let watching = true;
/**
 * Polls NodeClaims and Nodes every 200 ms (a taint or condition that lasts seconds is not missed);
 * cheap: two lists of a handful of objects.
 */
const watch = (async () => {
  while (watching) {
    const now = Date.now();
    const claims = ((await custom.listClusterCustomObject(NODECLAIM_API)) as { items: Claim[] }).items;
    for (const c of claims) {
      const s: Seen = seen.get(c.metadata.name) ?? {
        pool: c.metadata.labels?.['karpenter.sh/nodepool'] ?? '',
        type: c.metadata.labels?.['node.kubernetes.io/instance-type'] ?? '',
        firstSeenAt: now,
        conditions: new Map(),
      };
      seen.set(c.metadata.name, s);
      s.type ||= c.metadata.labels?.['node.kubernetes.io/instance-type'] ?? '';
      s.node ??= c.status?.nodeName;
      if (c.metadata.deletionTimestamp) s.deletingAt ??= now;
      for (const k of c.status?.conditions ?? []) {
        const key = `${k.type}=${k.status}/${k.reason ?? ''}`;
        if (!s.conditions.has(key)) s.conditions.set(key, now);
      }
    }
    for (const [name, s] of seen) if (!claims.some((c) => c.metadata.name === name)) s.goneAt ??= now;
    for (const n of (await core.listNode()).items) {
      const set = taints.get(n.metadata!.name!) ?? new Set<string>();
      taints.set(n.metadata!.name!, set);
      for (const taint of n.spec?.taints ?? []) set.add(taint.key);
    }
    await sleep(200);
  }
})();
const until = async (what: string, cond: () => boolean, timeoutMs: number): Promise<number> => {
  const from = Date.now();
  while (!cond()) {
    if (Date.now() - from > timeoutMs) throw new Error(`${what}: not within ${timeoutMs} ms`);
    await sleep(100);
  }
  return Date.now() - from;
};
const claimsOf = (pool: string) => [...seen.entries()].filter(([, s]) => s.pool === pool);
const has = (s: Seen, condition: string) => [...s.conditions.keys()].some((k) => k.startsWith(condition));
const drifted = () =>
  [...seen.entries()]
    .filter(([, s]) => has(s, 'Drifted=True') || has(s, 'DisruptionReason=True/Drifted'))
    .map(([name, s]) => `${name}: ${[...s.conditions.keys()].join(', ')}`);

// A pod with no grace period: no kubelet runs here to confirm a pod's end, so an evicted pod with
// one would stay Terminating, and Karpenter's drain (and the candidate's deletion) would wait for it.
const pod = (p: Parameters<typeof podObject>[0]) => {
  const body = podObject(p, (type) => karpenter.vcpus.get(type)!);
  body.spec!.terminationGracePeriodSeconds = 0;
  return core.createNamespacedPod({ namespace: 'default', body });
};
await pod({ name: 'steady', instanceType: 'c6i.large', nodePool: 'steady' });
await pod({ name: 'shrink', nodePool: 'shrink', cpu: '500m' });
await karpenter.waitForNodes(2, { registered: true, timeoutMs: 90_000 });
const launchedAt = Date.now();
t.comment(`both nodes registered ${secs(launchedAt - started)} after the start`);

t.test('consolidation replaces a node when a cheaper type becomes possible (Underutilized)', async (t) => {
  const [[candidate, before]] = claimsOf('shrink') as [[string, Seen]];
  t.equal(before.type, 'c6i.xlarge', 'the only type the pool allowed');
  const np = (await custom.getClusterCustomObject({ ...NODEPOOL_API, name: 'shrink' })) as {
    spec: { template: { spec: { requirements: { key: string; values?: string[] }[] } } };
  };
  for (const r of np.spec.template.spec.requirements)
    if (r.key === 'node.kubernetes.io/instance-type') r.values = ['c6i.xlarge', 'c6i.large'];
  await custom.replaceClusterCustomObject({ ...NODEPOOL_API, name: 'shrink', body: np });
  const widenedAt = Date.now();
  await until(
    'the candidate deleted and a c6i.large launched',
    () => before.goneAt !== undefined && claimsOf('shrink').some(([, s]) => s.type === 'c6i.large'),
    120_000,
  );
  t.ok(has(before, 'Consolidatable=True'), 'the candidate was Consolidatable (consolidateAfter 5s)');
  t.ok(has(before, 'DisruptionReason=True/Underutilized'), 'the candidate: DisruptionReason=True, Underutilized');
  t.ok(taints.get(before.node!)?.has('karpenter.sh/disrupted'), "its Node: Karpenter's karpenter.sh/disrupted taint");
  const replacements = claimsOf('shrink').filter(([name]) => name !== candidate);
  t.same(
    replacements.map(([, s]) => s.type),
    ['c6i.large'],
    'one replacement, the cheaper type',
  );
  const [replacement] = replacements[0]!;
  const events = (await core.listNamespacedEvent({ namespace: 'default' })).items.filter(
    (e) => e.involvedObject.kind === 'NodeClaim',
  );
  const reasonsOn = (name: string) =>
    events.filter((e) => e.involvedObject.name === name).map((e) => `${e.reason}: ${e.message}`);
  const event = (name: string, pattern: RegExp, what: string) =>
    t.ok(
      reasonsOn(name).some((e) => pattern.test(e)),
      what,
      { events: reasonsOn(name) },
    );
  event(
    candidate,
    /^ConsolidationCandidate: .*replace: .*-> \[1 replacement\] \(savings: \$/,
    'the candidate: ConsolidationCandidate, replace, with the savings',
  );
  event(replacement, /^DisruptionLaunching: .*Underutilized/, 'the replacement: DisruptionLaunching (Underutilized)');
  event(candidate, /^DisruptionTerminating: .*Underutilized/, 'the candidate: DisruptionTerminating (Underutilized)');
  t.comment(
    `widened to c6i.large: candidate marked ${secs(before.conditions.get('DisruptionReason=True/Underutilized')! - widenedAt)} later, deleted after ${secs(before.goneAt! - widenedAt)}`,
  );
});

t.test('a node left empty is deleted (Empty)', async (t) => {
  // The pod was evicted from the candidate and nothing makes it again: the replacement is empty.
  const [[name, replacement]] = claimsOf('shrink').filter(([, s]) => s.type === 'c6i.large') as [[string, Seen]];
  const waited = await until('the empty replacement deleted', () => replacement.goneAt !== undefined, 120_000);
  t.ok(has(replacement, 'DisruptionReason=True/Empty'), `${name}: DisruptionReason=True, Empty`);
  t.ok(taints.get(replacement.node!)?.has('karpenter.sh/disrupted'), 'its Node: karpenter.sh/disrupted');
  t.equal(claimsOf('shrink').filter(([, s]) => s.goneAt === undefined).length, 0, 'no NodeClaim left in the pool');
  t.comment(`deleted ${secs(waited)} after the replacement test ended`);
});

t.test('with budgets open and nothing changed, no NodeClaim drifts', async (t) => {
  // At least a minute of watching: six or more of the disruption controller's 10 s passes.
  const minimum = 60_000;
  if (Date.now() - launchedAt < minimum) await sleep(minimum - (Date.now() - launchedAt));
  const [[name, steady]] = claimsOf('steady') as [[string, Seen]];
  t.same(drifted(), [], 'no Drifted condition and no drift disruption, on any NodeClaim');
  t.ok(
    has(steady, 'Consolidatable=True'),
    `${name}: Consolidatable, and not consolidated (the cheapest type its pod runs on)`,
  );
  t.equal(steady.goneAt ?? steady.deletingAt, undefined, `${name} still there`);
  t.equal(claimsOf('steady').length, 1, 'no other NodeClaim in its pool');
  t.notOk(taints.get(steady.node!)?.has('karpenter.sh/disrupted'), 'its Node never tainted karpenter.sh/disrupted');
  t.comment(`watched ${secs(Date.now() - launchedAt)} from the launch, ${seen.size} NodeClaims`);
});

t.test('drift still runs: a security group added to the EC2NodeClass drifts the instances that lack it', async (t) => {
  const [[name, steady]] = claimsOf('steady') as [[string, Seen]];
  const ec2 = new EC2Client(karpenter.moto.clientConfig());
  const { GroupId } = await ec2.send(
    new CreateSecurityGroupCommand({
      GroupName: 'extra',
      Description: 'a second group',
      VpcId: karpenter.moto.seed.vpcId,
    }),
  );
  ec2.destroy();
  const nc = (await custom.getClusterCustomObject({ ...EC2_NODECLASS_API, name: 'default' })) as {
    spec: { securityGroupSelectorTerms: object[] };
  };
  nc.spec.securityGroupSelectorTerms.push({ id: GroupId });
  await custom.replaceClusterCustomObject({ ...EC2_NODECLASS_API, name: 'default', body: nc });
  const waited = await until('the steady NodeClaim Drifted', () => has(steady, 'Drifted=True'), 60_000);
  t.ok(has(steady, 'Drifted=True/SecurityGroupDrift'), `${name}: Drifted=True, SecurityGroupDrift`);
  t.comment(`Drifted ${secs(waited)} after the EC2NodeClass named the second group`);
});

t.test('clean up', async () => {
  watching = false;
  await watch;
  t.comment(`the whole file: ${secs(Date.now() - started)}`);
});

// What the Karpenter benchmarks (KWOK and AWS) count in a burst of launches: each node's record
// from the watch history, against the overlay the judge says Karpenter applied, and where and how
// late it came.
import * as k8s from '@kubernetes/client-node';
import {
  COMPILED_CLI,
  counter,
  metricsOf,
  OVERLAY_API,
  sleep,
  spawnServe,
  until,
  waitReady,
  type ServeProcess,
} from '../kit/fleet.ts';
import { type History, type NodeVersion, storyOf } from '../kit/node-history.ts';
import type { OverlayObject } from '../src/engine/index.ts';
import { type ClusterEnv, registerWebhooksAt, WATCHER_USER } from '../kit/watcher-env.ts';

/**
 * The compiled watcher beside `env`'s Karpenter, with both webhooks, once Karpenter validated
 * `overlays` and the watcher counts them; `started` receives it as soon as it runs, so that a
 * caller's signal handler can kill it even if a later step fails.
 */
export async function watcherCountingOverlays(
  env: ClusterEnv,
  overlays: OverlayObject[],
  started: (serve: ServeProcess) => void,
): Promise<ServeProcess> {
  const serve = await spawnServe(
    env.cp,
    env.certs,
    WATCHER_USER,
    { '--leader-election-enabled': 'false', '--log-level': 'warn' },
    [],
    COMPILED_CLI,
  );
  started(serve);
  await waitReady(serve.healthPort, '/readyz', 60_000);
  await registerWebhooksAt(env.admin, { caPem: env.certs.caPem, port: serve.webhookPort });
  const custom = env.admin.makeApiClient(k8s.CustomObjectsApi);
  for (const o of overlays) await custom.createClusterCustomObject({ ...OVERLAY_API, body: o });
  await until(
    'Karpenter validated the overlays and the watcher counts them',
    async () =>
      counter(await metricsOf(serve.metricsPort), 'veneer_nodewatcher_overlays', { state: 'counted' }) ===
      overlays.length,
    60_000,
  );
  // Launch-time rules depend on the overlays not changing right before launches; creation
  // timestamps have whole seconds, so the launches come in a later second than the validations.
  await sleep(1100);
  return serve;
}

export const isRegistered = (v: NodeVersion) => v.labels['karpenter.sh/registered'] === 'true';

export interface BurstTally {
  nodes: number;
  onDemand: number;
  correct: number;
  byWebhook: number;
  byReconciler: number;
  missing: number;
  spotWithRecord: number;
  /** Records in the Node's CREATE (the rest came with Karpenter's registration update, or the reconciler's PATCH). */
  atCreate: number;
  /** Records decided with the node's NodeClaim rather than from the node alone. */
  withNodeClaim: number;
  /** On-demand nodes whose NodeClaim's providerID the bench's watch saw only after the Node. */
  claimLaunchedAfterNode: number;
  claimToRecord: number[];
  claimToNode: number[];
  /** From the Node's CREATE (its first version, seen on a watch) to its first version with the record: 0 when in the CREATE. */
  nodeToRecord: number[];
  /** From Karpenter's registration update to the record (0 when the record came before or with it). */
  registrationToRecord: number[];
  disagree: string[];
}

/**
 * `nodes`: name -> every version seen; `applied[i]`: the overlay Karpenter applied to nodes[i]'s
 * launch, as the judge says; `onDemand`: the on-demand nodes the burst asked for.
 */
export function tallyBurst(
  nodes: [string, NodeVersion[]][],
  applied: (string | null)[],
  history: History,
  onDemand: number,
): BurstTally {
  const r: BurstTally = {
    nodes: nodes.length,
    onDemand,
    correct: 0,
    byWebhook: 0,
    byReconciler: 0,
    missing: onDemand - nodes.filter(([, v]) => v.at(-1)!.labels['karpenter.sh/capacity-type'] === 'on-demand').length,
    spotWithRecord: 0,
    atCreate: 0,
    withNodeClaim: 0,
    claimLaunchedAfterNode: 0,
    claimToRecord: [],
    claimToNode: [],
    nodeToRecord: [],
    registrationToRecord: [],
    disagree: [],
  };
  for (const [i, [name, versions]] of nodes.entries()) {
    const last = versions.at(-1)!;
    const first = versions.find((v) => storyOf(v) !== undefined);
    if (last.labels['karpenter.sh/capacity-type'] === 'spot') {
      if (first || last.labels['veneer.io/overlay-influenced'] !== undefined) r.spotWithRecord++;
      continue;
    }
    if (!first) {
      r.missing++;
      continue;
    }
    const s = storyOf(first)!;
    if (s.decidedBy === 'webhook') r.byWebhook++;
    else r.byReconciler++;
    if (first === versions[0]) r.atCreate++;
    if (s.characteristicsFrom === 'node+nodeclaim') r.withNodeClaim++;
    r.nodeToRecord.push(first.seenAt - versions[0]!.seenAt);
    const expected = applied[i] ?? null;
    if (storyOf(last)?.overlay === expected) r.correct++;
    else
      r.disagree.push(
        `${name} (${last.labels['node.kubernetes.io/instance-type']}): Karpenter applied ${expected}, the record names ${storyOf(last)?.overlay}`,
      );
    const claim = history.claimOf(last);
    if (claim) {
      r.claimToRecord.push(first.seenAt - claim.seenAt);
      r.claimToNode.push(versions[0]!.seenAt - claim.seenAt);
      if ((claim.launchedAt ?? Infinity) > versions[0]!.seenAt) r.claimLaunchedAfterNode++;
    }
    const reg = versions.find(isRegistered);
    if (reg) r.registrationToRecord.push(Math.max(0, first.seenAt - reg.seenAt));
  }
  return r;
}

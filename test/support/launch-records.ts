// What every real-Karpenter launch test asks of the records, whatever the cloud provider: each
// on-demand node recorded exactly once and never changed after, no spot node recorded or written
// to, inline records in the CREATE (or in Karpenter's registration update), the reconciler's with one
// write; and where each record came from and how late. The inputs are the watch history of every
// node and NodeClaim (node-history.ts) and the audit log of the watcher's writes.
import { counter } from '../../kit/fleet.ts';
import { storyOf, type History, type NodeVersion } from '../../kit/node-history.ts';

export const RECORD_LABELS = [
  'veneer.io/overlay-influenced',
  'veneer.io/matching-overlay',
  'veneer.io/capacity-type',
  'veneer.io/instance-family',
  'veneer.io/instance-type',
  'veneer.io/region',
  'veneer.io/labeled-at',
];
const recordOf = (v: NodeVersion) =>
  JSON.stringify([RECORD_LABELS.map((k) => v.labels[k] ?? null), v.annotations['veneer.io/overlay-decision'] ?? null]);

/** Registered by Karpenter: its label, its owner reference and finalizer, the unregistered taint gone. */
export const registered = (v: NodeVersion | undefined) =>
  v !== undefined &&
  v.labels['karpenter.sh/registered'] === 'true' &&
  v.owners.some((o) => o.startsWith('NodeClaim/')) &&
  v.finalizers.includes('karpenter.sh/termination') &&
  !v.taints.includes('karpenter.sh/unregistered:NoExecute');

/**
 * The audit policy of a launch test: every request of the watcher, and the node requests of the
 * others named (Karpenter, the kubelet's stand-in), with the admission annotations the apiserver
 * adds (which webhook mutated which CREATE).
 */
export function launchAuditPolicy(watcher: string, others: string[]): string {
  return `apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived]
rules:
  - level: Metadata
    users: [${watcher}]
  - level: Metadata
    users: [${others.join(', ')}]
    resources: [{ group: "", resources: [nodes] }]
  - level: None
`;
}

export interface AuditEntry {
  verb: string;
  user: { username: string };
  objectRef?: { resource?: string; name?: string; subresource?: string };
  responseStatus?: { code?: number; message?: string };
  stage: string;
  annotations?: Record<string, string>;
}

/** Successful node writes (patch or update) by `user`, per node name. */
export function nodeWrites(audit: AuditEntry[], user: string): Map<string, number> {
  const writes = new Map<string, number>();
  for (const e of audit) {
    if (
      e.stage === 'ResponseComplete' &&
      e.user.username === user &&
      e.objectRef?.resource === 'nodes' &&
      (e.verb === 'patch' || e.verb === 'update') &&
      e.responseStatus?.code === 200
    ) {
      writes.set(e.objectRef.name ?? '', (writes.get(e.objectRef.name ?? '') ?? 0) + 1);
    }
  }
  return writes;
}

export interface RecordsFound {
  problems: string[];
  by: { webhook: number; reconciler: number };
  from: { node: number; 'node+nodeclaim': number };
  approximate: number;
  /** Records in a version before Karpenter's registration, and in the registration update itself. */
  recordedBeforeRegistration: number;
  recordedInRegistration: number;
  /** Records the webhook made in a later update than the CREATE and the registration (only where allowed). */
  recordedLater: number;
  latency: { claimToRecord: number[]; nodeToRecord: number[]; claimToNode: number[] };
  /** The launch time each record was decided for (its evaluatedAt) less the NodeClaim's creation. */
  evaluatedLate: number[];
}

/**
 * Checks the records of `nodes` (name -> every version the watch saw): `writes` are the watcher's
 * node writes (nodeWrites), `claimCreated` each NodeClaim's creationTimestamp in ms.
 */
export function checkRecords(
  nodes: [string, NodeVersion[]][],
  writes: Map<string, number>,
  history: History,
  claimCreated: Map<string, number>,
  opts: { webhookLaterIsProblem?: boolean } = {},
): RecordsFound {
  const found: RecordsFound = {
    problems: [],
    by: { webhook: 0, reconciler: 0 },
    from: { node: 0, 'node+nodeclaim': 0 },
    approximate: 0,
    recordedBeforeRegistration: 0,
    recordedInRegistration: 0,
    recordedLater: 0,
    latency: { claimToRecord: [], nodeToRecord: [], claimToNode: [] },
    evaluatedLate: [],
  };
  const { problems, latency } = found;
  for (const [name, versions] of nodes) {
    const last = versions.at(-1)!;
    const firstRecorded = versions.findIndex((v) => storyOf(v) !== undefined);
    if (last.labels['karpenter.sh/capacity-type'] === 'spot') {
      if (firstRecorded >= 0 || last.labels['veneer.io/overlay-influenced'] !== undefined)
        problems.push(`${name}: spot node with a record`);
      if (writes.has(name)) problems.push(`${name}: the watcher wrote to a spot node`);
      continue;
    }
    if (firstRecorded < 0) {
      problems.push(`${name}: no record`);
      continue;
    }
    const s = storyOf(versions[firstRecorded])!;
    found.by[s.decidedBy as 'webhook' | 'reconciler']++;
    found.from[s.characteristicsFrom]++;
    if (s.basis !== 'exact') found.approximate++;
    const changed = versions.slice(firstRecorded).filter((v) => recordOf(v) !== recordOf(versions[firstRecorded]!));
    if (changed.length > 0) problems.push(`${name}: the record changed in ${changed.length} later versions`);
    // Inline: the record is in the CREATE itself and the watcher never wrote; else one PATCH.
    const expectedWrites = s.decidedBy === 'webhook' ? 0 : 1;
    if ((writes.get(name) ?? 0) !== expectedWrites)
      problems.push(`${name}: decided by the ${s.decidedBy}, ${writes.get(name) ?? 0} watcher writes`);
    // Inline means in the Node's CREATE, or in Karpenter's registration update when the CREATE
    // could not be dated: the NodeClaim not yet linked, and the winning overlay changed in the
    // 15 minutes before the Node.
    const inRegistration =
      firstRecorded > 0 && registered(versions[firstRecorded]) && !registered(versions[firstRecorded - 1]);
    // Where the caller allows it (a loaded machine: the webhook's own deadline passed at CREATE, and
    // it allowed the CREATE without its patch), a later update's call records the node instead.
    if (s.decidedBy === 'webhook' && firstRecorded !== 0 && !inRegistration) {
      if (opts.webhookLaterIsProblem ?? true)
        problems.push(`${name}: decided by the webhook neither at CREATE nor in the registration update`);
      else found.recordedLater++;
    }
    if (inRegistration) found.recordedInRegistration++;
    else if (!registered(versions[firstRecorded]) && registered(last)) found.recordedBeforeRegistration++;
    const claim = history.claimOf(last);
    if (claim) {
      latency.claimToRecord.push(versions[firstRecorded]!.seenAt - claim.seenAt);
      latency.claimToNode.push(versions[0]!.seenAt - claim.seenAt);
    }
    latency.nodeToRecord.push(versions[firstRecorded]!.seenAt - versions[0]!.seenAt);
    const decidedAt = claim === undefined ? undefined : claimCreated.get(claim.name);
    if (decidedAt !== undefined) found.evaluatedLate.push(Date.parse(s.evaluatedAt) - decidedAt);
  }
  return found;
}

/**
 * Where the record on each named node (its last version) differs from the overlay the judge says
 * Karpenter applied to its launch, and a tally of type, capacity type and recorded overlay.
 */
export function againstJudge(
  history: History,
  names: string[],
  launches: { instanceType: string; offering: number }[],
  applied: (string | null)[],
): { disagree: string[]; perOverlay: string } {
  const disagree: string[] = [];
  const tally = new Map<string, number>();
  for (const [i, name] of names.entries()) {
    const last = history.nodes.get(name)?.at(-1);
    const recorded = storyOf(last)?.overlay ?? null;
    const key = `${launches[i]!.instanceType} ${last?.labels['karpenter.sh/capacity-type']} -> ${recorded ?? 'none'}`;
    tally.set(key, (tally.get(key) ?? 0) + 1);
    if (recorded !== (applied[i] ?? null))
      disagree.push(
        `${name} (${launches[i]!.instanceType}, offering ${launches[i]!.offering}): Karpenter applied ${applied[i] ?? null}, the record names ${recorded}`,
      );
  }
  return {
    disagree,
    perOverlay: [...tally.entries()]
      .sort()
      .map(([k, n]) => `${n} x ${k}`)
      .join('; '),
  };
}

/** `user`'s requests that the apiserver refused, but for conflicts and not-founds (both retried as a matter of course). */
export function refusedRequests(audit: AuditEntry[], user: string): string[] {
  return audit
    .filter(
      (e) =>
        e.stage === 'ResponseComplete' &&
        e.user.username === user &&
        (e.responseStatus?.code ?? 0) >= 400 &&
        e.responseStatus?.code !== 409 &&
        e.responseStatus?.code !== 404,
    )
    .map(
      (e) =>
        `${e.verb} ${e.objectRef?.resource}/${e.objectRef?.name}: ${e.responseStatus?.code} ${e.responseStatus?.message}`,
    );
}

/**
 * What the apiserver refused on the watcher's account, from its own metrics: the mutating
 * webhook's rejections (it never rejects) and the record guard's denials (its policy). Counted
 * from the apiserver's start: take them once the guard is registered (its readiness probe is a
 * denial, kit/watcher-env.ts) and compare with that.
 */
export function admissionVerdicts(apiserverMetrics: string): { rejections: number; guardDenials: number } {
  const rejections = counter(apiserverMetrics, 'apiserver_admission_webhook_rejection_count', {
    name: 'record.nodes.veneer.io',
  });
  const guardDenials = counter(apiserverMetrics, 'apiserver_validating_admission_policy_check_total', {
    policy: 'veneer-node-watcher',
    enforcement_action: 'deny',
  });
  return { rejections, guardDenials };
}

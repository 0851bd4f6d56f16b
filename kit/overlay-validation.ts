// A stand-in for one thing Karpenter's NodeOverlay controller does, until real Karpenter runs in
// these tests: it writes each overlay's status for every generation, ValidationSucceeded=True and
// Ready=True with observedGeneration, within moments of the change (Karpenter: within half a
// second). It judges nothing; a test that needs Conflict or RuntimeValidation writes that status
// itself, and an overlay with the annotation below is left without a status, as when Karpenter's
// NodeOverlay feature gate is off.
import pino from 'pino';
import type { ControlPlane } from './control-plane.ts';
import { clientFor } from './control-plane.ts';
import { createMetrics } from '../src/metrics.ts';
import { lister } from '../src/kube/list.ts';
import { Reflector } from '../src/kube/reflector.ts';

export const UNVALIDATED_ANNOTATION = 'veneer.test/karpenter-validation';
const PATH = '/apis/karpenter.sh/v1alpha1/nodeoverlays';

interface Seen {
  name: string;
  resourceVersion: string | undefined;
  generation: number;
  /** Ready's observedGeneration; -1 with no Ready condition. */
  judged: number;
  /** When Ready turned True, kept across generations as Karpenter's status library keeps it. */
  readySince: string | undefined;
  createdAt: string | undefined;
  skip: boolean;
}

function seen(obj: unknown): Seen {
  const o = obj as {
    metadata?: {
      name?: string;
      resourceVersion?: string;
      generation?: number;
      creationTimestamp?: string;
      annotations?: Record<string, string>;
    };
    status?: {
      conditions?: { type?: string; status?: string; observedGeneration?: number; lastTransitionTime?: string }[];
    };
  };
  const ready = o.status?.conditions?.find((c) => c.type === 'Ready');
  return {
    name: o.metadata?.name ?? '',
    resourceVersion: o.metadata?.resourceVersion,
    generation: o.metadata?.generation ?? 1,
    // A status written by a test without observedGeneration stands as it is.
    judged: ready === undefined ? -1 : (ready.observedGeneration ?? Number.POSITIVE_INFINITY),
    readySince: ready?.status === 'True' ? ready.lastTransitionTime : undefined,
    createdAt: o.metadata?.creationTimestamp,
    skip: o.metadata?.annotations?.[UNVALIDATED_ANNOTATION] === 'never',
  };
}

/** Validates every overlay of this control plane until it stops. */
export function validateOverlaysLikeKarpenter(cp: ControlPlane): void {
  const client = clientFor(cp.adminKubeConfig());
  const write = async (o: Seen) => {
    // A new overlay is validated in the second it was created (Karpenter takes well under one),
    // so that a test may launch right after creating it.
    const at =
      o.readySince ?? (o.judged < 0 && o.createdAt ? o.createdAt : new Date().toISOString().replace(/\.\d+Z$/, 'Z'));
    const condition = (type: string) => ({
      type,
      status: 'True',
      reason: type,
      message: '',
      observedGeneration: o.generation,
      lastTransitionTime: at,
    });
    await client
      .call('PATCH', `${PATH}/${o.name}/status`, {
        contentType: 'application/merge-patch+json',
        // Guarded by the version judged, as Karpenter's status patch is (MergeFromWithOptimisticLock):
        // a status written since (a test's Conflict, say) is never overwritten.
        body: {
          metadata: { resourceVersion: o.resourceVersion },
          status: { conditions: [condition('ValidationSucceeded'), condition('Ready')] },
        },
      })
      .catch(() => undefined); // changed since, gone, or the apiserver restarting: the next event judges again
  };
  const reflector = new Reflector<Seen>({
    resource: 'nodeoverlays',
    client,
    watchPath: PATH,
    listPage: lister(client, PATH),
    keyOf: (obj) => seen(obj).name,
    slim: seen,
    handlers: {
      upsert: (o) => {
        if (!o.skip && o.judged < o.generation) void write(o);
      },
      remove: () => {},
    },
    metrics: createMetrics(),
    log: pino({ level: 'silent' }),
    // A write lost to an apiserver restart is retried at the next list.
    relistIntervalMs: 5_000,
  });
  reflector.start();
  cp.onStop(async () => {
    await reflector.stop();
    await client.close();
  });
}

// Scenes the tests with real Karpenter share, as Karpenter's own pkg/test expectations do: each one
// a step a test would otherwise write out again.
import type * as k8s from '@kubernetes/client-node';
import { OVERLAY_API, sleep, until } from '../../kit/fleet.ts';

type OverlayList = { items: { status?: { conditions?: { type: string; status: string }[] } }[] };

/**
 * Creates the overlays and waits until Karpenter has judged every one (`condition` True, where
 * named) and the watcher counts them all (its `veneer_nodewatcher_overlays{state="counted"}`);
 * then lets the clock pass into a later second: creation timestamps have whole seconds, and a
 * launch must come after the validations to be priced with them.
 */
export async function expectOverlaysCounted(o: {
  custom: k8s.CustomObjectsApi;
  overlays: readonly object[];
  /** The watcher's /metrics, as text. */
  metrics: () => Promise<string>;
  /** The condition Karpenter sets on an overlay it validated: ValidationSucceeded, or Ready (which follows it). */
  condition?: 'ValidationSucceeded' | 'Ready';
  /** The watcher's count, where it is more than `overlays` (others were made before). */
  counted?: number;
}): Promise<void> {
  const { custom, overlays, condition } = o;
  for (const body of overlays) await custom.createClusterCustomObject({ ...OVERLAY_API, body });
  if (condition !== undefined)
    await until(
      `Karpenter judged every overlay (${condition})`,
      async () => {
        const { items } = (await custom.listClusterCustomObject(OVERLAY_API)) as OverlayList;
        return (
          items.length >= overlays.length &&
          items.every((i) => i.status?.conditions?.some((c) => c.type === condition && c.status === 'True'))
        );
      },
      30_000,
    );
  const counted = o.counted ?? overlays.length;
  await until(
    `the watcher counts ${counted} overlays`,
    async () =>
      new RegExp(`^veneer_nodewatcher_overlays\\{state="counted"\\} ${counted}$`, 'm').test(await o.metrics()),
    condition === undefined ? 30_000 : 20_000,
  );
  await sleep(1100);
}

// The node maker's writes to a Node: the kubelet's registration, status and heartbeats, and what the
// node lifecycle and cloud controllers would do to it.
import * as k8s from '@kubernetes/client-node';
import { heartbeatPatch } from '../../real-node.ts';
import type { Resources } from './instances.ts';
import { readyStatus, type Taint, unknownStatus, withoutControllerTaints } from './kubelet-node.ts';
import { codeOf } from './tasks.ts';

const strategicMerge = k8s.setHeaderOptions('Content-Type', k8s.PatchStrategy.StrategicMergePatch);
const mergePatch = k8s.setHeaderOptions('Content-Type', k8s.PatchStrategy.MergePatch);

/** Runs a call again while its failure is transient. */
export type Retry = <T>(call: () => Promise<T>) => Promise<T>;

export class NodeApi {
  private readonly core: k8s.CoreV1Api;
  /** Taint removals that met a newer Node (Karpenter's registration edits the same list) and were retried. */
  taintConflicts = 0;
  nodesDeleted = 0;

  constructor(kc: k8s.KubeConfig) {
    this.core = kc.makeApiClient(k8s.CoreV1Api);
  }

  /**
   * The kubelet's registration. AlreadyExists (a kubelet restarting, or a CREATE retried after a
   * timeout that the apiserver carried out) carries on with the Node there is, as a kubelet does.
   */
  async register(
    body: k8s.V1Node,
    retry: Retry,
    onAttempt: () => void,
  ): Promise<{ node: k8s.V1Node; alreadyExisted: boolean }> {
    try {
      return {
        node: await retry(() => {
          onAttempt();
          return this.core.createNode({ body });
        }),
        alreadyExisted: false,
      };
    } catch (err) {
      if (codeOf(err) !== 409) throw err;
      return { node: await retry(() => this.core.readNode({ name: body.metadata!.name! })), alreadyExisted: true };
    }
  }

  /** Ready=True with capacity and allocatable, then the controllers' taints off; the taints removed. */
  async reportReady(name: string, resources: Resources, retry: Retry): Promise<string[] | undefined> {
    const node = await retry(() => this.core.patchNodeStatus({ name, body: readyStatus(resources) }, strategicMerge));
    return this.removeControllerTaints(name, node, retry);
  }

  /** What the node lifecycle controller and the cloud controller remove once the Node is Ready; guarded by resourceVersion, as Karpenter edits the same list. */
  private async removeControllerTaints(name: string, seen: k8s.V1Node, retry: Retry): Promise<string[] | undefined> {
    for (let attempt = 0; ; attempt++) {
      // First the Node as the status write answered it, then as read after a conflict.
      const node = attempt === 0 ? seen : await retry(() => this.core.readNode({ name }));
      const { keep, removed } = withoutControllerTaints((node.spec?.taints ?? []) as Taint[]);
      if (removed.length === 0) return undefined;
      try {
        const body = {
          metadata: { resourceVersion: node.metadata?.resourceVersion },
          spec: { taints: keep.length ? keep : null },
        };
        await retry(() => this.core.patchNode({ name, body }, mergePatch));
        return removed.map((x) => `${x.key}:${x.effect}`);
      } catch (err) {
        if (codeOf(err) !== 409 || attempt >= 10) throw err;
        this.taintConflicts++;
      }
    }
  }

  async heartbeat(name: string): Promise<void> {
    await this.core.patchNodeStatus({ name, body: heartbeatPatch() }, strategicMerge);
  }

  /** The conditions the node lifecycle controller writes when the kubelet stopped posting status. */
  async reportUnknown(name: string): Promise<void> {
    await this.core.patchNodeStatus({ name, body: unknownStatus() }, strategicMerge).catch((err) => {
      if (codeOf(err) !== 404) throw err;
    });
  }

  /** The cloud controller's deletion of a Node whose instance is gone, unless it is another instance's or being deleted. */
  async removeIfOurs(name: string, providerID: string): Promise<void> {
    try {
      const node = await this.core.readNode({ name });
      if (node.spec?.providerID !== providerID || node.metadata?.deletionTimestamp) return;
      await this.reportUnknown(name);
      await this.core.deleteNode({ name });
      this.nodesDeleted++;
    } catch (err) {
      if (codeOf(err) !== 404) throw err;
    }
  }
}

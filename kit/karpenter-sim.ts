// Does to the apiserver what Karpenter and the kubelet do when a node launches: a NodeClaim,
// the kubelet's CREATE with partial labels, then the registration update with every label.
import * as k8s from '@kubernetes/client-node';
import { karpenterNode, nodeClaimFor, type NodeShape } from './veneer.ts';

export const mergePatch = k8s.setHeaderOptions('Content-Type', k8s.PatchStrategy.MergePatch);

export class KarpenterSim {
  readonly core: k8s.CoreV1Api;
  readonly custom: k8s.CustomObjectsApi;
  /** Each NodeClaim's uid, for the Node's ownerReference: kube-controller-manager's garbage collector deletes a Node whose owner's uid is not its NodeClaim's. */
  private readonly claimUids = new Map<string, string>();

  constructor(kc: k8s.KubeConfig) {
    this.core = kc.makeApiClient(k8s.CoreV1Api);
    this.custom = kc.makeApiClient(k8s.CustomObjectsApi);
  }

  /** `requirements`: the scheduler's (candidates, capacity types, zones), where a test replays the launch; else the capacity type alone. */
  async createNodeClaim(
    shape: NodeShape & { claimName: string; requirements?: k8s.V1NodeSelectorRequirement[] },
  ): Promise<void> {
    const claim = nodeClaimFor(shape);
    const created = (await this.custom.createClusterCustomObject({
      group: 'karpenter.sh',
      version: 'v1',
      plural: 'nodeclaims',
      body: {
        ...claim,
        spec: {
          nodeClassRef: { group: 'karpenter.k8s.aws', kind: 'EC2NodeClass', name: 'default' },
          requirements: shape.requirements ?? [
            { key: 'karpenter.sh/capacity-type', operator: 'In', values: [shape.capacityType ?? 'on-demand'] },
          ],
        },
      },
    })) as { metadata: { uid: string } };
    this.claimUids.set(shape.claimName, created.metadata.uid);
    await this.custom.patchClusterCustomObjectStatus(
      {
        group: 'karpenter.sh',
        version: 'v1',
        plural: 'nodeclaims',
        name: shape.claimName,
        body: { status: claim.status },
      },
      mergePatch,
    );
  }

  /** The kubelet's registration: nodepool, capacity type and kubelet defaults only. */
  async kubeletCreate(shape: NodeShape): Promise<k8s.V1Node> {
    return this.core.createNode({ body: karpenterNode({ ...shape, stage: 'kubelet' }) as k8s.V1Node });
  }

  /** Karpenter's registration: every NodeClaim label, the ownerReference, registered=true. */
  async register(shape: NodeShape & { claimName?: string }): Promise<k8s.V1Node> {
    const full = karpenterNode({ ...shape, stage: 'registered' });
    const uid = shape.claimName ? await this.claimUid(shape.claimName) : undefined;
    return this.core.patchNode(
      {
        name: shape.name,
        body: {
          metadata: {
            labels: full.metadata?.labels,
            ...(shape.claimName
              ? {
                  ownerReferences: [
                    {
                      apiVersion: 'karpenter.sh/v1',
                      kind: 'NodeClaim',
                      name: shape.claimName,
                      uid,
                      blockOwnerDeletion: true,
                    },
                  ],
                }
              : {}),
          },
        },
      },
      mergePatch,
    );
  }

  private async claimUid(name: string): Promise<string> {
    const known = this.claimUids.get(name);
    if (known) return known;
    const claim = (await this.custom.getClusterCustomObject({
      group: 'karpenter.sh',
      version: 'v1',
      plural: 'nodeclaims',
      name,
    })) as { metadata: { uid: string } };
    this.claimUids.set(name, claim.metadata.uid);
    return claim.metadata.uid;
  }

  /**
   * The launch, retried step by step until it succeeds (as Karpenter and the kubelet retry),
   * for faults such as an apiserver restart; each step tolerates having succeeded before.
   */
  async launchPersistently(shape: NodeShape & { claimName: string }, deadlineMs = 60_000): Promise<void> {
    const deadline = Date.now() + deadlineMs;
    const step = async (fn: () => Promise<unknown>) => {
      for (;;) {
        try {
          await fn();
          return;
        } catch (err) {
          if ((err as { code?: number }).code === 409) return;
          if (Date.now() > deadline) throw err;
          await new Promise((r) => setTimeout(r, 500));
        }
      }
    };
    await step(() => this.createNodeClaim(shape));
    await step(() => this.kubeletCreate(shape));
    await step(() => this.register(shape));
  }

  /** The whole launch, as Karpenter does it. */
  async launch(
    shape: NodeShape & { claimName?: string; requirements?: k8s.V1NodeSelectorRequirement[] },
  ): Promise<{ created: k8s.V1Node; registered: k8s.V1Node }> {
    if (shape.claimName) await this.createNodeClaim({ ...shape, claimName: shape.claimName });
    const created = await this.kubeletCreate(shape);
    const registered = await this.register(shape);
    return { created, registered };
  }
}

// Installs Karpenter's NodeOverlay, NodePool and NodeClaim CRDs (copies in kit/crds), waits until
// the apiserver serves them, creates the NodePool the kit's nodes launch into, and marks every
// overlay validated as Karpenter would (kit/overlay-validation.ts).
import { readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import * as k8s from '@kubernetes/client-node';
import type { ControlPlane } from './control-plane.ts';
import { validateOverlaysLikeKarpenter } from './overlay-validation.ts';

const crdDir = join(dirname(fileURLToPath(import.meta.url)), 'crds');
export const crdFiles = [
  'karpenter.sh_nodeoverlays.yaml',
  'karpenter.sh_nodepools.yaml',
  'karpenter.sh_nodeclaims.yaml',
].map((f) => join(crdDir, f));

/** The NodePool `karpenterNode` (kit/veneer.ts) launches into: no template labels, on-demand and spot. */
export function nodePool(name = 'default', labels: Record<string, string> = {}) {
  return {
    apiVersion: 'karpenter.sh/v1',
    kind: 'NodePool',
    metadata: { name },
    spec: {
      template: {
        metadata: { labels },
        spec: {
          nodeClassRef: { group: 'karpenter.k8s.aws', kind: 'EC2NodeClass', name: 'default' },
          requirements: [{ key: 'karpenter.sh/capacity-type', operator: 'In', values: ['on-demand', 'spot'] }],
        },
      },
    },
  };
}

/** Until each CRD is Established, its resources are not served. */
export async function waitEstablished(api: k8s.ApiextensionsV1Api, names: string[], deadline: number): Promise<void> {
  for (const name of names) {
    for (;;) {
      const crd = await api.readCustomResourceDefinition({ name });
      if (crd.status?.conditions?.some((c) => c.type === 'Established' && c.status === 'True')) break;
      if (Date.now() > deadline) throw new Error(`CRD ${name} not Established in time`);
      await new Promise((r) => setTimeout(r, 100));
    }
  }
}

/** Creates the CRDs in `files` and waits until the apiserver serves each of their resources. */
export async function installCRDFiles(cp: ControlPlane, files: string[], timeoutMs = 30_000): Promise<void> {
  const kc = cp.adminKubeConfig();
  const api = kc.makeApiClient(k8s.ApiextensionsV1Api);
  const crds: k8s.V1CustomResourceDefinition[] = [];
  for (const file of files) {
    // loadYaml maps `x-kubernetes-validations` to the client's camelCase field; a plain parse
    // would have the typed client drop every CEL rule without a word.
    const crd = k8s.loadYaml<k8s.V1CustomResourceDefinition>(readFileSync(file, 'utf8'));
    crds.push(crd);
    await api.createCustomResourceDefinition({ body: crd });
  }
  const deadline = Date.now() + timeoutMs;
  await waitEstablished(
    api,
    crds.map((crd) => crd.metadata?.name ?? ''),
    deadline,
  );
  // Established is not the end: the watch cache of a new resource answers 429 until it has
  // initialised, so wait until a watch opens.
  for (const crd of crds) {
    const version = crd.spec.versions.find((v) => v.storage)?.name;
    const path = `/apis/${crd.spec.group}/${version}/${crd.spec.names.plural}`;
    for (;;) {
      const opened = await new k8s.Watch(kc)
        .watch(
          path,
          { timeoutSeconds: 1 },
          () => {},
          () => {},
        )
        .then(
          (req) => {
            req.abort();
            return true;
          },
          (err: { statusCode?: number }) => {
            if (err.statusCode !== 429) throw err;
            return false;
          },
        );
      if (opened) break;
      if (Date.now() > deadline) throw new Error(`watch on ${path} still refused after ${timeoutMs} ms`);
      await new Promise((r) => setTimeout(r, 100));
    }
  }
}

export async function installKarpenterCRDs(cp: ControlPlane, timeoutMs = 30_000): Promise<void> {
  await installCRDFiles(cp, crdFiles, timeoutMs);
  await cp
    .adminKubeConfig()
    .makeApiClient(k8s.CustomObjectsApi)
    .createClusterCustomObject({ group: 'karpenter.sh', version: 'v1', plural: 'nodepools', body: nodePool() });
  validateOverlaysLikeKarpenter(cp);
}

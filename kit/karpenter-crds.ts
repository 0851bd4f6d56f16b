// Installs Karpenter's NodeOverlay and NodeClaim CRDs (copies in kit/crds) and waits until the
// apiserver serves them.
import { readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import * as k8s from '@kubernetes/client-node';

const crdDir = join(dirname(fileURLToPath(import.meta.url)), 'crds');
export const crdFiles = ['karpenter.sh_nodeoverlays.yaml', 'karpenter.sh_nodeclaims.yaml'].map((f) => join(crdDir, f));

const resources = ['/apis/karpenter.sh/v1alpha1/nodeoverlays', '/apis/karpenter.sh/v1/nodeclaims'];

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

export async function installKarpenterCRDs(kc: k8s.KubeConfig, timeoutMs = 30_000): Promise<void> {
  const api = kc.makeApiClient(k8s.ApiextensionsV1Api);
  const names: string[] = [];
  for (const file of crdFiles) {
    // loadYaml maps `x-kubernetes-validations` to the client's camelCase field; a plain parse
    // would have the typed client drop every CEL rule without a word.
    const crd = k8s.loadYaml<k8s.V1CustomResourceDefinition>(readFileSync(file, 'utf8'));
    names.push(crd.metadata?.name ?? '');
    await api.createCustomResourceDefinition({ body: crd });
  }
  const deadline = Date.now() + timeoutMs;
  await waitEstablished(api, names, deadline);
  // Established is not the end: the watch cache of a new resource answers 429 until it has
  // initialised, so wait until a watch opens.
  for (const path of resources) {
    for (;;) {
      const opened = await new k8s.Watch(kc).watch(path, { timeoutSeconds: 1 }, () => {}, () => {}).then(
        (req) => (req.abort(), true),
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

// cert-manager for the local control plane: its own controllers and cainjector (kit/cert-manager,
// built by scripts/control-plane.sh), with the CRDs of the module version they were built from.
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import * as k8s from '@kubernetes/client-node';
import { binary, type ControlPlane } from './control-plane.ts';
import { waitEstablished } from './karpenter-crds.ts';
import { ManagedProcess } from './process.ts';
import { until } from './fleet.ts';

export const CERTIFICATES = { group: 'cert-manager.io', version: 'v1', plural: 'certificates' };

export interface Condition {
  type: string;
  status: string;
  reason?: string;
  message?: string;
  lastTransitionTime?: string;
}

interface CertificateObject {
  metadata: { name: string; namespace: string };
  status?: { conditions?: Condition[]; revision?: number };
}

export async function installCertManagerCRDs(kc: k8s.KubeConfig): Promise<void> {
  const dir = binary('certManagerCrds');
  const api = kc.makeApiClient(k8s.ApiextensionsV1Api);
  const names: string[] = [];
  for (const file of readdirSync(dir)
    .filter((f) => f.endsWith('.yaml'))
    .sort()) {
    const crd = k8s.loadYaml<k8s.V1CustomResourceDefinition>(readFileSync(join(dir, file), 'utf8'));
    await api.createCustomResourceDefinition({ body: crd });
    names.push(crd.metadata?.name ?? '');
  }
  await waitEstablished(api, names, Date.now() + 30_000);
}

/** Installs the CRDs and starts cert-manager as admin; stop it before the control plane. */
export async function startCertManager(cp: ControlPlane): Promise<ManagedProcess> {
  await installCertManagerCRDs(cp.adminKubeConfig());
  const kubeconfig = cp.writeKubeConfig(cp.adminKubeConfig(), 'kubeconfig-cert-manager');
  const proc = new ManagedProcess(
    'cert-manager',
    binary('certManager'),
    ['--kubeconfig', kubeconfig],
    join(cp.dir, 'cert-manager.log'),
  );
  proc.start();
  // kit/cert-manager logs this once every controller and cainjector have started.
  await until(
    'cert-manager started',
    () => {
      if (!proc.running) throw new Error(`cert-manager exited:\n${proc.logTail()}`);
      return proc.logTail(500).includes('cert-manager running');
    },
    30_000,
  );
  return proc;
}

export async function readCertificate(kc: k8s.KubeConfig, namespace: string, name: string): Promise<CertificateObject> {
  return (await kc
    .makeApiClient(k8s.CustomObjectsApi)
    .getNamespacedCustomObject({ ...CERTIFICATES, namespace, name })) as CertificateObject;
}

export function condition(cert: CertificateObject, type: string): Condition | undefined {
  return cert.status?.conditions?.find((c) => c.type === type);
}

/**
 * Asks cert-manager to issue the Certificate again, as `cmctl renew` does: the Issuing
 * condition set to True with reason ManuallyTriggered, on the status subresource.
 */
export async function renewCertificate(kc: k8s.KubeConfig, namespace: string, name: string): Promise<void> {
  const cert = await readCertificate(kc, namespace, name);
  const issuing: Condition = {
    type: 'Issuing',
    status: 'True',
    reason: 'ManuallyTriggered',
    message: 'Certificate re-issuance manually triggered',
    lastTransitionTime: new Date().toISOString().replace(/\.\d+Z$/, 'Z'),
  };
  const conditions = [...(cert.status?.conditions ?? []).filter((c) => c.type !== 'Issuing'), issuing];
  await kc.makeApiClient(k8s.CustomObjectsApi).replaceNamespacedCustomObjectStatus({
    ...CERTIFICATES,
    namespace,
    name,
    body: { ...cert, status: { ...cert.status, conditions } },
  });
}

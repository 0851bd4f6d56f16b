// CRDs of projects the chart integrates with (cert-manager, Prometheus operator), read from
// their published Go modules, so that the real apiserver can check the chart's objects.
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import * as k8s from '@kubernetes/client-node';
import { installCertManagerCRDs } from '../../kit/cert-manager.ts';
import { waitEstablished } from '../../kit/karpenter-crds.ts';

const PROMETHEUS_OPERATOR = {
  module: 'github.com/prometheus-operator/prometheus-operator@v0.82.2',
  files: [
    'example/prometheus-operator-crd/monitoring.coreos.com_servicemonitors.yaml',
    'example/prometheus-operator-crd/monitoring.coreos.com_prometheusrules.yaml',
  ],
};

function moduleDir(module: string): string {
  const out = execFileSync('go', ['mod', 'download', '-json', module], {
    encoding: 'utf8',
    env: { ...process.env, GOFLAGS: '-mod=mod' },
    cwd: '/',
  });
  return (JSON.parse(out) as { Dir: string }).Dir;
}

export async function installExternalCRDs(kc: k8s.KubeConfig): Promise<void> {
  await installCertManagerCRDs(kc);
  const api = kc.makeApiClient(k8s.ApiextensionsV1Api);
  const names: string[] = [];
  const dir = moduleDir(PROMETHEUS_OPERATOR.module);
  for (const file of PROMETHEUS_OPERATOR.files) {
    const crd = k8s.loadYaml<k8s.V1CustomResourceDefinition>(readFileSync(join(dir, file), 'utf8'));
    await api.createCustomResourceDefinition({ body: crd });
    names.push(crd.metadata?.name ?? '');
  }
  await waitEstablished(api, names, Date.now() + 30_000);
}

// The webhook configurations the apiserver needs, as the chart renders them; the tests and
// the demo register these against a real apiserver.
import type * as k8s from '@kubernetes/client-node';
import { recordKeys } from '../src/engine/index.ts';

export interface RegistrationOptions {
  name: string;
  caBundle: string;
  /** Either a URL (local runs) or a Service (in-cluster). */
  url?: string;
  service?: { namespace: string; name: string; port: number };
  labelNamespace: string;
  timeoutSeconds: number;
}

function clientConfig(o: RegistrationOptions, path: string): k8s.AdmissionregistrationV1WebhookClientConfig {
  const caBundle = Buffer.from(o.caBundle).toString('base64');
  if (o.url) return { url: `${o.url}${path}`, caBundle };
  if (!o.service) throw new Error('a webhook needs a url or a service');
  return { service: { ...o.service, path }, caBundle };
}

const nodeRules = (operations: string[]): k8s.V1RuleWithOperations[] => [
  { apiGroups: [''], apiVersions: ['v1'], resources: ['nodes'], operations, scope: 'Cluster' },
];

/** Only on-demand Karpenter nodes without a record reach the mutating webhook. */
export function mutatingMatchConditions(labelNamespace: string): k8s.V1MatchCondition[] {
  const keys = recordKeys(labelNamespace);
  return [
    { name: 'karpenter-node', expression: "has(object.metadata.labels) && 'karpenter.sh/nodepool' in object.metadata.labels" },
    { name: 'on-demand', expression: "!('karpenter.sh/capacity-type' in object.metadata.labels) || object.metadata.labels['karpenter.sh/capacity-type'] == 'on-demand'" },
    { name: 'no-record-yet', expression: `!('${keys.influenced}' in object.metadata.labels)` },
  ];
}

/**
 * Only updates that alter or remove a record reach the validating webhook: the condition is the
 * webhook's own test, so Karpenter's and the kubelet's routine updates never wait on it (an
 * apiserver that retries a conflicting PATCH would otherwise call it on every retry).
 */
export function validatingMatchConditions(labelNamespace: string): k8s.V1MatchCondition[] {
  const keys = recordKeys(labelNamespace);
  const altered = (field: 'labels' | 'annotations', owned: readonly string[]) => {
    const [before, after] = [`oldObject.metadata.${field}`, `object.metadata.${field}`];
    return `[${owned.map((k) => `'${k}'`).join(', ')}].exists(k, has(${before}) && k in ${before} && !(has(${after}) && k in ${after} && ${after}[k] == ${before}[k]))`;
  };
  return [{ name: 'record-altered', expression: `${altered('labels', keys.ownedLabels)} || ${altered('annotations', keys.ownedAnnotations)}` }];
}

export function mutatingWebhookConfiguration(o: RegistrationOptions): k8s.V1MutatingWebhookConfiguration {
  return {
    apiVersion: 'admissionregistration.k8s.io/v1',
    kind: 'MutatingWebhookConfiguration',
    metadata: { name: o.name },
    webhooks: [{
      name: 'record.nodes.veneer.io',
      admissionReviewVersions: ['v1'],
      clientConfig: clientConfig(o, '/mutate-node'),
      rules: nodeRules(['CREATE', 'UPDATE']),
      failurePolicy: 'Ignore',
      sideEffects: 'None',
      timeoutSeconds: o.timeoutSeconds,
      reinvocationPolicy: 'IfNeeded',
      matchPolicy: 'Equivalent',
      matchConditions: mutatingMatchConditions(o.labelNamespace),
    }],
  };
}

export function validatingWebhookConfiguration(o: RegistrationOptions): k8s.V1ValidatingWebhookConfiguration {
  return {
    apiVersion: 'admissionregistration.k8s.io/v1',
    kind: 'ValidatingWebhookConfiguration',
    metadata: { name: o.name },
    webhooks: [{
      name: 'protect-record.nodes.veneer.io',
      admissionReviewVersions: ['v1'],
      clientConfig: clientConfig(o, '/validate-node'),
      rules: nodeRules(['UPDATE']),
      failurePolicy: 'Ignore',
      sideEffects: 'None',
      timeoutSeconds: o.timeoutSeconds,
      matchPolicy: 'Equivalent',
      matchConditions: validatingMatchConditions(o.labelNamespace),
    }],
  };
}

// The admission objects the apiserver needs, as the chart renders them: the mutating webhook that
// writes the record and the policy that guards it. The tests and the demo register these against a
// real apiserver.
import type * as k8s from '@kubernetes/client-node';
import { recordKeys } from '../src/engine/index.ts';
import { type GuardIdentities, recordGuard } from '../src/engine/guard.ts';
import { mutatingMatchConditions as scopeConditions } from '../src/engine/scope.ts';

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

/** The nodes the mutating webhook is called for: the engine's scope, on the node's own labels. */
export function mutatingMatchConditions(labelNamespace: string): k8s.V1MatchCondition[] {
  return scopeConditions(recordKeys(labelNamespace));
}

export function mutatingWebhookConfiguration(o: RegistrationOptions): k8s.V1MutatingWebhookConfiguration {
  return {
    apiVersion: 'admissionregistration.k8s.io/v1',
    kind: 'MutatingWebhookConfiguration',
    metadata: { name: o.name },
    webhooks: [
      {
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
      },
    ],
  };
}

/** The record's guard (src/engine/guard.ts): no one but `who` adds, alters or removes a record, on a node or its status. */
export function recordGuardPolicy(
  name: string,
  labelNamespace: string,
  who: GuardIdentities,
): k8s.V1ValidatingAdmissionPolicy {
  const rules = recordGuard(recordKeys(labelNamespace), who);
  return {
    apiVersion: 'admissionregistration.k8s.io/v1',
    kind: 'ValidatingAdmissionPolicy',
    metadata: { name },
    spec: {
      failurePolicy: 'Fail',
      matchConstraints: {
        matchPolicy: 'Equivalent',
        resourceRules: [
          { apiGroups: [''], apiVersions: ['v1'], resources: ['nodes', 'nodes/status'], operations: ['UPDATE'] },
        ],
      },
      matchConditions: [...rules.matchConditions],
      variables: [...rules.variables],
      validations: [...rules.validations],
    },
  };
}

export function recordGuardBinding(name: string): k8s.V1ValidatingAdmissionPolicyBinding {
  return {
    apiVersion: 'admissionregistration.k8s.io/v1',
    kind: 'ValidatingAdmissionPolicyBinding',
    metadata: { name },
    spec: { policyName: name, validationActions: ['Deny'] },
  };
}

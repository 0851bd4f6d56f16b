// The record's guard, said once, as the apiserver evaluates it: a ValidatingAdmissionPolicy
// (admissionregistration.k8s.io/v1, GA in Kubernetes 1.30) on every UPDATE of a node and of its
// status subresource. The kubelet rewrites labels through nodes/status, and admission webhooks
// stop guarding when their pods are gone (failurePolicy: Ignore); a policy is evaluated by the
// apiserver itself, on both, always. The label namespace is the watcher's, as node-feature-discovery
// owns its own: no identity but the watcher's and those the operator allows may alter or remove a
// label in it (the opt-out label aside: it is an input, set by whoever launches the node) or the
// record's story. Adding one is not refused: the mutating webhook adds the record inline to the
// kubelet's and Karpenter's own updates, which the policy sees as theirs; record keys a node
// carries when created are replaced by the webhook's decision (scope.ts). The chart and the kit
// render these expressions; test/packaging/chart.test.ts keeps them equal.
import type { RecordKeys } from './record.ts';
import { REGISTRATION_CEL } from './registration.ts';

/** Who may change a record: the watcher's own identity and the users the operator allows, and the groups it allows. */
export interface GuardIdentities {
  readonly users: readonly string[];
  readonly groups: readonly string[];
}

interface GuardRules {
  /** The requests the policy is evaluated for: those of everyone but the identities allowed. */
  readonly matchConditions: readonly { name: string; expression: string }[];
  readonly variables: readonly { name: string; expression: string }[];
  readonly validations: readonly { expression: string; messageExpression: string; reason: string }[];
}

const quoted = (s: string) => `'${s.replaceAll('\\', '\\\\').replaceAll("'", "\\'")}'`;
const list = (xs: readonly string[]) => `[${xs.map(quoted).join(', ')}]`;

/** The record's labels of a node (`object` or `oldObject`): every key of the namespace but the opt-out. */
const recordLabels = (keys: Pick<RecordKeys, 'namespace' | 'optOut'>, node: string) =>
  `has(${node}.metadata.labels) ? ${node}.metadata.labels.filter(k, k.startsWith(${quoted(`${keys.namespace}/`)}) && k != ${quoted(keys.optOut)}) : []`;

const story = (keys: Pick<RecordKeys, 'decisionAnnotation'>, node: string) =>
  `has(${node}.metadata.annotations) && ${quoted(keys.decisionAnnotation)} in ${node}.metadata.annotations ? ${node}.metadata.annotations[${quoted(keys.decisionAnnotation)}] : ''`;

export function recordGuard(
  keys: Pick<RecordKeys, 'namespace' | 'optOut' | 'decisionAnnotation'>,
  who: GuardIdentities,
): GuardRules {
  return {
    matchConditions: [
      { name: 'not-an-allowed-user', expression: `!(request.userInfo.username in ${list(who.users)})` },
      ...(who.groups.length > 0
        ? [
            {
              name: 'not-in-an-allowed-group',
              expression: `!request.userInfo.groups.exists(g, g in ${list(who.groups)})`,
            },
          ]
        : []),
    ],
    variables: [
      // Karpenter's registration is never refused (registration.ts): the webhook restores the record in it.
      { name: 'registration', expression: REGISTRATION_CEL },
      { name: 'before', expression: recordLabels(keys, 'oldObject') },
      { name: 'after', expression: recordLabels(keys, 'object') },
      // The keys altered or removed.
      {
        name: 'changed',
        expression:
          'variables.before.filter(k, !(k in variables.after) || object.metadata.labels[k] != oldObject.metadata.labels[k])',
      },
    ],
    validations: [
      {
        expression: 'variables.registration || size(variables.changed) == 0',
        messageExpression: `'veneer-node-watcher: ' + variables.changed.join(', ') + ': the labels of ${keys.namespace}/ are the overlay record of this node, owned by veneer-node-watcher; they cannot be changed or removed (the identities allowed are recordGuard.allowedUsers and recordGuard.allowedGroups)'`,
        reason: 'Forbidden',
      },
      {
        expression: `variables.registration || (${story(keys, 'oldObject')}) == '' || (${story(keys, 'oldObject')}) == (${story(keys, 'object')})`,
        messageExpression: `'veneer-node-watcher: ${keys.decisionAnnotation}: the story of the overlay record of this node, owned by veneer-node-watcher; it cannot be changed or removed (the identities allowed are recordGuard.allowedUsers and recordGuard.allowedGroups)'`,
        reason: 'Forbidden',
      },
    ],
  };
}

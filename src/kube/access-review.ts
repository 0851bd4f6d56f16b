// The two questions delegated authentication and authorization put to the apiserver, as
// kube-rbac-proxy and controller-runtime's metrics filter do: whose is this bearer token
// (TokenReview), and may that user get this path (SubjectAccessReview). Both ride the watcher's
// one shared connection (connections.ts) with a deadline of their own.
import * as k8s from '@kubernetes/client-node';
import { withDeadline } from './call-options.ts';

export interface UserInfo {
  username: string;
  uid?: string;
  groups?: string[];
  extra?: Record<string, string[]>;
}

export interface AccessReviews {
  /** The token's user, or undefined when the apiserver does not accept the token; throws when it cannot say. */
  authenticate(token: string): Promise<UserInfo | undefined>;
  /** Whether `user` may `verb` the non-resource URL `path`; throws when the apiserver cannot say. */
  authorize(user: UserInfo, verb: string, path: string): Promise<boolean>;
}

/**
 * Far below the 65 s of other calls: a scrape waits on these, and Prometheus gives up on a
 * scrape after 10 s by default; an answer (503) inside that says more than a timeout.
 */
export const REVIEW_TIMEOUT_MS = 5_000;

export function accessReviews(kc: k8s.KubeConfig): AccessReviews {
  const authn = kc.makeApiClient(k8s.AuthenticationV1Api);
  const authz = kc.makeApiClient(k8s.AuthorizationV1Api);
  const options = withDeadline(undefined, REVIEW_TIMEOUT_MS);
  return {
    async authenticate(token) {
      // No audiences: the token must be meant for the apiserver itself, as a ServiceAccount's is.
      const review = await authn.createTokenReview({ body: { spec: { token } } }, options);
      const user = review.status?.user;
      if (review.status?.authenticated !== true || !user?.username) return undefined;
      return { username: user.username, ...(user.uid ? { uid: user.uid } : {}), ...(user.groups ? { groups: user.groups } : {}), ...(user.extra ? { extra: user.extra } : {}) };
    },
    async authorize(user, verb, path) {
      const review = await authz.createSubjectAccessReview({
        body: { spec: { user: user.username, uid: user.uid, groups: user.groups, extra: user.extra, nonResourceAttributes: { path, verb } } },
      }, options);
      return review.status?.allowed === true && review.status.denied !== true;
    },
  };
}

// The two questions delegated authentication and authorization put to the apiserver, as
// kube-rbac-proxy and controller-runtime's metrics filter do: whose is this bearer token
// (TokenReview), and may that user get this path (SubjectAccessReview). Both ride the watcher's
// one shared connection (client.ts) with a deadline of their own.
import type { KubeClient } from './client.ts';

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

interface TokenReviewStatus {
  authenticated?: boolean;
  user?: { username?: string; uid?: string; groups?: string[]; extra?: Record<string, string[]> };
}
interface SubjectAccessReviewStatus {
  allowed?: boolean;
  denied?: boolean;
}

/** Creates a review (a kind whose plural is its lower-cased name plus "s") and returns its status. */
async function review<S>(
  client: KubeClient,
  group: string,
  kind: string,
  spec: object,
  timeoutMs = REVIEW_TIMEOUT_MS,
): Promise<S | undefined> {
  const answer = await client.call<{ status?: S }>('POST', `/apis/${group}/v1/${kind.toLowerCase()}s`, {
    body: { apiVersion: `${group}/v1`, kind, spec },
    timeoutMs,
  });
  return answer.status;
}

export function accessReviews(client: KubeClient): AccessReviews {
  return {
    async authenticate(token) {
      // No audiences: the token must be meant for the apiserver itself, as a ServiceAccount's is.
      const status = await review<TokenReviewStatus>(client, 'authentication.k8s.io', 'TokenReview', { token });
      const user = status?.user;
      if (status?.authenticated !== true || !user?.username) return undefined;
      return {
        username: user.username,
        ...(user.uid ? { uid: user.uid } : {}),
        ...(user.groups ? { groups: user.groups } : {}),
        ...(user.extra ? { extra: user.extra } : {}),
      };
    },
    async authorize(user, verb, path) {
      const status = await review<SubjectAccessReviewStatus>(client, 'authorization.k8s.io', 'SubjectAccessReview', {
        user: user.username,
        uid: user.uid,
        groups: user.groups,
        extra: user.extra,
        nonResourceAttributes: { path, verb },
      });
      return status?.allowed === true && status.denied !== true;
    },
  };
}

// Who may read /metrics: the holder of a bearer token the apiserver accepts (TokenReview) whom
// the apiserver lets `get` the non-resource URL /metrics (SubjectAccessReview), as kubebuilder's
// scaffold does with controller-runtime's WithAuthenticationAndAuthorization.
//
// A decision is cached per token, so that a scrape every 15 s costs no API call after the
// first. The cache keys on an HMAC of the token under a key made at start-up: the token itself
// is never kept, and a memory dump does not let anyone test guesses against the keys. It is
// bounded twice over: accepted tokens and refused ones have caches of their own (a flood of
// random tokens cannot push out Prometheus' entry), each with a size cap; and tokens not in
// the cache are checked at a bounded rate, so that the same flood cannot turn into unbounded
// API calls.
import { createHmac, randomBytes } from 'node:crypto';
import type { Logger } from 'pino';
import { failureKind, httpStatus } from '../kube/failures.ts';
import type { AccessReviews } from '../kube/access-review.ts';

export type Verdict =
  | { result: 'allowed'; user: string }
  | { result: 'forbidden'; user: string }
  | { result: 'unauthenticated' }
  /** The apiserver could not be asked or could not answer; never cached. */
  | { result: 'error' }
  /** Too many unknown tokens at once; never cached. */
  | { result: 'throttled' };

export const METRICS_PATH = '/metrics';

/** A refusal is cached briefly: a role granted just now takes effect within this. */
export const DENY_TTL_MS = 10_000;
export const MAX_ALLOWED_ENTRIES = 256;
export const MAX_DENIED_ENTRIES = 1024;
/** Tokens checked with the apiserver (one TokenReview, then one SubjectAccessReview if it is valid) per second, and in a burst. */
export const REVIEWS_PER_SECOND = 10;
export const REVIEW_BURST = 20;

interface MetricsAuthOptions {
  reviews: AccessReviews;
  /** How long an accepted token is trusted without asking again (metrics.authCacheTTL). */
  allowTTLMs: number;
  log: Logger;
  now?: () => number;
}

/** A map that forgets its least recently used entries beyond `max`; an expired entry is no answer, but is remembered until pushed out. */
class ExpiringLru<V> {
  private readonly entries = new Map<string, { value: V; expiresAt: number }>();
  private readonly max: number;

  constructor(max: number) {
    this.max = max;
  }

  get size(): number {
    return this.entries.size;
  }

  get(key: string, now: number): V | undefined {
    const entry = this.entries.get(key);
    if (!entry || entry.expiresAt <= now) return undefined;
    this.entries.delete(key);
    this.entries.set(key, entry);
    return entry.value;
  }

  has(key: string): boolean {
    return this.entries.has(key);
  }

  set(key: string, value: V, expiresAt: number): void {
    this.entries.delete(key);
    this.entries.set(key, { value, expiresAt });
    for (const oldest of this.entries.keys()) {
      if (this.entries.size <= this.max) break;
      this.entries.delete(oldest);
    }
  }
}

/** The token of an `Authorization: Bearer <token>` header, if that is what it is. */
export function bearerToken(header: string | undefined): string | undefined {
  const match = /^bearer +(\S+) *$/i.exec(header ?? '');
  return match?.[1];
}

/**
 * When a JWT says it expires. Read only after the apiserver accepted the token (so its
 * signature is good): a cached acceptance must not outlive the token.
 */
export function jwtExpiryMs(token: string): number | undefined {
  const parts = token.split('.');
  if (parts.length !== 3) return undefined;
  try {
    const exp = (JSON.parse(Buffer.from(parts[1] ?? '', 'base64url').toString('utf8')) as { exp?: unknown }).exp;
    return typeof exp === 'number' && Number.isFinite(exp) ? exp * 1000 : undefined;
  } catch {
    return undefined;
  }
}

export class MetricsAuth {
  private readonly o: MetricsAuthOptions;
  private readonly now: () => number;
  private readonly hmacKey = randomBytes(32);
  private readonly allowed = new ExpiringLru<Verdict>(MAX_ALLOWED_ENTRIES);
  private readonly denied = new ExpiringLru<Verdict>(MAX_DENIED_ENTRIES);
  /** Scrapes with the same token that arrive together share one review. */
  private readonly pending = new Map<string, Promise<Verdict>>();
  private budget = REVIEW_BURST;
  private budgetAt: number;

  constructor(o: MetricsAuthOptions) {
    this.o = o;
    this.now = o.now ?? Date.now;
    this.budgetAt = this.now();
  }

  /** Entries held, for tests of the bounds. */
  get cached(): { allowed: number; denied: number } {
    return { allowed: this.allowed.size, denied: this.denied.size };
  }

  /** The verdict on a request to get /metrics with this Authorization header. */
  async check(authorization: string | undefined): Promise<Verdict> {
    const token = bearerToken(authorization);
    if (token === undefined) return { result: 'unauthenticated' };
    const key = createHmac('sha256', this.hmacKey).update(token).digest('base64');
    const now = this.now();
    const known = this.allowed.get(key, now) ?? this.denied.get(key, now);
    if (known) return known;
    let review = this.pending.get(key);
    if (!review) {
      // A token accepted before is checked again whatever the budget: it is Prometheus', not a
      // flood's, and there are at most MAX_ALLOWED_ENTRIES of them, each once per TTL.
      if (!this.allowed.has(key) && !this.takeBudget(now)) return { result: 'throttled' };
      review = this.review(token, key).finally(() => this.pending.delete(key));
      this.pending.set(key, review);
    }
    return review;
  }

  private takeBudget(now: number): boolean {
    this.budget = Math.min(REVIEW_BURST, this.budget + ((now - this.budgetAt) / 1000) * REVIEWS_PER_SECOND);
    this.budgetAt = now;
    if (this.budget < 1) return false;
    this.budget -= 1;
    return true;
  }

  private async review(token: string, key: string): Promise<Verdict> {
    let verdict: Verdict;
    try {
      const user = await this.o.reviews.authenticate(token);
      if (!user) verdict = { result: 'unauthenticated' };
      else if (await this.o.reviews.authorize(user, 'get', METRICS_PATH))
        verdict = { result: 'allowed', user: user.username };
      else verdict = { result: 'forbidden', user: user.username };
    } catch (err) {
      // Only the kind of failure: an error from a TokenReview call is no place to look for a token.
      const code = httpStatus(err);
      this.o.log.warn(
        { kind: failureKind(err), code },
        code === 403
          ? "cannot check a metrics scrape: the watcher may not create tokenreviews or subjectaccessreviews (see the chart's ClusterRole)"
          : 'cannot check a metrics scrape with the Kubernetes API; answering 503',
      );
      return { result: 'error' };
    }
    const now = this.now();
    if (verdict.result === 'allowed')
      this.allowed.set(key, verdict, Math.min(now + this.o.allowTTLMs, jwtExpiryMs(token) ?? Infinity));
    else this.denied.set(key, verdict, now + Math.min(this.o.allowTTLMs, DENY_TTL_MS));
    return verdict;
  }
}

// Options for the watcher's own API calls, and how their failures read. The client sets no
// deadline: a call on a connection that went silent (a NAT or load balancer dropping its state,
// no FIN) would hang for good, and with it the work-queue key or the relist waiting on it. The
// HTTP/2 PING (connections.ts) catches a dead connection first; the deadline is the backstop.
import * as k8s from '@kubernetes/client-node';

/**
 * Just above the apiserver's own 60 s request timeout: a call still running then can only be on
 * a dead connection. Shorter would abort writes that are merely slow, for example behind another
 * admission webhook with a long timeoutSeconds.
 */
export const API_CALL_TIMEOUT_MS = 65_000;

type Options = ReturnType<typeof k8s.setHeaderOptions>;

export function withDeadline(opts?: Options, timeoutMs = API_CALL_TIMEOUT_MS): Options {
  const deadline = {
    pre: (ctx: k8s.RequestContext) => {
      ctx.setSignal(AbortSignal.timeout(timeoutMs));
      return new k8s.Observable(Promise.resolve(ctx));
    },
    post: (res: k8s.ResponseContext) => new k8s.Observable(Promise.resolve(res)),
  };
  return { ...opts, middleware: [...(opts?.middleware ?? []), deadline], middlewareMergeStrategy: 'append' };
}

/** The HTTP status of a failed call, or undefined when there was no answer (a DOMException's `code` is not one). */
export function httpStatus(err: unknown): number | undefined {
  return err instanceof k8s.ApiException ? (err.code as number) : undefined;
}

/** Why a call failed, as a small fixed set of metric label values. */
export function failureKind(err: unknown): string {
  const code = httpStatus(err);
  if (code === undefined) return (err as { name?: string } | null)?.name === 'TimeoutError' ? 'timeout' : 'network';
  if (code === 403) return 'forbidden';
  if (code === 409) return 'conflict';
  if (code === 422) return 'invalid';
  if (code === 429) return 'throttled';
  if (code >= 500) return 'server_error';
  return code >= 400 ? 'http_4xx' : 'http_other';
}

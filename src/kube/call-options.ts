// Options for the watcher's own API calls. The client sets no deadline: a call on a connection
// that went silent (a NAT or load balancer dropping its state, no FIN) would hang for good, and
// with it the work-queue key or the relist waiting on it. With a deadline it fails, is counted
// and is retried like any other error.
import * as k8s from '@kubernetes/client-node';

/** Generous for one patch or one 500-item list page; far shorter than forever. */
export const API_CALL_TIMEOUT_MS = 30_000;

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

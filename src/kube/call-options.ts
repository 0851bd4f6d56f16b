// Options for the watcher's own API calls. The client sets no deadline: a call on a connection
// that went silent (a NAT or load balancer dropping its state, no FIN) would hang for good, and
// with it the work-queue key or the relist waiting on it. With a deadline it fails, is counted
// and is retried like any other error.
import * as k8s from '@kubernetes/client-node';

/** Generous for one small write (a patch takes milliseconds); far shorter than forever. */
export const WRITE_TIMEOUT_MS = 10_000;
/** A 500-item page of large Node objects from a busy apiserver can take seconds. */
export const LIST_PAGE_TIMEOUT_MS = 60_000;

type Options = ReturnType<typeof k8s.setHeaderOptions>;

export function withDeadline(timeoutMs: number, opts?: Options): Options {
  const deadline = {
    pre: (ctx: k8s.RequestContext) => {
      ctx.setSignal(AbortSignal.timeout(timeoutMs));
      return new k8s.Observable(Promise.resolve(ctx));
    },
    post: (res: k8s.ResponseContext) => new k8s.Observable(Promise.resolve(res)),
  };
  return { ...opts, middleware: [...(opts?.middleware ?? []), deadline], middlewareMergeStrategy: 'append' };
}

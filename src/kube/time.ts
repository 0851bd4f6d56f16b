// Kubernetes' wire formats of time.

/** Kubernetes' MicroTime (Lease and Event times): the apiserver parses exactly six fractional digits. */
export function microTime(epochMs: number): string {
  return new Date(epochMs).toISOString().replace(/Z$/, '000Z');
}

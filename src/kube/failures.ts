// How the watcher's own API calls fail, as its logs and metrics tell it.
import { ApiError } from './client.ts';

/** The HTTP status of a failed call, or undefined when there was no answer. */
export function httpStatus(err: unknown): number | undefined {
  return err instanceof ApiError ? err.statusCode : undefined;
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

/** A request that ended because nothing arrived for too long. */
export function isTimeout(err: unknown): boolean {
  return (err as { name?: string } | null)?.name === 'TimeoutError';
}

/** A request that ended because it was asked to. */
export function isAbort(err: unknown): boolean {
  return (err as { name?: string } | null)?.name === 'AbortError';
}

/** An error's message, for a log line. */
export function describe(err: unknown): string {
  return (err as { message?: string } | null)?.message || String(err);
}

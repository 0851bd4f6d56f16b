// Prices on their way. A record is written once, so a launch decided a moment before the prices it
// needs would read `unknown` for good: the first nodes of a watcher that learns its region from
// them (EKS Pod Identity) are decided while that region, and then its first reading, are still to
// come. Such a launch waits for the prices instead, for a bounded time, and is decided when they
// come or, failing that, as before.
import type { Effect } from './types.ts';

/** What the price source expects to hold soon and does not yet: spot prices, or on-demand prices from AWS. */
export interface PricesDue {
  /** When they became due (epoch ms): when the source began to wait for its region or its first reading. */
  readonly since: number;
  /** How long a launch waits for them, from `since` or from its node's creation, whichever is later. */
  readonly waitMs: number;
}

/**
 * Until when a launch waits for the prices due (epoch ms); undefined: it is decided now. Only an
 * effect unknown for want of prices waits: any other verdict would not change when they come.
 */
export function pricesAwaitedUntil(
  effect: Effect,
  due: PricesDue | undefined,
  createdAt: number,
  now: number,
): number | undefined {
  if (due === undefined || effect.verdict !== 'unknown') return undefined;
  if (effect.reasonCode !== 'no-spot-prices' && effect.reasonCode !== 'no-prices') return undefined;
  const until = Math.max(createdAt, due.since) + due.waitMs;
  return now < until ? until : undefined;
}

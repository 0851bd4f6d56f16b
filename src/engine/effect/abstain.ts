// "No answer", said one way. Where the replay cannot tell what Karpenter would have done (a price,
// a zone, a NodeClaim or an overlay's verdict it does not see), it abstains: a bounded code (a
// metric's label) and the reason in words. Every step that may abstain returns its result or an
// Abstain, told apart by `instanceof`; the record then reads `unknown`, with the reason.
import type { Effect, UnknownReason } from './types.ts';

export class Abstain {
  readonly code: UnknownReason;
  readonly reason: string;

  constructor(code: UnknownReason, reason: string) {
    this.code = code;
    this.reason = reason;
  }

  /** The record's effect: unknown for this reason, with what was worked out before the replay stopped. */
  effect(worked: Partial<Effect> = {}): Effect {
    return { verdict: 'unknown', reasonCode: this.code, reason: this.reason, ...worked };
  }
}

export const abstain = (code: UnknownReason, reason: string): Abstain => new Abstain(code, reason);

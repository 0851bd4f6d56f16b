// The latest few Events of each object, by when they last happened: Karpenter's
// ConsolidationCandidate and ConsolidationApproved Events date and score a consolidation's
// decision, and a command is computed at one of its candidates' latest. Kept after the Events
// expire (an hour by default), pruned with the disruption marks.

export interface Timed {
  readonly at: number;
}

export class TimedEvents<T extends Timed> {
  private readonly byKey = new Map<string, T[]>();
  private readonly kept: number;
  private readonly same: (a: T, b: T) => boolean;

  /** `kept`: how many per object; `same`: an item already held (a relist sends every Event again). */
  constructor(kept: number, same: (a: T, b: T) => boolean) {
    this.kept = kept;
    this.same = same;
  }

  add(key: string, item: T): void {
    const items = this.byKey.get(key) ?? [];
    if (items.some((i) => this.same(i, item))) return;
    items.push(item);
    items.sort((a, b) => a.at - b.at);
    if (items.length > this.kept) items.shift();
    // Re-inserted: the Map's order is then the order of the latest sighting, which pruning follows.
    this.byKey.delete(key);
    this.byKey.set(key, items);
  }

  /** The latest item no later than `notAfter`. */
  latest(key: string, notAfter: number): T | undefined {
    const items = this.byKey.get(key) ?? [];
    for (let i = items.length - 1; i >= 0; i--) if (items[i]!.at <= notAfter) return items[i];
    return undefined;
  }

  /** The items between `from` and `to`, inclusive. */
  between(key: string, from: number, to: number): T[] {
    return (this.byKey.get(key) ?? []).filter((i) => i.at >= from && i.at <= to);
  }

  /** Drops, the least recently seen first, objects whose latest item is older than `horizon`, and beyond `max` objects. */
  prune(horizon: number, max: number): void {
    for (const [key, items] of this.byKey) {
      if (items.at(-1)!.at >= horizon && this.byKey.size <= max) break;
      this.byKey.delete(key);
    }
  }
}

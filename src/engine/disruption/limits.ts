// A NodePool's limits inside consolidation's simulation (scheduler.go, filterByRemainingResources):
// a type whose capacity is over what the replacement's NodePool has left was no option, in either
// world, whatever its price. What is left is the limit less the capacity of the pool's nodes other
// than the candidates (SimulateScheduling leaves them out; StateNode.Capacity reads a NodeClaim's
// status.capacity). The watcher sums the pool's NodeClaims it holds, created by the decision's end;
// one deleted since, or marked for deletion then (not counted by Karpenter), it can miss or count
// wrongly. So a type over the limit itself was surely out; a type over only what the others left
// may have been out, and whether the pods had it is not known.
import { awsCapacity, type FitSizing } from '../effect/allocatable.ts';
import type { CandidateType } from '../effect/candidates.ts';
import type { PriceBook } from '../effect/prices.ts';
import type { Allocatable } from '../node.ts';
import type { NodePoolView } from '../nodepool.ts';

/** Whether a type was within the NodePool's limits in the simulation. */
export type Room = 'within' | 'unsure' | 'over';

const COUNTED = ['cpu', 'memory', 'pods'] as const;
/** How far a registered type's memory may be from the formula's: the provider holds the memory a node of it reported. */
const DISCOVERED_MEMORY_SPREAD = 0.15;

interface RoomSetting {
  readonly pool: NodePoolView;
  /** The capacity of the pool's nodes besides the candidates at the decision; undefined: none known. */
  readonly used: Allocatable | undefined;
  readonly prices: PriceBook;
  readonly sizing?: FitSizing | undefined;
}

/** Where the pool has limits that choose among types: each type's room in them. */
export function roomOf(s: RoomSetting): ((type: CandidateType) => Room) | undefined {
  // Every type is one node: a `nodes` limit stops every launch or none, it does not choose.
  const limits = Object.entries(s.pool.limits ?? {}).filter(([name]) => name !== 'nodes');
  if (limits.length === 0) return undefined;
  const { prices, sizing, used } = s;
  const capacityOf = (type: CandidateType): Allocatable | undefined => {
    const info = prices.instanceInfo?.(type.name);
    if (info === undefined || sizing === undefined || sizing.nodeClass.expressions) return undefined;
    return awsCapacity(info, sizing.nodeClass.kubelet, sizing.nodeClass.amiFamily, sizing.settings);
  };
  return (type) => {
    const capacity = capacityOf(type);
    let room: Room = 'within';
    for (const [name, limit] of limits) {
      const counted = COUNTED.find((r) => r === name);
      // A resource the provider's capacity has not (a GPU's, say) is 0 on a type with no devices.
      if (counted === undefined) {
        if (type.exotic !== false || name === 'ephemeral-storage' || Number.isNaN(limit)) room = 'unsure';
        continue;
      }
      if (capacity === undefined || Number.isNaN(limit)) {
        room = 'unsure';
        continue;
      }
      const spread = counted === 'memory' && sizing?.registered.has(type.name) ? DISCOVERED_MEMORY_SPREAD : 0;
      const held = capacity[counted];
      if (held * (1 - spread) > limit) return 'over';
      if (held * (1 + spread) > limit - (used?.[counted] ?? 0)) room = 'unsure';
    }
    return room;
  };
}

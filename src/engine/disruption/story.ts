// What a replacement's record tells of the command that launched it (DisruptionStory): its reason,
// the nodes it replaced, and, for a consolidation, its price test in both worlds. The replaced
// nodes are named as they were: they are gone once the replacement is up.
import { type DisruptionStory, MAX_REPLACED_SHOWN, type ReplacedStory } from '../effect/types.ts';
import { CAPACITY_TYPE, INSTANCE_TYPE, NODEPOOL_LABEL, ZONE } from '../well-known.ts';
import type { Candidate, Command } from './types.ts';

const optional = (key: string, value: string | undefined) => (value === undefined ? {} : { [key]: value });

export function describe(c: Candidate): ReplacedStory {
  return {
    nodeClaim: c.nodeClaim,
    ...(c.node !== undefined ? { node: c.node } : {}),
    ...optional('instanceType', c.labels[INSTANCE_TYPE]),
    ...optional('capacityType', c.labels[CAPACITY_TYPE]),
    ...optional('zone', c.labels[ZONE]),
    ...optional('nodePool', c.labels[NODEPOOL_LABEL]),
  };
}

/** The story every replacement's record tells, whatever its method worked out. */
export function commandStory(command: Command): DisruptionStory {
  return {
    reason: command.reason.name,
    replaced: command.candidates.slice(0, MAX_REPLACED_SHOWN).map(describe),
    replacedCount: command.candidates.length,
    ...(command.churn.length > 0 ? { churn: command.churn } : {}),
  };
}

/** A few names in words, and how many more. */
export const names = (all: readonly string[]): string =>
  `${all.slice(0, 3).join(', ')}${all.length > 3 ? ` and ${all.length - 3} more` : ''}`;

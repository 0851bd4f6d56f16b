// Drift and health (drift.go; v1.15's health): a command disrupts one node, and its replacement is
// made whatever the prices: no price filter, no spot narrowing. The provisioner schedules the
// node's pods anew and launches as it always does, so the replacement's effect is its launch's,
// replayed without the selected overlays as any launch is. Overlays never cause drift: core drift
// compares the NodePool's hash, its requirements and whether a compatible offering exists
// (InstanceTypeNotFound; an overlay never removes one), the AWS provider the AMI, subnets,
// security groups, capacity reservations and the NodeClass.
import { launchEffect } from '../effect/effect.ts';
import type { EffectInput } from '../effect/types.ts';
import type { Command, Judged } from './types.ts';

export const driftEffect = (_command: Command, replacement: EffectInput): Judged => ({
  effect: launchEffect(replacement),
});

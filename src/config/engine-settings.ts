// The engine's settings and overlay policy, from the configuration: one place for the webhook,
// the reconciler and the CLI.
import type { Config } from './load.ts';
import {
  KNOWN_PROVIDERS,
  parseSelector,
  recordKeys,
  withExtraKeys,
  type EngineSettings,
  type OverlayPolicy,
  type ProviderSettings,
} from '../engine/index.ts';

export function engineSettings(config: Config): EngineSettings {
  // instanceTypeKeys are added to every provider: the one set, or the one each NodeClaim names.
  const known = KNOWN_PROVIDERS.map((p) => withExtraKeys(p, config.instanceTypeKeys));
  const provider =
    config.karpenterProvider === 'auto' ? 'auto' : known.find((p) => p.name === config.karpenterProvider);
  // The schema's enum admits only auto and known providers.
  if (provider === undefined) throw new Error(`unknown karpenterProvider ${JSON.stringify(config.karpenterProvider)}`);
  return {
    keys: recordKeys(config.labelNamespace),
    gracePeriodMs: config.gracePeriodMs,
    provider,
    knownProviders: known,
  };
}

export function overlayPolicy(config: Config): OverlayPolicy {
  return { selector: parseSelector(config.overlaySelector), requireOverlayReady: config.requireOverlayReady };
}

/** Karpenter's own settings the pods' fit on an AWS type is computed with, as the configuration says Karpenter sets them. */
export function karpenterSettings(config: Config): ProviderSettings {
  return {
    vmMemoryOverheadPercent: Number(config.karpenterVMMemoryOverheadPercent),
    reservedENIs: config.karpenterReservedENIs,
  };
}

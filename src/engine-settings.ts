// The engine's settings and overlay policy, from the configuration: one place for the webhook,
// the reconciler and the CLI.
import type { Config } from './config/load.ts';
import { parseSelector, PROVIDERS, recordKeys, withExtraKeys, type EngineSettings, type OverlayPolicy } from './engine/index.ts';

export function engineSettings(config: Config): EngineSettings {
  const provider = PROVIDERS[config.karpenterProvider];
  // The schema's enum admits only known providers.
  if (provider === undefined) throw new Error(`unknown karpenterProvider ${JSON.stringify(config.karpenterProvider)}`);
  return { keys: recordKeys(config.labelNamespace), gracePeriodMs: config.gracePeriodMs, provider: withExtraKeys(provider, config.instanceTypeKeys) };
}

export function overlayPolicy(config: Config): OverlayPolicy {
  return { selector: parseSelector(config.overlaySelector), requireOverlayReady: config.requireOverlayReady };
}

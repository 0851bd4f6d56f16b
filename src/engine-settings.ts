// The engine's settings and overlay policy, from the configuration: one place for the webhook,
// the reconciler and the CLI.
import type { Config } from './config/load.ts';
import type { PriceMode } from './prices/source.ts';
import { KNOWN_PROVIDERS, parseSelector, recordKeys, withExtraKeys, type EngineSettings, type OverlayPolicy } from './engine/index.ts';

export function engineSettings(config: Config): EngineSettings {
  // instanceTypeKeys are added to every provider: the one set, or the one each NodeClaim names.
  const known = KNOWN_PROVIDERS.map((p) => withExtraKeys(p, config.instanceTypeKeys));
  const provider = config.karpenterProvider === 'auto' ? 'auto' : known.find((p) => p.name === config.karpenterProvider);
  // The schema's enum admits only auto and known providers.
  if (provider === undefined) throw new Error(`unknown karpenterProvider ${JSON.stringify(config.karpenterProvider)}`);
  return { keys: recordKeys(config.labelNamespace), gracePeriodMs: config.gracePeriodMs, provider, knownProviders: known };
}

export function overlayPolicy(config: Config): OverlayPolicy {
  return { selector: parseSelector(config.overlaySelector), requireOverlayReady: config.requireOverlayReady };
}

/**
 * The price source's mode and region from prices.source and prices.region: `auto` reads prices
 * from AWS only where a region is known (as on EKS, where AWS_REGION is set for the pod), so that
 * a watcher anywhere else never calls out.
 */
export function priceSourceSettings(config: Config, env: Record<string, string | undefined> = process.env): { mode: PriceMode; region: string | undefined } {
  const region = config.prices.region !== 'auto' ? config.prices.region : env.AWS_REGION || env.AWS_DEFAULT_REGION || undefined;
  const mode = config.prices.source === 'auto' ? (region === undefined ? 'static' : 'aws') : (config.prices.source as PriceMode);
  return { mode, region };
}

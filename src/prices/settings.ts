// How the configuration says prices are read: the price source's settings live with it.
import type { Config } from '../config/load.ts';

export type PriceMode = 'aws' | 'isolated' | 'static' | 'off';

export interface PriceSettings {
  mode: PriceMode;
  region: string | undefined;
  refreshMs: number;
  timeoutMs: number;
}

/**
 * The price source's mode and region from prices.source and prices.region: `auto` reads prices
 * from AWS only where a region is known (as on EKS, where AWS_REGION is set for the pod), so that
 * a watcher anywhere else never calls out.
 */
export function priceSourceSettings(
  config: Config,
  env: Record<string, string | undefined> = process.env,
): { mode: PriceMode; region: string | undefined } {
  const region =
    config.prices.region !== 'auto' ? config.prices.region : env.AWS_REGION || env.AWS_DEFAULT_REGION || undefined;
  const mode =
    config.prices.source === 'auto' ? (region === undefined ? 'static' : 'aws') : (config.prices.source as PriceMode);
  return { mode, region };
}

/** Every setting of the price source, as `serve` and `explain` run it. */
export function priceSettings(config: Config): PriceSettings {
  return {
    ...priceSourceSettings(config),
    refreshMs: config.prices.refreshIntervalMs,
    timeoutMs: config.prices.timeoutMs,
  };
}

// How the configuration says prices are read: the price source's settings live with it.
import type { Config } from '../config/load.ts';

export type PriceMode = 'aws' | 'isolated' | 'static' | 'off';

/** Where the region came from: prices.region, AWS_REGION (or AWS_DEFAULT_REGION), or the nodes' topology.kubernetes.io/region. */
type RegionOrigin = 'setting' | 'environment' | 'nodes';

interface PriceSettings {
  mode: PriceMode;
  region: string | undefined;
  /** Undefined while no region is known. */
  regionFrom: RegionOrigin | undefined;
  refreshMs: number;
  timeoutMs: number;
}

/**
 * The price source's mode and region from prices.source and prices.region. `auto` takes the
 * region from the setting, else the environment (AWS_REGION, AWS_DEFAULT_REGION: IRSA sets them),
 * else the nodes (`nodesRegion`: EKS Pod Identity gives credentials but no region, and every EKS
 * node carries topology.kubernetes.io/region); and reads prices from AWS only where a region is
 * known, so that a watcher anywhere else never calls out.
 */
export function priceSourceSettings(
  config: Config,
  env: Record<string, string | undefined> = process.env,
  nodesRegion?: string,
): { mode: PriceMode; region: string | undefined; regionFrom: RegionOrigin | undefined } {
  const environment = env.AWS_REGION || env.AWS_DEFAULT_REGION || undefined;
  const [region, regionFrom]: [string | undefined, RegionOrigin | undefined] =
    config.prices.region !== 'auto'
      ? [config.prices.region, 'setting']
      : environment !== undefined
        ? [environment, 'environment']
        : nodesRegion !== undefined
          ? [nodesRegion, 'nodes']
          : [undefined, undefined];
  return { mode: priceMode(config, region !== undefined), region, regionFrom };
}

/** The mode prices.source gives, with or without a region: `auto` reads AWS only where one is known. */
export function priceMode(config: Config, regionKnown: boolean): PriceMode {
  return config.prices.source === 'auto' ? (regionKnown ? 'aws' : 'static') : (config.prices.source as PriceMode);
}

/**
 * Credentials the pod was given for AWS in its environment: EKS Pod Identity's
 * (AWS_CONTAINER_CREDENTIALS_FULL_URI), IRSA's (AWS_WEB_IDENTITY_TOKEN_FILE), ECS's, keys or a profile.
 */
const AWS_CREDENTIAL_VARIABLES = [
  'AWS_CONTAINER_CREDENTIALS_FULL_URI',
  'AWS_CONTAINER_CREDENTIALS_RELATIVE_URI',
  'AWS_WEB_IDENTITY_TOKEN_FILE',
  'AWS_ACCESS_KEY_ID',
  'AWS_PROFILE',
];

/**
 * Whether the nodes are asked for the region: prices.region is auto, neither it nor the
 * environment names one, prices are read at all, and the pod was given AWS credentials (a region
 * alone, which nodes of any cluster may carry, never makes a watcher without them call AWS).
 */
export function regionFromNodesWanted(config: Config, env: Record<string, string | undefined> = process.env): boolean {
  return (
    config.prices.source !== 'off' &&
    priceSourceSettings(config, env).region === undefined &&
    AWS_CREDENTIAL_VARIABLES.some((name) => Boolean(env[name]))
  );
}

/**
 * Every setting of the price source, as `serve` and `explain` run it; `nodesRegion`, the region
 * the nodes name, counts where regionFromNodesWanted says so.
 */
export function priceSettings(
  config: Config,
  env: Record<string, string | undefined> = process.env,
  nodesRegion?: string,
): PriceSettings {
  const nodes = regionFromNodesWanted(config, env) ? nodesRegion : undefined;
  return {
    ...priceSourceSettings(config, env, nodes),
    refreshMs: config.prices.refreshIntervalMs,
    timeoutMs: config.prices.timeoutMs,
  };
}

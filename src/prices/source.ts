// Keeps the list prices the effect is judged with, refreshed in the background like Karpenter's
// pricing controller (every 12 hours by default). A decision only ever reads the snapshot it
// holds, so a price source that is down or slow never holds up a node: it leaves the prices
// older, or the effect unknown where they are missing (counted as effect_unknown_total).
//
// Modes: `aws`, the Pricing API and EC2, with Karpenter's static table until (and whenever) the
// Pricing API cannot be read; `isolated`, the table for on-demand and EC2 for spot, as Karpenter
// prices under ISOLATED_VPC; `static`, the table alone (no AWS call, no spot prices); `off`, none.
// A source made without a region (`regionLater`: the nodes will name it) holds the static table
// until useRegion() gives one, then reads as its mode says from then on.
//
// A source that reads AWS, or will once the nodes name its region, says its prices are due (due())
// until its first reading has ended: a record is written once, and a launch decided a moment before
// them would read unknown for good.
import type { Logger } from 'pino';
import type { InstanceTypeInfo, PriceBook, PricesDue } from '../engine/index.ts';
import type { Metrics } from '../metrics.ts';
import type { Config } from '../config/load.ts';
import { type PriceMode, priceSettings } from './settings.ts';
import { Prices } from './book.ts';
import type { AwsClient } from './aws-client.ts';
import { STATIC_SOURCE, staticOnDemand } from './static-table.ts';

export interface PriceSourceOptions {
  mode: PriceMode;
  region: string | undefined;
  refreshMs: number;
  timeoutMs: number;
  metrics: Metrics;
  log: Logger;
  now: () => number;
  /** A client of other endpoints (tests); by default AWS's, with the SDK's credential chain. */
  client?: AwsClient;
  /** The source may start without a region: useRegion() gives it later (from the nodes), with this mode. */
  regionLater?: PriceMode;
}

/**
 * How many reading timeouts a launch waits for prices due. The reading gives up by itself after
 * one (and then no longer makes them due); the second covers what its timeout does not: the
 * credential chain, and the region's way from a node's creation to the source.
 */
const DUE_TIMEOUTS = 2;

const readsAws = (mode: PriceMode) => mode === 'aws' || mode === 'isolated';

export class PriceSource {
  private readonly o: PriceSourceOptions;
  private mode: PriceMode;
  private region: string | undefined;
  private started = false;
  private onDemand: { prices: Map<string, number>; source: string; at?: number } | undefined;
  private spot: { prices: Map<string, Map<string, number>>; at: number } | undefined;
  private offered: Map<string, Set<string>> | undefined;
  private described: Map<string, InstanceTypeInfo> | undefined;
  private book: Prices | undefined;
  private timer: NodeJS.Timeout | undefined;
  private inFlight: Promise<void> | undefined;
  private client: Promise<AwsClient> | undefined;
  private stopped = false;
  private dueSince: number | undefined;
  private readonly dueEnded: (() => void)[] = [];

  constructor(opts: PriceSourceOptions) {
    this.o = opts;
    this.mode = opts.mode;
    this.region = opts.region;
    if (opts.mode !== 'off') this.onDemand = { prices: staticOnDemand(opts.region), source: STATIC_SOURCE };
    if (opts.region !== undefined) this.connect(opts.region);
    else if (readsAws(opts.mode) && opts.regionLater === undefined)
      throw new Error(`prices.source ${opts.mode} needs a region (prices.region, AWS_REGION, or the nodes' label)`);
    if (this.client || (opts.region === undefined && opts.regionLater && readsAws(opts.regionLater)))
      this.dueSince = opts.now();
    this.rebuild();
    opts.metrics.atScrape.prices = () => this.exportGauges();
  }

  /** The AWS client of the region, where the mode reads AWS. */
  private connect(region: string): void {
    if (!readsAws(this.mode)) return;
    // Loaded only where AWS is read: static and off modes carry no signer or credential chain.
    this.client = this.o.client
      ? Promise.resolve(this.o.client)
      : import('./aws-client.ts').then((m) => m.awsClient({ region }));
  }

  /**
   * The region learned after the source was made (the nodes name it): the static table of that
   * region at once, and, where `regionLater` reads AWS, a reading now (once started) and every
   * refresh period. Once: a region known already is kept.
   */
  useRegion(region: string): Promise<void> {
    const mode = this.o.regionLater ?? this.mode;
    if (this.region !== undefined || this.stopped || this.mode === 'off' || mode === 'off') return Promise.resolve();
    this.region = region;
    this.mode = mode;
    this.onDemand = { prices: staticOnDemand(region), source: STATIC_SOURCE };
    this.connect(region);
    this.rebuild();
    return this.started ? this.poll() : Promise.resolve();
  }

  /** The prices now; undefined when the mode is off. */
  current(): PriceBook | undefined {
    return this.book;
  }

  /** What it will soon hold and does not yet: until its first reading from AWS has ended, whatever its result. */
  due(): PricesDue | undefined {
    return this.dueSince === undefined ? undefined : { since: this.dueSince, waitMs: DUE_TIMEOUTS * this.o.timeoutMs };
  }

  /** Calls `listener` when the prices due have come, or will not: launches that waited for them can be decided. */
  onDueEnded(listener: () => void): void {
    this.dueEnded.push(listener);
  }

  /** Reads AWS now and then every refresh period (mode aws); resolves after the first read. */
  start(): Promise<void> {
    this.started = true;
    return this.poll();
  }

  private poll(): Promise<void> {
    if (!this.client || this.timer) return Promise.resolve();
    // Waited for from now: the caches' first sync, which the start follows, must not use up a launch's wait.
    if (this.dueSince !== undefined) this.dueSince = this.o.now();
    const first = this.refresh();
    this.timer = setInterval(() => void this.refresh(), this.o.refreshMs);
    this.timer.unref();
    return first;
  }

  async stop(): Promise<void> {
    this.stopped = true;
    clearInterval(this.timer);
    await this.inFlight;
  }

  /** One refresh of both kinds; a failure keeps what was known (Karpenter's "maintain previously retrieved pricing data"). */
  refresh(): Promise<void> {
    this.inFlight ??= this.read().finally(() => {
      this.inFlight = undefined;
      this.endDue();
    });
    return this.inFlight;
  }

  private endDue(): void {
    if (this.dueSince === undefined) return;
    this.dueSince = undefined;
    for (const listener of this.dueEnded) listener();
  }

  private async read(): Promise<void> {
    if (!this.client || this.stopped) return;
    // Loaded here, as the client is: aws-api's imports bring the SDK's signer and XML parser,
    // which static and off modes (explain offline) never use.
    const { fetchInstanceTypes, fetchOfferedZones, fetchOnDemand, fetchSpot } = await import('./aws-api.ts');
    const client = await this.client;
    const region = this.region!;
    const signal = AbortSignal.timeout(this.o.timeoutMs);
    const isolated = this.mode === 'isolated';
    const [od, spot, offered, described] = await Promise.allSettled([
      isolated ? Promise.resolve(undefined) : fetchOnDemand(client, region, signal),
      fetchSpot(client, new Date(this.o.now()), signal),
      fetchOfferedZones(client, signal),
      fetchInstanceTypes(client, signal),
    ]);
    if (offered.status === 'fulfilled') this.offered = offered.value;
    if (described.status === 'fulfilled') this.described = described.value;
    const at = this.o.now();
    if (od.status === 'fulfilled' && od.value)
      this.onDemand = { prices: new Map([...this.onDemand!.prices, ...od.value]), source: 'aws', at };
    if (spot.status === 'fulfilled') this.spot = { prices: mergeZonal(this.spot?.prices, spot.value), at };
    for (const [kind, result] of (isolated
      ? [
          ['spot', spot],
          ['offerings', offered],
          ['instance_types', described],
        ]
      : [
          ['on_demand', od],
          ['spot', spot],
          ['offerings', offered],
          ['instance_types', described],
        ]) as [string, PromiseSettledResult<unknown>][]) {
      this.o.metrics.priceRefreshes.inc({ kind, result: result.status === 'fulfilled' ? 'ok' : 'error' });
      if (result.status === 'rejected')
        this.o.log.warn(
          { kind, err: (result.reason as Error).message },
          'reading prices from AWS failed; keeping the prices known',
        );
    }
    this.rebuild();
  }

  private rebuild(): void {
    if (this.onDemand === undefined) {
      this.book = undefined;
      return;
    }
    const source = this.spot
      ? this.onDemand.source === 'aws'
        ? 'aws'
        : `${this.onDemand.source}+ec2-spot`
      : this.onDemand.source;
    const asOf = Math.min(this.onDemand.at ?? Number.POSITIVE_INFINITY, this.spot?.at ?? Number.POSITIVE_INFINITY);
    this.book = new Prices({
      source,
      ...(Number.isFinite(asOf) ? { asOf } : {}),
      ...(this.region !== undefined ? { region: this.region } : {}),
      onDemand: this.onDemand.prices,
      ...(this.spot ? { spot: this.spot.prices } : {}),
      ...(this.offered ? { offered: this.offered } : {}),
      ...(this.described ? { described: this.described } : {}),
    });
  }

  private exportGauges(): void {
    const m = this.o.metrics;
    m.pricesKnown.reset();
    m.pricesAge.reset();
    if (this.onDemand)
      m.pricesKnown.set({ kind: 'on_demand', source: this.onDemand.source }, this.onDemand.prices.size);
    if (this.book && this.spot) m.pricesKnown.set({ kind: 'spot', source: 'aws' }, this.book.spotCount);
    const now = this.o.now();
    if (this.onDemand?.at !== undefined) m.pricesAge.set({ kind: 'on_demand' }, (now - this.onDemand.at) / 1000);
    if (this.spot) m.pricesAge.set({ kind: 'spot' }, (now - this.spot.at) / 1000);
  }
}

/** combineZonalPricing: the new records over the old, zones the new ones lack kept. */
function mergeZonal(
  old: Map<string, Map<string, number>> | undefined,
  fresh: Map<string, Map<string, number>>,
): Map<string, Map<string, number>> {
  const merged = new Map(old ?? []);
  for (const [type, zones] of fresh) merged.set(type, new Map([...(old?.get(type) ?? []), ...zones]));
  return merged;
}

/**
 * The prices as the configuration says to read them, once (the command line's explain): the
 * static table at once, AWS's where the mode reads AWS and it answers. `nodesRegion`: the region
 * the nodes read name, where prices.region `auto` finds none in the environment.
 */
export async function readPricesOnce(config: Config, nodesRegion?: string): Promise<PriceBook | undefined> {
  const settings = priceSettings(config, process.env, nodesRegion);
  // Static and off read nothing: their book is the table as it is, without the metrics and the
  // logger a reading reports to (prom-client and pino, about 30 ms of an offline explain's start).
  if (!readsAws(settings.mode)) return settings.mode === 'off' ? undefined : staticBook(settings.region);
  const { Registry } = await import('prom-client');
  const { createMetrics } = await import('../metrics.ts');
  const { createLogger } = await import('../log.ts');
  const source = new PriceSource({
    ...settings,
    metrics: createMetrics(new Registry()),
    log: createLogger('error'),
    now: Date.now,
  });
  await source.refresh();
  await source.stop();
  return source.current();
}

/** The static table alone, as a source that reads no AWS holds it (rebuild with neither AWS's prices nor spot). */
function staticBook(region: string | undefined): PriceBook {
  return new Prices({
    source: STATIC_SOURCE,
    ...(region !== undefined ? { region } : {}),
    onDemand: staticOnDemand(region),
  });
}

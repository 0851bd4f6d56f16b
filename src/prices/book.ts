// A snapshot of list prices the engine reads (engine/effect/prices.ts PriceBook): on-demand per
// instance type, spot per instance type and zone, with where they came from and when.
import type { InstanceTypeInfo, PriceBook } from '../engine/index.ts';

const EMPTY: ReadonlySet<string> = new Set();

export class Prices implements PriceBook {
  readonly source: string;
  readonly asOf: number | undefined;
  readonly region: string | undefined;
  private readonly onDemandPrices: ReadonlyMap<string, number>;
  private readonly spotPrices: ReadonlyMap<string, ReadonlyMap<string, number>> | undefined;
  private readonly offered: ReadonlyMap<string, ReadonlySet<string>> | undefined;
  private readonly described: ReadonlyMap<string, InstanceTypeInfo> | undefined;

  /** `spot` undefined: the source has no spot prices at all; `offered` undefined: it does not say where types are offered. */
  constructor(o: {
    source: string;
    asOf?: number;
    region?: string;
    onDemand: ReadonlyMap<string, number>;
    spot?: ReadonlyMap<string, ReadonlyMap<string, number>>;
    offered?: ReadonlyMap<string, ReadonlySet<string>>;
    /** DescribeInstanceTypes, by type; undefined: not read. */
    described?: ReadonlyMap<string, InstanceTypeInfo>;
  }) {
    this.source = o.source;
    this.asOf = o.asOf;
    this.region = o.region;
    this.onDemandPrices = o.onDemand;
    this.spotPrices = o.spot;
    this.offered = o.offered;
    // Declared only when known: the engine tells "offered nowhere" from "not said".
    if (this.offered === undefined) this.offeredZones = undefined;
    this.described = o.described;
    if (this.described === undefined) this.instanceInfo = undefined;
  }

  instanceInfo?: (instanceType: string) => InstanceTypeInfo | undefined = (instanceType) =>
    this.described?.get(instanceType);

  offeredZones?: (instanceType: string) => ReadonlySet<string> | undefined = (instanceType) =>
    this.offered?.get(instanceType) ?? EMPTY;

  private catalog: readonly string[] | undefined;

  instanceTypes(): readonly string[] {
    this.catalog ??= [...this.onDemandPrices.keys()];
    return this.catalog;
  }

  get hasSpot(): boolean {
    return this.spotPrices !== undefined;
  }

  onDemand(instanceType: string): number | undefined {
    return this.onDemandPrices.get(instanceType);
  }

  spot(instanceType: string, zone: string): number | undefined {
    return this.spotPrices?.get(instanceType)?.get(zone);
  }

  get onDemandCount(): number {
    return this.onDemandPrices.size;
  }

  get spotCount(): number {
    let n = 0;
    for (const zones of this.spotPrices?.values() ?? []) n += zones.size;
    return n;
  }
}

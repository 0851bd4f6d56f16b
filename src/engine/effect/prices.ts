// The list prices a launch was decided with, as the engine reads them: a snapshot the watcher's
// price sources keep up to date (src/prices), passed in like the caches' views.
import type { InstanceTypeInfo } from './allocatable.ts';
import { labelValue } from '../normalize.ts';
import type { Labels } from '../requirements.ts';
import { INSTANCE_TYPE } from '../well-known.ts';

export interface PriceBook {
  /** Where the prices come from (`aws`, `static`, `kwok`), for the record. */
  readonly source: string;
  /** When they were read (epoch ms), for the record. */
  readonly asOf: number | undefined;
  /** The region the prices are for. */
  readonly region: string | undefined;
  /** On-demand USD an hour, undefined when not known. */
  onDemand(instanceType: string): number | undefined;
  /** Whether the source has spot prices at all (Karpenter's static table has none). */
  readonly hasSpot: boolean;
  /** Spot USD an hour in a zone, undefined when the type has no spot price there. */
  spot(instanceType: string, zone: string): number | undefined;
  /**
   * The zones EC2 offers the type in (DescribeInstanceTypeOfferings), undefined when the source
   * does not say: it is then taken to be offered wherever the NodeClass launches.
   */
  offeredZones?(instanceType: string): ReadonlySet<string> | undefined;
  /**
   * Every instance type the source prices (the region's catalog, as far as it knows it), undefined
   * when it cannot list them: a consolidation's options that the overlays cut away are among them.
   */
  instanceTypes?(): readonly string[];
  /** What DescribeInstanceTypes says of a type (vCPUs, memory, architecture, ENIs), undefined when not known. */
  instanceInfo?(instanceType: string): InstanceTypeInfo | undefined;
}

/**
 * A node's on-demand list price an hour, as the launch replay reads it: its instance type (the
 * label Karpenter compares, or its deprecated alias) in the book; undefined when not known.
 */
export function onDemandListPrice(labels: Labels, prices: PriceBook | undefined): number | undefined {
  const instanceType = labelValue(labels, INSTANCE_TYPE);
  return instanceType === undefined ? undefined : prices?.onDemand(instanceType);
}

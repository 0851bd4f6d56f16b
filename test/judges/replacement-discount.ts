// A selected overlay that discounts a running node's own type (an RI or Savings Plan rate on what
// already runs), and a type of another family its pods fit, cheaper than the node at list price:
// with the overlay consolidation's replacement NodeClaim lists only types under the discounted
// price, so that type is cut; without it, it is an option, and the launch may be another.
import type { ConsolidateNode, ConsolidateNodePool, JudgeOverlay } from './karpenter-oracle.ts';
import type { Choices } from './karpenter-cluster.ts';
import { type CatalogType, catalogType, FAMILIES, SIZES } from './launch-cases.ts';

const inReq = (key: string, ...values: string[]) => ({ key, operator: 'In', values });
const milli = (q: string | undefined) => (q?.endsWith('m') ? Number(q.slice(0, -1)) : Number(q ?? 0) * 1000);
const mebi = (q: string | undefined) => (q?.endsWith('Gi') ? Number(q.slice(0, -2)) * 1024 : Number(q?.slice(0, -2)));

/** The overlay, and the cheaper type when the catalog had none (to be added to it). */
export function ownDiscount(
  c: Choices,
  catalog: readonly CatalogType[],
  nodes: readonly ConsolidateNode[],
  pools: readonly ConsolidateNodePool[],
  zones: string[],
): { overlay: JudgeOverlay & { selected: boolean }; added?: CatalogType } | undefined {
  const onDemand = nodes.filter((n) => n.capacityType === 'on-demand');
  if (onDemand.length === 0) return undefined;
  const node = c.pick(onDemand);
  const own = catalog.find((t) => t.name === node.instanceType)!;
  const allowed = pools
    .find((p) => p.name === node.nodePool)!
    .requirements.find((r) => r.key === 'karpenter.k8s.aws/instance-family')?.values;
  const cpu = node.pods.reduce((n, p) => n + milli(p.cpu), 0);
  const memory = node.pods.reduce((n, p) => n + mebi(p.memory), 0);
  // The smallest size the pods fit (the judge's allocatable is the capacity: cpu, 4 GiB per CPU).
  const size = SIZES.find(([s, n]) => s !== 'metal' && n * 1000 >= cpu && n * 4096 >= memory);
  const families = FAMILIES.filter(
    (f) =>
      f.arch === 'amd64' &&
      f.device === undefined &&
      f !== own.family &&
      size !== undefined &&
      f.rate * size[1] < own.onDemand &&
      (allowed === undefined || allowed.includes(f.name)),
  );
  if (size === undefined || families.length === 0) return undefined;
  const family = c.pick(families);
  const name = `${family.name}.${size[0]}`;
  const known = catalog.find((t) => t.name === name);
  const cheaper = known ?? catalogType(family, size[0], size[1], zones, c, undefined);
  // Mostly a discount deep enough to cut the cheaper type from the options with the overlay.
  const deep = ['-40%', '-60%', '-75%'].filter(
    (d) => own.onDemand * (1 + Number.parseInt(d, 10) / 100) < cheaper.onDemand,
  );
  const byFamily = c.chance(0.3);
  return {
    overlay: {
      name: `own-discount-${byFamily ? own.family.name : own.name}`,
      weight: 35,
      requirements: [
        inReq('karpenter.sh/capacity-type', 'on-demand'),
        byFamily
          ? inReq('karpenter.k8s.aws/instance-family', own.family.name)
          : inReq('node.kubernetes.io/instance-type', own.name),
      ],
      priceAdjustment: c.pick(deep.length > 0 && c.chance(0.8) ? deep : ['-40%', '-60%', '-75%']),
      selected: true,
    },
    ...(known ? {} : { added: cheaper }),
  };
}

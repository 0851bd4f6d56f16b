// What the effect's replay of a launch reads from the cluster besides the NodeClaim: the zones
// each EC2NodeClass launches into (its status' subnets) and its sizing (lookups.ts).
import type { FitSizing, InstanceLabels, ProviderSettings } from '../engine/index.ts';
import { type CacheDeps, cacheReflector, nameOf } from '../kube/cache-reflector.ts';
import type { Reflector } from '../kube/reflector.ts';
import { fitSizing, nodeClassFacts, type NodeClassFacts } from './lookups.ts';

export const EC2_NODECLASSES_PATH = '/apis/karpenter.k8s.aws/v1/ec2nodeclasses';

/** EC2NodeClasses by name, reduced to their subnets' zones; an empty store where the AWS provider is not installed. */
export class NodeClassCache {
  readonly reflector: Reflector<NodeClassFacts>;

  constructor(deps: CacheDeps) {
    this.reflector = cacheReflector(deps, EC2_NODECLASSES_PATH, {
      resource: 'ec2nodeclasses',
      keyOf: nameOf,
      slim: nodeClassFacts,
      handlers: { upsert: () => {}, remove: () => {} },
      optional: true,
    });
  }

  /** What a NodeClass's launches are sized with (fitSizing), undefined when it is unknown. */
  sizingOf(name: string, settings: ProviderSettings, seen: InstanceLabels): FitSizing | undefined {
    const sizing = this.reflector.store.get(name)?.sizing;
    return sizing && fitSizing(sizing, settings, seen);
  }

  /** The zones of a NodeClass's subnets, undefined when it is unknown or has none yet. */
  zonesOf(name: string): ReadonlySet<string> | undefined {
    const zones = this.reflector.store.get(name)?.zones;
    return zones && zones.size > 0 ? zones : undefined;
  }
}

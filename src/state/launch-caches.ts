// What the effect's replay of a launch reads from the cluster besides the NodeClaim: the zones
// each EC2NodeClass launches into (its status' subnets), and the labels of a registered node of
// each instance type (every instance-type key Karpenter gave it, GPU and accelerator counts too).
import { INSTANCE_TYPE, type InstanceLabels, type Labels, type NodeView, REGISTERED_LABEL } from '../engine/index.ts';
import { type CacheDeps, cacheReflector } from '../kube/cache-reflector.ts';
import type { Reflector } from '../kube/reflector.ts';
import { nodeClassZones, type NodeClassZones } from './lookups.ts';

export const EC2_NODECLASSES_PATH = '/apis/karpenter.k8s.aws/v1/ec2nodeclasses';

/** EC2NodeClasses by name, reduced to their subnets' zones; an empty store where the AWS provider is not installed. */
export class NodeClassCache {
  readonly reflector: Reflector<NodeClassZones>;

  constructor(deps: CacheDeps) {
    this.reflector = cacheReflector(deps, EC2_NODECLASSES_PATH, {
      resource: 'ec2nodeclasses',
      keyOf: (obj) => (obj as { metadata?: { name?: string } }).metadata?.name ?? '',
      slim: nodeClassZones,
      handlers: { upsert: () => {}, remove: () => {} },
      optional: true,
    });
  }

  /** The zones of a NodeClass's subnets, undefined when it is unknown or has none yet. */
  zonesOf(name: string): ReadonlySet<string> | undefined {
    const zones = this.reflector.store.get(name)?.zones;
    return zones && zones.size > 0 ? zones : undefined;
  }
}

/**
 * The labels of one registered node per instance type (Karpenter copies every NodeClaim label at
 * registration). Handed out as one immutable map, replaced when a type is first seen (a cluster
 * runs a few hundred types at most): the engine's memos key on the map's identity.
 */
export class InstanceTypeLabels {
  private byType: ReadonlyMap<string, Labels> = new Map();

  seen(node: NodeView): void {
    const type = node.labels[INSTANCE_TYPE];
    if (type !== undefined && node.labels[REGISTERED_LABEL] === 'true' && !this.byType.has(type))
      this.byType = new Map([...this.byType, [type, node.labels]]);
  }

  get current(): InstanceLabels {
    return this.byType;
  }
}

// What Karpenter compares an overlay with for one launch (pkg/controllers/nodeoverlay,
// getOverlaidOfferings): `karpenter.sh/nodepool In [pool]`, the NodePool's template labels and
// the instance type's requirements must be compatible with the overlay's, then the offering
// (capacity type, zone, ...) must be too. Node labels from anywhere else (kubelet flags,
// NodePool template *requirements*, hostname, registered) are undefined for it.
import { labelValue } from './normalize.ts';
import type { NodePoolView } from './nodepool.ts';
import type { ProviderKeys } from './providers.ts';
import { combinedOperator, requirementPasses, type Labels, type Requirement } from './requirements.ts';
import { NODEPOOL_LABEL } from './well-known.ts';

/**
 * How Karpenter knows a key for this launch. `label`: the NodePool (or the cloud provider) is
 * unknown, so the node is judged on all its labels (approximate). `offering`: defined by the offering alone, which
 * narrows only NotIn (the instance type leaves it undefined for every other operator).
 * `fixed`: an instance-type key with the same values on every type, compared with all of them.
 */
export type KeyRole = 'nodepool' | 'template' | 'instance-type' | 'fixed' | 'offering' | 'label' | 'undefined';

export class KarpenterView {
  readonly labels: Labels;
  readonly pool: NodePoolView | undefined;
  private readonly provider: ProviderKeys | undefined;

  /**
   * `labels`: the node's with its NodeClaim's on top; `pool`: its NodePool as of the launch;
   * `provider`: the keys of the cloud provider that launched it (undefined: a provider whose
   * keys are unknown, every label but the NodePool's stands in for them).
   */
  constructor(labels: Labels, pool: NodePoolView | undefined, provider: ProviderKeys | undefined) {
    this.labels = labels;
    this.pool = pool;
    this.provider = provider;
  }

  /** `key` is normalized. */
  role(key: string): KeyRole {
    if (this.pool === undefined) return 'label';
    if (key === NODEPOOL_LABEL) return 'nodepool';
    if (Object.hasOwn(this.pool.templateLabels, key)) return 'template';
    if (this.provider === undefined) return 'label';
    if (this.provider.fixedValues?.has(key)) return 'fixed';
    if (this.provider.instanceTypeKeys.has(key)) return 'instance-type';
    if (this.provider.offeringKeys.has(key)) return 'offering';
    return 'undefined';
  }

  /** The value Karpenter compares under the normalized key, undefined when it has none. */
  value(key: string): string | undefined {
    const role = this.role(key);
    switch (role) {
      case 'nodepool':
        return this.pool?.name;
      case 'template':
        return this.pool?.templateLabels[key];
      case 'undefined':
        return undefined;
      default:
        return labelValue(this.labels, key);
    }
  }

  /** The values an `In` requirement on the key could pass with: the index's candidate lookup. */
  valuesFor(key: string): readonly string[] {
    if (this.role(key) === 'fixed') return this.provider?.fixedValues?.get(key) ?? [];
    const value = this.value(key);
    return value === undefined ? [] : [value];
  }

  passes(req: Requirement): boolean {
    // Compatible when the requirement admits any of the type's values (`Intersects`).
    const fixed = this.role(req.key) === 'fixed' ? this.provider?.fixedValues?.get(req.key) : undefined;
    if (fixed) return fixed.some((v) => requirementPasses(req, v));
    const value = this.value(req.key);
    if (value !== undefined && this.role(req.key) === 'offering')
      return combinedOperator(req) === 'NotIn' && requirementPasses(req, value);
    return requirementPasses(req, value);
  }

  passesAll(reqs: readonly Requirement[]): boolean {
    for (const req of reqs) if (!this.passes(req)) return false;
    return true;
  }

  /** A key Karpenter defines for this launch that the node does not carry yet (its labels are not final). */
  missing(key: string): boolean {
    const role = this.role(key);
    return (
      (role === 'instance-type' || role === 'offering' || role === 'label') &&
      labelValue(this.labels, key) === undefined
    );
  }
}

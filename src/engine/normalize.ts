// Karpenter compares labels under their stable names: deprecated keys are rewritten before
// anything is compared, in overlay requirements and in the node's labels alike
// (sigs.k8s.io/karpenter v1.14.1, pkg/apis/v1/labels.go: NormalizedLabels and
// NormalizedLabelValues). The differential test checks these tables against that code.

export const NORMALIZED_LABELS: ReadonlyMap<string, string> = new Map([
  ['failure-domain.beta.kubernetes.io/zone', 'topology.kubernetes.io/zone'],
  ['beta.kubernetes.io/arch', 'kubernetes.io/arch'],
  ['beta.kubernetes.io/os', 'kubernetes.io/os'],
  ['beta.kubernetes.io/instance-type', 'node.kubernetes.io/instance-type'],
  ['failure-domain.beta.kubernetes.io/region', 'topology.kubernetes.io/region'],
]);

/** Per normalized key, value rewrites (v1.14.1 defines none; honoured should a version add some). */
export const NORMALIZED_LABEL_VALUES: ReadonlyMap<string, ReadonlyMap<string, string>> = new Map();

/** Stable key -> the deprecated keys that Karpenter reads as it. */
const ALIASES: ReadonlyMap<string, readonly string[]> = (() => {
  const aliases = new Map<string, string[]>();
  for (const [deprecated, stable] of NORMALIZED_LABELS)
    aliases.set(stable, [...(aliases.get(stable) ?? []), deprecated]);
  return aliases;
})();

export function normalizedKey(key: string): string {
  return NORMALIZED_LABELS.get(key) ?? key;
}

/** `key` must already be normalized. */
export function normalizedValue(key: string, value: string): string {
  return NORMALIZED_LABEL_VALUES.get(key)?.get(value) ?? value;
}

function own(labels: Readonly<Record<string, string>>, key: string): string | undefined {
  // A label may be called `constructor` or `toString`: only the object's own keys are labels.
  return Object.hasOwn(labels, key) ? labels[key] : undefined;
}

/**
 * The value Karpenter compares for the normalized `key`: the label under that key or any of
 * its deprecated aliases. Karpenter turns each label into `In [value]` and intersects those
 * sharing a key, so aliases that disagree leave an empty set; that set passes exactly the
 * requirements a missing key passes, hence undefined.
 */
export function labelValue(labels: Readonly<Record<string, string>>, key: string): string | undefined {
  const direct = own(labels, key);
  let value = direct === undefined ? undefined : normalizedValue(key, direct);
  const aliases = ALIASES.get(key);
  if (aliases === undefined) return value;
  for (const alias of aliases) {
    const raw = own(labels, alias);
    if (raw === undefined) continue;
    const aliased = normalizedValue(key, raw);
    if (value === undefined) value = aliased;
    else if (value !== aliased) return undefined;
  }
  return value;
}

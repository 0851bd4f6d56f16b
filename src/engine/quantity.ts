// Kubernetes resource quantities (k8s.io/apimachinery resource.Quantity's text form) as numbers:
// a decimal with a binary (Ki..Ei) or decimal (n..E) suffix, or an exponent.
const SUFFIXES: Readonly<Record<string, number>> = {
  '': 1,
  n: 1e-9,
  u: 1e-6,
  m: 1e-3,
  k: 1e3,
  M: 1e6,
  G: 1e9,
  T: 1e12,
  P: 1e15,
  E: 1e18,
  Ki: 2 ** 10,
  Mi: 2 ** 20,
  Gi: 2 ** 30,
  Ti: 2 ** 40,
  Pi: 2 ** 50,
  Ei: 2 ** 60,
};

const QUANTITY = /^([+-]?(?:\d+(?:\.\d*)?|\.\d+))(?:([eE][+-]?\d+)|([a-zA-Z]*))$/;

/** The quantity's value; undefined when the text is not a quantity. */
export function parseQuantity(text: string | number | undefined): number | undefined {
  if (typeof text === 'number') return text;
  const m = QUANTITY.exec(text?.trim() ?? '');
  if (!m) return undefined;
  const scale = m[2] !== undefined ? 10 ** Number(m[2].slice(1)) : SUFFIXES[m[3] ?? ''];
  return scale === undefined ? undefined : Number(m[1]) * scale;
}

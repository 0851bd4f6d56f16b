// The replay's memos: NodeClaims list the same types again and again, under the same overlays and
// prices, so what it works out once (a type priced in a world, a launch replayed, a price test) is
// kept and found again. A memo's key is made from every field of its input, so nothing the work
// reads can be left out of it: objects by identity, which is sound because the engine's values
// are never changed (a changed overlay, NodePool or price book is a new object, and the caches
// share one object per distinct value: interned.ts), primitives and sets of them by value.
// Functions are refused: a memo is handed the data its work reads (an immutable book), never a
// way to read something that may change.
//
// Entries are kept per anchor (an object the result belongs to, held weakly: a NodeClaim's
// candidate list, a candidate type), at most `perAnchor` of them; past that the anchor's entries
// are dropped and filled again, so a memo never holds more than its anchors' worth.
const ids = new WeakMap<object, number>();
let nextId = 0;

/** A number per object: its identity in a key. */
export function idOf(o: object): number {
  let id = ids.get(o);
  if (id === undefined) {
    id = nextId++;
    ids.set(o, id);
  }
  return id;
}

function part(value: unknown): string {
  switch (typeof value) {
    case 'string':
      return JSON.stringify(value);
    case 'number':
    case 'boolean':
    case 'bigint':
      return String(value);
    case 'object':
      if (value === null) return 'null';
      // A set of strings (zones, capacity types) is a handful of members: keyed by them, so that
      // equal sets made apart find each other.
      if (value instanceof Set) return `{${[...value].map(part).join(',')}}`;
      return `#${idOf(value)}`;
    default:
      throw new TypeError(
        `a memo's input holds a ${typeof value}: hand it the data its work reads, not a way to read it`,
      );
  }
}

/** The key of an input: each field present, by name, with its value's part. */
export function keyOf(input: object): string {
  let key = '';
  for (const [field, value] of Object.entries(input)) if (value !== undefined) key += `${field}=${part(value)};`;
  return key;
}

/** A single anchor, for a memo whose results belong to no object in particular. */
export const UNANCHORED: object = Object.freeze({});

export class Memo<A extends object, I extends object, O> {
  private readonly byAnchor = new WeakMap<A, Map<string, O>>();
  private readonly work: (anchor: A, input: I) => O;
  private readonly perAnchor: number;

  constructor(work: (anchor: A, input: I) => O, perAnchor: number) {
    this.work = work;
    this.perAnchor = perAnchor;
  }

  of(anchor: A, input: I): O {
    return this.lookUp(anchor, input, keyOf(input));
  }

  /** The same input for many anchors (every candidate type of one world): its key made once. */
  over(input: I): (anchor: A) => O {
    const key = keyOf(input);
    return (anchor) => this.lookUp(anchor, input, key);
  }

  private lookUp(anchor: A, input: I, key: string): O {
    let kept = this.byAnchor.get(anchor);
    if (kept === undefined) {
      kept = new Map();
      this.byAnchor.set(anchor, kept);
    }
    if (kept.has(key)) return kept.get(key) as O;
    const out = this.work(anchor, input);
    if (kept.size >= this.perAnchor) kept.clear();
    kept.set(key, out);
    return out;
  }
}

// One shared object for every equal value. A cluster's 100,000 nodes and NodeClaims carry a
// handful of instance types, zones, NodePools, label sets and requirement sets: kept once each,
// they cost what a handful costs. A table is emptied when it passes its bound, so it never holds
// more than the values seen between two fillings; a value dropped is only no longer shared.
// What a table hands out is shared: readers must not change it (the objects are frozen where
// that is cheap).
export class Interned<T> {
  private readonly table = new Map<string, T>();
  private readonly bound: number;

  constructor(bound: number) {
    this.bound = bound;
  }

  /** The value kept under `key`, else the one `make` returns, kept from now on. */
  of(key: string, make: () => T): T {
    const known = this.table.get(key);
    if (known !== undefined) return known;
    if (this.table.size >= this.bound) this.table.clear();
    const value = make();
    this.table.set(key, value);
    return value;
  }
}

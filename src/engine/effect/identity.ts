// A number per object, for the keys of the replay's caches: an overlay, a NodePool or a price
// book that changes is a new object (the caches replace views, never mutate them), so its number
// changes with it and nothing stale is found.
const ids = new WeakMap<object, number>();
let nextId = 0;

export function idOf(o: object): number {
  let id = ids.get(o);
  if (id === undefined) {
    id = nextId++;
    ids.set(o, id);
  }
  return id;
}

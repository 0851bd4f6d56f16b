// The V8 flags the image runs the watcher with (the Dockerfile's ENTRYPOINT, checked by a test);
// the benchmarks and the tests that start `serve` as a process use the same.
//
// By default V8 lets the young generation grow to 3 x 32 MB semi-spaces whatever the live heap
// (about 50 MB here). With 4 MB semi-spaces `npm run bench -- cluster` measured RSS 231 MB
// instead of 373 MB at 5,000 nodes, and 10.8 instead of 33 MB of growth per 1,000 nodes, with
// reconcile latency unchanged.
export const RUNTIME_NODE_FLAGS: readonly string[] = ['--max-semi-space-size=4'];

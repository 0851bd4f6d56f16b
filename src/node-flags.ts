// The V8 flags the image runs the watcher with (the Dockerfile's ENTRYPOINT, checked by a test);
// the benchmarks and the tests that start `serve` as a process use the same.
//
// By default V8 lets the young generation grow to 3 x 32 MB semi-spaces whatever the live heap
// (about 50 MB here): `npm run bench -- cluster` measured RSS 373 MB at 5,000 nodes. 4 MB
// semi-spaces brought that to 231-286 MB but promoted so much that major GCs showed in the
// webhook's tail: CREATE p99 1.2-1.8 x the null webhook's. 16 MB gave 205-316 MB (three runs)
// and a p99 ratio of 0.94-1.06, like the default's 1.07.
export const RUNTIME_NODE_FLAGS: readonly string[] = ['--max-semi-space-size=16'];

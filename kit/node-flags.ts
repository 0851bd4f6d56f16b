// The V8 flags the image runs the watcher with (the Dockerfile's ENTRYPOINT, checked by a test);
// the benchmarks and the tests that start `serve` as a process use the same. They trade a little
// CPU (more frequent major GCs) for about 80 MB less RSS per replica at 5,000 nodes: the
// measurements are in docs/tuning.md.
export const RUNTIME_NODE_FLAGS: readonly string[] = [
  '--max-semi-space-size=8',
  '--heap-growing-percent=30',
  '--initial-old-space-size=16',
];

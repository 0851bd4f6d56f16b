// The V8 flags the image runs the watcher with (the Dockerfile's ENTRYPOINT, checked by a test);
// the benchmarks and the tests that start `serve` as a process use the same.
//
// The live heap is small (about 25 MB at 5,000 real-size nodes, after a forced GC), but V8 sizes
// its heap for throughput: young semi-spaces that grow to 16-32 MB, an old generation that may
// double before it is collected, and a first old-generation limit far above what is live. The
// garbage that waits meanwhile (most of it the external memory of the watch streams' buffers)
// kept RSS at 190-240 MB with 5,000 nodes. Measured side by side on the same cluster (three
// `serve` processes, 5,000 real-size nodes, then heartbeats; the compiled CLI, Events off):
//
//   flags                                         RSS created / churned   CPU per update
//   --max-semi-space-size=16 (before)             192 / 206 MB            415 us
//   --max-semi-space-size=8                       172 / 196 MB            410 us
//   8, --heap-growing-percent=30,
//      --initial-old-space-size=16 (these)        124 / 126 MB            572 us
//
// (CPU per update is inflated by the three processes sharing two cores; alone, `npm run bench --
// scale` measured 94-138 us.) The extra CPU is the more frequent major GCs, mostly on V8's worker
// threads. With node leases, kubelets post status on a change or every 5 minutes (the kubelet's
// nodeStatusReportFrequency default): about 17 updates a second at 5,000 nodes, plus real
// changes, a fraction of a percent of a core, against 80 MB less per replica. The webhook's tail
// does not show them: `npm run bench -- node-create` gave a CREATE p99 of 0.88 x the null
// webhook's (p50 1.02). (4 MB semi-spaces alone, tried earlier, did show in it: p99 1.2-1.8 x.)
export const RUNTIME_NODE_FLAGS: readonly string[] = ['--max-semi-space-size=8', '--heap-growing-percent=30', '--initial-old-space-size=16'];

// Package bench is flashmend's load generator against a running cluster
// (flashmend bench): GET, PUT or a mix of both on objects of one size, or
// put, get and range reads on the KV store (RunKV), from a number of
// concurrent workers, for a bounded duration, reporting throughput,
// operations per second and latency percentiles.
//
// # What it owns
//
//   - Run: the workers' loop over a client.Client; every GET's bytes are
//     compared with what was put, so the figures are those of verified
//     reads.
//   - Pattern: an object's contents, Size bytes repeating one random block
//     of 1 MiB + 7 B, put through client.PutReader and checked as GetTo
//     streams it (Checker), so a run holds one block per object, not the
//     objects: sizes are bounded by the cluster, not by memory.
//   - RunKV: the same loop over the KV store (KV; kvclient through
//     KVClient): keys spread over 26 letter slices so that they land on
//     every shard cut at letters yet sort in index order, values derived
//     from the key's index, so every get and every range row is checked
//     against what was written without holding the values.
//   - Summarize: the statistics of a run (nearest-rank percentiles), a
//     pure function of the latencies and counts.
//
// # Failure model
//
// An operation that fails is counted in Result.Errors and its latency is
// left out; a GET that returns other bytes than were put fails the run
// (wrong data is never a statistic). The objects a run puts are deleted at
// its end unless Options.Keep is set.
//
// The limits measured next to it (the page-cache read and the file write of
// the same chunk files, loopback TCP, CPU per GB, CPU profiles) are the
// datapath experiment's (internal/experiments, docs/results/datapath.md).
// Not yet: the emulated device's raw read in the same run; see issue 14.
package bench

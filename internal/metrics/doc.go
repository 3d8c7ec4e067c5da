// Package metrics exports a flashmend process's state as Prometheus metrics
// (github.com/prometheus/client_golang: the Prometheus project's own Go
// library, from the Go module proxy, so that the exposition format and its
// escaping are exactly what Prometheus and its tools parse).
//
// # What it owns
//
//   - A Registry per process (no global registry: tests run many in one
//     binary) and its HTTP handler and server (/metrics).
//   - Collectors that read, at scrape time, the counters the system already
//     keeps: a node's Stats and durable repair history (what 'ctl repairs'
//     prints), its KV replicas' ReplicaStats and raft state (what 'kv status'
//     prints), the scrubber's ScrubStats. No count is kept twice: a metric
//     and the command that prints the same figure read the same counter.
//   - The metrics no counter held before, fed by hooks the owning packages
//     offer: repair latencies and bytes (client.Options.OnRepair for chunk,
//     vote and EC-row repairs; kv.Options.OnRepair for KV patches and
//     rebuilds) and request latency and bytes by operation (gRPC server
//     interceptors, node.Config.ServerOptions).
//   - Federation: the coordinator's dashboard's view of a multi-host
//     cluster, this process's families and the flashmend_ families every
//     live node returns over gRPC (node.Config.Metrics, Registry.Text), at
//     each gather. A node that does not answer is named in the error and
//     left out; the rest is served.
//
// # Naming
//
// Names follow Prometheus conventions: a flashmend_ prefix, base units in
// the name (_seconds, _bytes), _total on counters. Figures kept per node
// carry a node label; per KV replica, node and shard. Repairs are counted
// where they land:
//
//   - flashmend_repairs_total{node,kind}: what each node stored or rebuilt.
//     kind is chunk (a chunk rewritten from redundancy), chunk_missing (a
//     chunk the node did not have, re-created), metadata (local metadata
//     copies rewritten), die (a failed die's contents repaired), kv_patch
//     (a KV replica's damaged ranges patched from peers), kv_block_merge
//     (a block damaged on every replica put together from their copies)
//     and kv_rebuild (a whole replica re-created).
//   - flashmend_client_repairs_total{kind,result}: the repair writes this
//     process's clients (the scrubber, gateways) made, by how the good data
//     was found: chunk (a replica that verified), vote (sector-wise majority
//     vote over replicas that all failed), ec_row (Reed-Solomon row
//     reconstruction).
//
// Counters from a node's durable repair history survive restarts (they
// start at the history's totals); counters of this run's work (bytes read,
// injected flips) start at zero. Both only grow within a process, which is
// all Prometheus's rate() needs.
//
// # Failure model
//
// A collector reads in-memory counters only: a scrape never touches the
// devices or the network, so it cannot fail or stall on a damaged store.
// A node or replica that is not running is absent from the scrape.
package metrics

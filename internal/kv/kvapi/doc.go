// Package kvapi is what the KV store's processes and its users agree on,
// without the replica behind it: the shard map, the limits on input, and
// the error reasons and their gRPC form. The replica core (internal/kv),
// its server (kvserver), the Go client (kvclient), the node and the
// coordinator's layout share it; a client links neither Pebble nor raft.
//
// # What it owns
//
//   - The shard map: ShardSpec (a shard's key range and its replicas by
//     raft ID and node), Layout (shards sorted by start key, covering the
//     key space), UniformLayout, and its wire form (Proto,
//     LayoutFromProto).
//   - The limits on input (MaxKeyBytes, MaxValueBytes, MaxBatchOps,
//     MaxScanRows, the scan page bounds) and their checks (Validate*).
//   - The KV error reasons a client acts on (Error: not leader with a hint,
//     condition failed, transaction aborted, replica unavailable) and their
//     gRPC form (ToStatus, FromStatus; corruption travels as a reason and
//     comes back as base.IsCorruption).
//
// # Invariants
//
//   - A Layout that passed Validate (LayoutFromProto validates) covers the
//     whole key space: its first shard starts at the empty key, each next
//     one where the previous ends, the last is unbounded; shard ids are
//     unique and non-zero; no node holds two replicas of one shard.
//   - FromStatus(ToStatus(err)) keeps err's class: its Error reason (and
//     leader), invalid argument, corruption.
//
// # Failure model
//
// Pure functions and values: bad input is an invalid-argument error
// (base.InvalidArgumentf) and nothing else happens; a gRPC error without a
// KV detail comes back from FromStatus as it is.
package kvapi

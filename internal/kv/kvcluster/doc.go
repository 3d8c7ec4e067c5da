// Package kvcluster runs KV clusters in one process, for tests, experiments
// and `flashmend kv serve` / `kv demo`: real kvserver Nodes behind real gRPC
// servers on 127.0.0.1 ports chosen at run time, on one file system per
// node (memory, plain files, or internal/sdfvfs over emulated flash).
//
// # What it owns
//
//   - Cluster (Start): N nodes, every shard replicated on every node
//     (kvapi.UniformLayout), stopped, crashed (engines closed without a flush)
//     and restarted on their old address and files.
//   - RunRepairDemo: DIRECT's KV experiment in miniature: load a 3-node
//     cluster, damage one sstable data block on a follower, keep reading
//     through the client, and report how the damage was repaired.
//
// # Failure model
//
// A node that fails to start fails Start (or RestartNode); the others are
// stopped. Nothing here is a deployment: there, the storage nodes of
// internal/node host the KV service (node.Config.KV) with the
// coordinator's placement.
package kvcluster

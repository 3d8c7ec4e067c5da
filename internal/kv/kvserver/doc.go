// Package kvserver hosts the replicas of internal/kv on a node and serves
// them over gRPC (proto/flashmend/kv).
//
// # What it owns
//
//   - Node: one node's replicas of every shard it holds (multi-raft), each
//     opened in Dir/shard-N on the node's file system behind
//     internal/guardfs (Pebble's own files protected on any file system).
//     A replica that cannot open from its files is moved aside
//     (Dir/shard-N.failed-T) and replaced by a fresh one that rebuilds from
//     its peers; Failures lists them. So is a replica that fail-stops while
//     the node runs (its engine failed, or its raft log could not persist:
//     kv.ReplicaConfig.OnFail): it is closed, its files moved aside, and
//     the fresh replica's open retried (100 ms doubling to 5 s) until it
//     opens or the node stops. One set-aside copy is kept per shard (the
//     newest). A replica that fail-stopped because its device had no
//     space is not replaced but reopened from its own files (intact: the
//     refused write changed nothing synced), retried the same way until
//     the device takes writes again; only if its files then do not open
//     is it set aside (no copy kept: it would take the room the fresh
//     replica needs) and replaced. (Replacing it at once left a shard
//     whose devices filled on two of three nodes with two fresh replicas
//     that vote for no one and no leader, for good.) Meanwhile
//     requests for the shard on this node fail as unavailable and the
//     shard's other replicas serve. Config.OnFailure hears of each.
//   - The raft transport (Node implements kv.Transport): messages of all
//     shards batched per destination node in one Replication.Send RPC
//     (at most maxBatchBytes each, at most maxPeerQueue queued per peer,
//     more dropped: raft retransmits), patches, and a peer's state or raft
//     entries fetched on demand.
//   - The KV, Replication and KVAdmin gRPC services. Service registers them
//     on a gRPC server before the Node exists (internal/node's
//     Config.RegisterServices hook: a node registers its services before it
//     serves, while the KV Node needs the shard map and every peer's
//     address) and serves it once attached; until then requests fail as
//     unavailable. Every handler validates its input first.
//
// # Invariants
//
//   - A request reaches a replica only if its keys lie in the replica's
//     shard; errors travel as kvapi.ToStatus codes with an ErrorDetail.
//
// # Failure model
//
// A peer may be unreachable: raft messages go on one stream per peer node
// (transport.go), and a batch that cannot be sent within two seconds is
// dropped and the stream opened again (raft retransmits; the patch protocol
// retries), fetches return the error to the
// replica, which tries another peer. A peer that restarted elsewhere (a
// new port) is found again: a call that finds it unavailable makes the next
// one ask Config.Resolve for its address. Membership is static for the life
// of a Node (Config.Layout).
package kvserver

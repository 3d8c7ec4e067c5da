// Package kv is flashmend's replicated key-value store: the key space is
// split into range shards, each shard is a raft group (go.etcd.io/raft/v3
// RawNode) of replicas on distinct nodes, and each replica's state machine is
// its own Pebble instance on any vfs.FS. It implements DIRECT's KV recovery
// (paper 000 section 4.1, 001 sections 4.1-4.2, ZippyDB-DIRECT).
//
// # What it owns
//
//   - Node: one node's replicas of every shard it holds (multi-raft), the
//     raft transport (messages of all shards batched per destination node in
//     one Replication.Send RPC), and the KV, Replication and KVAdmin gRPC
//     services (proto/flashmend/kv). Service registers them on a gRPC
//     server before the Node exists (internal/node's
//     Config.RegisterServices hook) and serves it once attached.
//   - Replica: a raft loop goroutine (the pure RawNode; it persists each
//     Ready to internal/raftlog before sending) and an apply worker that
//     applies committed entries to Pebble in log order. The apply worker is
//     the state machine's only writer, and may block at a patch entry
//     without stalling raft.
//   - Client: routes keys to shards, finds leaders, and retries reads on
//     another replica when one reports corruption; consistency per read
//     (Strong: read index on the leader or a follower; AfterIndex: any
//     replica that applied a write's index; Eventual: any replica); atomic
//     batches and compare-and-set within a shard; optimistic transactions
//     on a leader's Pebble snapshot, validated at apply time.
//   - LocalCluster: in-process nodes on loopback gRPC (tests, CLI,
//     experiments).
//
// # DIRECT in the KV store
//
//  1. Detect, re-read, isolate: Pebble's EventListener.DataCorruption names
//     the file and (in its error) the block handle offset/length. The
//     replica first re-reads that block from the file and checks its
//     checksum (rereadBlock, MISSION.md "re-read before repairing"): a
//     block that verifies was hit by a transient flip on the way; it is
//     counted (ReplicaStats.TransientErrors) and not repaired, and the read
//     that failed re-reads it too (get and scan retry a read that fails as
//     corruption readAttempts times, resuming a scan past its last row;
//     Pebble never caches a block that failed its checksum). Only damage
//     that persists on the re-read goes on: isolateCorruption opens the
//     file with the sstable reader, and the last
//     readable key before the damage and the first after it (the healthy
//     neighbouring blocks) bound the corrupt data block's key range. Error
//     amplification is one data block: other keys of the file, the shard
//     and the node keep serving. Reads of the range on that replica fail as
//     corruption (never wrong data) and the Client retries another replica.
//  2. Local metadata: internal/sdfvfs duplicates MANIFEST, OPTIONS, CURRENT
//     and (with sdfvfs.SSTMetadataRanges) every sstable's metadata blocks;
//     raft log records are written twice (internal/raftlog).
//  3. Recovery through the log (Figure 5): the damaged replica proposes a
//     PatchRequest, its own raft entry, naming the ranges and itself. Every
//     healthy replica, applying that entry, scans the ranges at exactly that
//     point of the log and sends the rows with a CRC32C; the damaged
//     replica, applying it, waits for the first verifying patch and installs
//     it atomically with IngestAndExcise (keys absent from the patch are
//     deleted: implicit deletes), then goes on applying the log. Writes to
//     the range ordered before the entry are in the patch; those after it
//     are applied after the ingest. All snapshots of the repaired replica are
//     invalidated: its open transactions abort and the client re-runs them.
//     A patch builder (and a rebuild source, FetchState) re-reads past
//     transient flips like any scan; one whose own copy is damaged on disk
//     stays silent. With no patch
//     within Options.PatchTimeout the replica is rebuilt from a peer's whole
//     state at an applied index at least the entry's (FetchState).
//  4. Cascading errors: an entry whose conditions a replica cannot evaluate
//     (they read a damaged block) is never guessed: that replica rebuilds
//     from a peer that applied it; the proposer reports the outcome as
//     unknown. Conditions re-read past transient flips first, so only
//     damage that persists gets here (counted: ReplicaStats.ApplyFailures).
//     A rebuild retries every peer until one serves the state; it never
//     leaves the replica out for good.
//  5. Baseline RepairCrash: the first corruption takes the replica down (no
//     reads), its Pebble is deleted, and it is re-replicated whole.
//
// The crash baseline (RepairCrash) does not re-read: it is the paper's
// baseline, and goes down at the first report, transient or not (its
// rebuild sources do re-read, so the re-replication completes).
//
// What remains: a persistent report without a block handle, or naming a
// non-data block, is still repaired as the file's key range; a report whose
// re-read fails rereadAttempts times in a row through transient flips alone
// is taken as persistent (then isolation's own reads, which also re-read
// past transient flips, decide the range); a
// patch ingest (IngestAndExcise) that fails on a transient flip is repaired
// by a rebuild, not retried; a raft log write that fails (handleReady) takes
// the replica out of its group (logFailed) until restart: that is a write
// failure, not a corruption.
//
// Compactions that read a damaged block fail and install nothing; outputs
// that cover a range under repair are superseded by the excise.
//
// A background scrubber (Options.ScrubInterval) verifies every live
// sstable's block checksums, so damage in cold data is repaired too; ranges
// already patched (the damage stays in the physical file under virtual
// sstables) are not repaired again.
//
// NB: every excise is verified (checkExcise): Pebble finds the bounds of
// the remainders of a partly excised table by seeking in it, and a seek
// that hits another damaged block drops the remainder silently. A lost
// remainder turns the patch into a rebuild.
//
// # Invariants
//
//   - Invariant: a replica's applied index is stored in Pebble atomically
//     with the effects of the entry (one batch, or an ingest followed by
//     the index), so a restart re-applies exactly the missing entries.
//   - Invariant: a write's result reaches the client only after the entry
//     is applied; a failure after the proposal may be in the log is
//     reported as an unknown outcome and never re-sent by the Client.
//   - Invariant: a read never returns data from a range the replica is
//     repairing.
//
// # Failure model
//
// Bad input (empty or oversized keys and values, unknown shards, keys
// outside a shard, empty ranges, oversized limits) is an invalid-argument
// error and changes nothing. A node may stop at any time; acknowledged
// writes are in a quorum's raft logs. Sstable corruption is repaired as
// above; raft log corruption of one copy of a record is repaired by
// internal/raftlog; both copies lost is data loss at that replica (it must
// be rebuilt). Membership is static (Layout); the coordinator's placement is
// not used yet. Raft logs are compacted every Options.LogCompactEntries at a
// snapshot point; a follower behind the compaction receives the point and
// fetches the state from a peer.
package kv

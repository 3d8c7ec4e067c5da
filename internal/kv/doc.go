// Package kv is the core of flashmend's replicated key-value store: a range
// shard's replica, which runs a raft group member, a state machine (its own
// Pebble instance on any vfs.FS) and DIRECT's KV recovery (paper 000
// section 4.1, 001 sections 4.1-4.2, ZippyDB-DIRECT), and does their I/O.
// Its pieces live in subpackages, each one idea:
//
//   - internal/kv/raftnode: the raft member (the RawNode's loop, the vote
//     floor, leadership handoff, the raft log's repair from peers at open);
//   - internal/kv/patch: the repair state as a pure state machine (ranges
//     refused to reads, patch requests and their proposals, the peers'
//     pieces assembled range by range, what a patch entry settles);
//   - internal/kv/engine: the state machine (Pebble, the applied record,
//     the digest) and the block-level tools of the recovery (re-read,
//     isolate, patch ingest, block merge);
//   - internal/kv/keyspan: user key ranges and their set operations (pure);
//   - internal/kv/kvapi: what servers and clients agree on (the shard map,
//     the limits on input, the error reasons and their gRPC form);
//   - internal/kv/kvserver: the node that hosts replicas and serves them
//     over gRPC; internal/kv/kvclient the Go client; internal/kv/kvcluster
//     an in-process cluster and the repair demo.
//
// # What it owns
//
//   - Replica (OpenReplica): it runs its raft node (raftnode.Node, whose
//     loop persists each Ready to internal/raftlog before sending) and an
//     apply worker that applies committed entries to Pebble in log order.
//     The apply worker is the state machine's only writer, and may block
//     at a patch entry without stalling raft. The replica reaches its
//     peers only through a Transport its host gives it.
//   - The request semantics the services expose: consistency per read
//     (Strong: read index on the leader or a follower; AfterIndex: any
//     replica that applied a write's index; Eventual: any replica); atomic
//     batches and compare-and-set within a shard; optimistic transactions
//     on a leader's Pebble snapshot, validated at apply time.
//   - The I/O of DIRECT's recovery around the pure patch.Tracker: Pebble's
//     corruption reports, re-read and isolation, proposing patch requests,
//     scanning and sending pieces, waiting for them, ingesting, block
//     merge, rebuilds from a peer's state, and the background scrubber.
//   - Time: every tick, timeout and backoff is on Options.Clock (base.After,
//     base.NewTicker); calls to peers carry wall-clock gRPC deadlines.
//
// # Where a replica keeps what (every file, and what protects it)
//
//   - Raft log (Dir/shard-N/raft): internal/raftlog, two copies in small
//     checksummed fragments merged copy by copy; entries lost in both are
//     fetched from peers at open (FetchEntries) by raft's own rules, never
//     mistaken for a torn tail; what no peer holds is cut, under a vote
//     floor (the replica does not help elect a leader lacking what it
//     acknowledged, and moves past the leader's term at first contact so
//     the next leader probes its log afresh). It is the shard's
//     write-ahead log.
//   - Engine (Dir/shard-N/pebble): Pebble without its WAL (DisableWAL: the
//     raft log already holds every write, duplicated and repairable, where
//     a Pebble WAL would be one more unprotected copy); what Pebble holds
//     durably is what it flushed, and a restart replays the raft log from
//     the flushed applied index. The raft log is compacted only up to an
//     index a completed flush made durable (flushAndCompact), so the log
//     always covers what the engine may have lost. Every file goes through
//     internal/guardfs: MANIFEST, OPTIONS and markers in three framed
//     copies, sstables with a sidecar of their size and metadata blocks.
//   - The applied record (index, term, digest of the rows) in two copies at
//     the two ends of the key space, written with every entry's effects.
//     Unreadable in both: the replica takes a peer's state.
//
// # DIRECT in the KV store
//
//  1. Detect, re-read, isolate: Pebble's EventListener.DataCorruption names
//     the file and (in its error) the block handle. The replica first
//     re-reads that block and checks its checksum (engine.RereadBlock, with our
//     own check: Pebble's searches every single-bit flip of a damaged
//     block, ~130 MB of CRC per 4 KiB): a block that verifies was hit by a
//     transient flip on the way; it is counted (TransientErrors) and not
//     repaired, and the read that failed re-reads it too. Damage that
//     persists is isolated block by block (engine.IsolateBlocks): the table's
//     index gives each data block's separator, so each run of adjacent
//     damaged blocks becomes one key range, without reading its
//     neighbours. A range's excise span keeps the separators on both sides
//     (Pebble seeks at an excise's bounds to cut the remainders and a seek
//     that lands in a damaged block drops the remainder); what the replica
//     lost leaves out the left separator key when it reads back, or when
//     the table provably does not hold it (a separator Pebble shortened:
//     engine's sepAbsent), so replicas damaged next to each other do not
//     each refuse the key between them. Such a key is read, for a patch,
//     with the damaged table left out (every table carries a random id as
//     a block property: engine/tableid.go); otherwise every read of it
//     seeks into the damaged block. Error amplification is one data block. Reads of a range
//     under repair fail as corruption (never wrong data) and the client
//     (kvclient) retries another replica.
//  2. Recovery through the log (Figure 5): the damaged replica proposes a
//     PatchRequest, its own raft entry, at once (re-proposed within 50 ms
//     if raft dropped it for want of a leader). Every other replica,
//     applying that entry, scans the ranges at exactly that point of the
//     log, leaving out its own damaged ranges, and sends the pieces it read
//     with a CRC32C. A damaged replica that leads first hands its
//     leadership to its most caught-up follower (handOffLeadership): its
//     apply worker is about to wait at the patch entry, and a leader that
//     does not apply answers no write. The damaged replica, applying it,
//     waits until each
//     range is covered piece by piece (helix recovery: when every replica
//     is damaged somewhere, a range can still come together from several)
//     and installs it atomically with IngestAndExcise (implicit deletes),
//     then reads the range back against the patch and checks that the
//     excise kept every row around the span. A range no replica could send
//     in PatchTimeout is damaged on every replica: its blocks are put back
//     together from the replicas' damaged copies of the same table (block
//     merge, DIRECT's sector merge for a data block: engine.MergeBlock
//     takes a copy only if it provably is this block, votes byte by byte,
//     or tries the few combinations of the bytes the copies disagree on
//     against the block checksum) and written over the damaged copy in
//     place; the engine is then checked against its digest once no range
//     is under repair. An excise
//     that cuts a table damaged where Pebble seeks for the bound of its
//     remainder loses that remainder: the engine seeks there first and,
//     if it meets damage, does not excise but names the span grown over
//     the damaged blocks next to it, to patch as one range
//     (engine.ExciseLossError); reads around each span are refused while
//     it is excised, and what a table lost anyway stays under repair and
//     is patched in turn, not rebuilt. What merge cannot repair stays under
//     repair and is requested again at a later entry, after 100 ms
//     doubling to PatchTimeout (a peer damaged there too is usually
//     patched within moments): patching is retried, not replaced by a
//     rebuild (which would need a peer whose whole state reads back).
//     A patch request proposed to a leader that is no longer leader, or
//     whose proposal did not commit within lostProposalAfter (two
//     election timeouts, at least 500 ms; doubling with each resend), was
//     lost in a leader change and is proposed again; one whose entry committed (seen by the raft loop) is never
//     proposed again, however long its apply waits. All snapshots of the
//     repaired replica are invalidated: its open transactions abort.
//  3. No silent divergence: the digest (row count, wrapping sum and xor of
//     a hash of every row) is updated with every write (old value out, new
//     in) and stored with the applied index; at open a scan of the engine
//     must reproduce it (verifyEngine), and a rebuilt state must match its
//     source's. A replica whose engine lost or gained rows (a MANIFEST
//     that went back in time) never serves: it is rebuilt (reason
//     "state machine diverged from its digest"). Reads wait for the first
//     scan; a scan that meets damage cannot decide until patches land, and
//     the replica serves meanwhile (every read is still checked against
//     its block checksums), and neither can a scan while some range is
//     under repair (its rows are missing until patched): the check waits
//     for the repairs, up to its deadline. After a block merge the check
//     runs again the same way.
//  4. Cascading errors: an entry whose conditions a replica cannot evaluate
//     (they read a damaged block) is never guessed: that replica rebuilds
//     from a peer that applied it; the proposer reports the outcome as
//     unknown. Every rebuild is counted by reason (ReplicaStats.
//     RebuildReasons, `kv status`).
//  5. One replica's failure is only that replica's: a replica that cannot
//     open has its files moved aside by its host (kvserver.NewNode) and a
//     fresh replica takes its place (ReplicaConfig.Replaced; the host's
//     Failures says what failed); it votes for no one and serves no read
//     until it holds every committed entry (a barrier entry it proposed has
//     applied), and catches up from the leader's log or a peer's state.
//     A replica whose engine fails while it runs (a fatal Pebble error: a
//     MANIFEST or marker write the device refused) fail-stops: its loops
//     end, it takes no further part in raft, and its reads and writes
//     fail as REPLICA_UNAVAILABLE saying why (Replica.Failed); its host
//     (ReplicaConfig.OnFail, kvserver) closes it, sets its files aside and
//     opens a fresh replica in its place, retried until the device takes
//     writes again; a replica that failed because its device had no space
//     is reopened from its own files instead (they are intact, and two
//     fresh replicas of one shard would leave it with no leader). The
//     node's other replicas are untouched.
//  6. Baseline RepairCrash: the first corruption takes the replica down (no
//     reads), its Pebble is deleted, and it is re-replicated whole.
//
// The crash baseline (RepairCrash) does not re-read: it is the paper's
// baseline, and goes down at the first report, transient or not.
//
// A background scrubber (Options.ScrubInterval, and once after open)
// verifies every data block of every live sstable (our own checksum), so
// damage in cold data is repaired before a read needs it.
//
// What remains: a write whose old value sits in a damaged block leaves the
// digest unknown until the next rebuild (checked no more at open); an
// applied record lost in both copies costs a rebuild; a range every
// replica lost stays unreadable (an explicit error) until an operator
// restores it; the raft log is cut, under a vote floor, where every replica
// lost the same entries, and the shard then waits for a replica that has
// them (at UBER 1e-5 a 16 KiB entry is lost in both copies of one log
// with probability about 5%).
//
// # Invariants
//
//   - Invariant: a replica's applied record is stored in Pebble atomically
//     with the effects of the entry (one batch, or an ingest made durable
//     before the record), so a restart re-applies exactly the missing
//     entries, and the raft log is never compacted past what the engine
//     holds durably.
//   - Invariant: a write's result reaches the client only after the entry
//     is applied; a failure after the proposal may be in the log is
//     reported as an unknown outcome and never re-sent by kvclient.
//   - Invariant: a read never returns data from a range the replica is
//     repairing, from an engine that does not match its digest, or from a
//     replica that lost raft entries it had acknowledged.
//   - Invariant: a patch holds, for each range, rows read at the patch
//     entry on replicas whose reads of that range verified.
//   - In invariants builds the applied record is decoded back before it is
//     written (checksum before the write); both copies are verified when
//     read, and a patched range is read back against the patch after its
//     ingest (verify after the read).
//
// # Failure model
//
// Bad input (empty or oversized keys and values, unknown shards, keys
// outside a shard, empty ranges, oversized limits or pages) is an
// invalid-argument error and changes nothing. A node may stop or crash at
// any time; acknowledged writes are in a quorum's raft logs. Any single
// fault in any file of a replica (zeroed, junk, flipped, truncated or
// deleted: TestKVSingleFaultSweep, `flashmend experiments run
// kv-fault-sweep`) leaves the replica open and repaired, or replaced and
// rebuilt, while the others serve; bit rot in every file of every replica
// at UBER up to 1e-6 is repaired by patches and raft log entries from
// peers (`flashmend experiments run uber-restart-kv`). Membership is static
// (kvapi.Layout): the coordinator places the shards once (coord KVLayout)
// and a replica never moves to another node. Scans are paged by rows and
// bytes (kvclient's ScanEach). FetchState sends a whole shard in one
// message (at most 1 GiB).
package kv

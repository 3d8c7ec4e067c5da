// Package raftlog is the durable, self-protecting raft log of one KV shard
// replica. It implements raft.Storage (go.etcd.io/raft/v3) for the RawNode and
// persists what a Ready hands out (HardState, entries, snapshot) before the
// replica sends messages or acknowledges anything.
//
// # What it owns
//
// A directory on any Pebble vfs.FS holding generations of log files,
// raftlog-GGGGGG.0 and raftlog-GGGGGG.1: both copies of a generation hold the
// same byte stream, the local duplication DIRECT adds to each Paxos entry
// (DIRECT 000 section 4.1.2, 001 section 4.2: "an additional entry per Paxos
// entry"). A generation starts with the log's whole state (base, local
// snapshot point, hard state, vote floor, then one record per retained
// entry); later records are appends. At every Open, and when the files grow
// past Options.RewriteThresholdBytes, the state is written into generation
// G+1 under temporary names, synced, and renamed into place; the generation
// before it is kept as a second local source, older ones are removed. Files
// are only created, appended to and renamed (never rewritten in place), so the
// log runs on append-only file systems such as internal/sdfvfs. The log is
// kept short by its user: the KV replica compacts it up to the index its
// state machine holds durably.
//
// # Format: small protection units, merged copy by copy
//
// The files are cut into blocks (Options.BlockBytes, 512 B by default) and
// every record is written as fragments that never cross a block (frame.go),
// each with a CRC32C over its generation, file offset, type and data. No
// checksum covers more than one block, and a record is as small as its
// content (one entry, one hard state, one snapshot point), so a bit flip
// loses at most one record of one copy. Open merges the copies fragment by
// fragment: a fragment that fails in one copy is read from the other, so a
// flip in each copy at different places loses nothing. The checksum binds
// the fragment's identity, so a reader resynchronizes after damage by trying
// every offset of the block: stale or misdirected bytes never verify.
//
// # Repair from peers (Protocol-Aware Recovery)
//
// Where both copies lost the same fragment, replay knows only that records
// of unknown kind were lost at that point (Damage). Entries written before
// the loss above the commit index known then may have been replaced by the
// lost records (raft overwrites only uncommitted entries), so they become
// holes up to the next intact entry; entries written after the loss are
// newer than anything in it and stay. Such a log opens unsealed: raft does
// not see it until it is whole. The replica first drops what its state
// machine already holds (DiscardApplied), then asks its peers
// (RepairSpan, PeerEntries on their side, Offer on ours). Offer takes only
// entries raft's own rules prove equal to ours:
//
//   - a hole followed by our intact entry is filled from a peer whose entry
//     there has the same term (log matching: the logs agree up to it);
//   - entries at or below a peer's commit index are committed, the same on
//     every replica that holds them, and replace an uncertain run.
//
// A committed entry lost in both copies is therefore fetched from a peer,
// never mistaken for a torn tail, and never takes the replica down. What no
// peer can supply (an uncommitted tail no one else holds) is cut off by
// GiveUp; raft's leader then replicates the log again.
//
// Because the replica may have acknowledged entries it lost, cutting them
// sets a vote floor (FAST'18, Protocol-Aware Recovery for Consensus-Based
// Storage: a node with a faulty log must not help elect a leader that lacks
// what it acknowledged). Until its log is again at least as up to date as
// before the damage, or it has applied a barrier entry it proposed after the
// floor was set (ClearFloor), the replica grants no vote to a candidate
// whose log is behind the floor and does not campaign. The floor is
// durable.
//
// A lost hard state (a record lost after the last intact one) may have held
// a newer term and vote. The replica then votes for no one in a term it may
// have voted in: its term is raised past every term the lost bytes could
// have reached (one per smallest hard state record) and its vote cleared.
// Raising a term is always safe; it costs at most an election. A log that
// lost everything keeps a floor above every log until its barrier applies.
//
// # Invariants
//
//   - Invariant: copy 0 of every record Save writes is synced before Save
//     returns; the caller sends raft messages only after Save returns (the
//     leader's appends excepted, see internal/kv/raftnode). Copy 1 gets the
//     same bytes only after copy 0 is synced, and is written and synced
//     behind Save by its own goroutine (copyWriter, lag.go), several Saves
//     to a sync under load; Close waits for it, and its failure fails the
//     next Save. Before, Save synced copy 1 too, and a put waited for two
//     fsyncs in series on each replica of its majority. A
//     state that moves only the commit index is not written by its own
//     Save (raft.MustSync is false: the commit index is volatile in raft,
//     and etcd's WAL does not sync it either): it rides with the next
//     record written, and at start the replica raises the commit index to
//     what its state machine applied (CommitAtLeast). Before, every
//     proposal cost each replica a second pair of syncs for its commit.
//   - Invariant: the in-memory image equals the replay of the records on
//     disk; in test builds (-tags invariants) every record is decoded back
//     before it is written, and every append and every rewritten
//     generation is read back and parsed after it is synced.
//   - Invariant: a sealed log has no holes; its entries are contiguous from
//     the base (a dummy entry carrying the term of the compacted prefix).
//   - Invariant: an entry Open keeps is the entry written at that index,
//     never a stale or foreign one (TestDamagedReplayNeverLies checks it
//     against the true history over random damage).
//
// # Failure model
//
//   - One copy of a fragment damaged: read from the other copy, counted in
//     Stats.FragmentsRepaired; the log is rewritten into a new generation.
//   - Both copies damaged, intact records after: holes and Damage, repaired
//     from peers (Stats.EntriesFilled) or cut with a vote floor.
//   - Both copies unreadable at the end with no intact fragment after them:
//     a torn tail from a crash during Save (never acknowledged); dropped and
//     counted in Stats.TornTailBytes. A record damaged after it was synced,
//     with nothing written after it, looks the same; its probability is the
//     square of one copy's (a hard state record is about 20 bytes). So does
//     a record Save returned for whose copy 1 a crash caught unsynced (about
//     one fsync, 0.2 ms, after Save) and whose copy 0 was then damaged.
//   - A crash during a rewrite leaves temporary files, removed at Open; the
//     previous generation is used.
//   - The newest generation unreadable as a whole: the previous one is used
//     (Stats.FellBack) and the tail and hard state are treated as lost.
//   - A failed write or sync: the log refuses further use (its files are in
//     an unknown state); Open recovers every acknowledged record.
//
// Residual risks: the term bump assumes the lost bytes held only hard
// states' worth of term changes; a replica whose whole log is lost trusts
// that no election happened at a term above the leader that reaches it
// first (a partition during its restart could otherwise let it vote twice).
package raftlog

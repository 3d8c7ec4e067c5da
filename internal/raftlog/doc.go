// Package raftlog is the durable, self-protecting raft log of one KV shard
// replica. It implements raft.Storage (go.etcd.io/raft/v3) for the RawNode and
// persists what a Ready hands out (HardState, entries, snapshot) before the
// replica sends messages or acknowledges anything.
//
// # What it owns
//
// A directory on any Pebble vfs.FS holding one generation of log files,
// raftlog-GGGGGG.0 and raftlog-GGGGGG.1. Both files hold the same record
// sequence at the same offsets: every record is written twice, the local
// duplication DIRECT adds to each Paxos entry (DIRECT 000 section 4.1.2, 001
// section 4.2: "an additional entry per Paxos entry"). A generation starts
// with a state record (snapshot, log base, entries, HardState); later records
// are updates. At every Open, and when the files grow past
// Options.RewriteThresholdBytes, the whole state is written into generation
// G+1, synced, and older generations are removed. Files are only created and
// appended to (never rewritten in place), so the log runs on append-only
// file systems such as internal/sdfvfs.
//
// # Record format (per copy)
//
//	magic   uint32  0x464d524c ("FMRL")
//	crc     uint32  CRC32C (Castagnoli) over generation, file offset, kind,
//	                length and payload
//	kind    uint8
//	length  uint32  payload bytes, at most Options.MaxRecordBytes
//	payload
//
// The checksum covers the record's identity (generation and offset), so a
// misdirected or stale write is caught like a bit flip.
//
// # Invariants
//
//   - Invariant: both copies of a record are synced before Save returns; the
//     caller sends raft messages only after Save returns.
//   - Invariant: the in-memory state equals the replay of the records on disk.
//   - Invariant: entries held are contiguous: firstIndex-1 is the log base
//     (a dummy entry carrying the term of the compacted prefix).
//
// # Failure model
//
//   - One corrupted copy of a record: read from the other copy, counted in
//     Stats.RecordsRepaired, and the log is rewritten into a new generation so
//     both copies are whole again. No committed entry is lost.
//   - Both copies unreadable at the end of the files and no valid record after
//     them: a torn tail from a crash during Save (never acknowledged); dropped
//     and counted in Stats.TornTailBytes.
//   - Both copies unreadable with a valid record after them: corruption in the
//     middle of the log; Open fails with base.ErrDataLoss (the replica must be
//     rebuilt from its peers).
//   - A crash during a rewrite leaves a new generation whose first record is
//     not whole: it is ignored and the previous generation is used.
package raftlog

// Package direct holds the DIRECT repair decisions for objects (DIRECT 000
// sections 4.2.1-4.2.2 and 5; 001 section 4.2) as pure functions: what the
// replicas or shards of one chunk returned goes in, the data to return (or an
// explicit error) and the repairs to make come out. It does no I/O and
// depends on no store, flash or sdf package: the loops that read and repair
// live in internal/client, the chunk service that stores chunks in
// internal/objstore.
//
// # What it owns
//
//   - The chunk format: an object version is cut into 64 KiB chunks
//     (ChunkSize); every 512 B sector (SectorSize) has a CRC32C that also
//     covers the chunk's identity (ChunkID: object, version, shard, chunk
//     index), so a misdirected or misplaced write fails verification (Sums,
//     BadSectors, Verify).
//   - The redundancy geometry: REP (3 identical copies) and EC (Reed-Solomon
//     4+2, one 64 KiB chunk per shard per row; NewEncoder).
//   - DecideREP: verify, fall back to the next replica; when every copy is
//     corrupt, take each 512 B sector from a copy where it verifies and vote
//     bit by bit (MajorityVote) only on sectors corrupt in all of them,
//     verify the result, else an explicit data-loss error.
//   - DecideEC: reconstruct only the corrupted 64 KiB row from the other
//     shards' same rows, and when fewer than four shards verify whole,
//     decode sector by sector from the shards that verify at each sector (a
//     shard whose sums record failed its own CRC takes part with its damaged
//     entries, ReplicaRead.DamagedSums).
//   - DecideHDFS, the baseline of the paper's evaluation: fail over from the
//     first failing offset, never return to a failed replica, re-replicate
//     the whole block, fail if every replica fails somewhere.
//   - Spans (Reparo's die repair at sector granularity): Cover turns the
//     byte ranges a failed die took of a chunk into sector-aligned spans;
//     SumsFrom/VerifyFrom check a span against the stored sums of its
//     sectors; DecideSpanREP takes a span from the first replica where it
//     verifies (sector by sector, then by vote, otherwise); DecideSpanEC
//     decodes a span of one shard from the same span of four others
//     (Reed-Solomon codes each byte position on its own).
//   - The scrubber's planning: ScrubREP (repair every corrupt replica, not
//     only those a read passes) and TokenBucket, the byte budget that bounds
//     verification reads and repair writes (time is an input).
//
// NB: the sector-wise step goes one step below the paper's 64 KiB chunk (its
// repair unit) down to the checksum unit; it repairs strictly more than the
// chunk-then-vote order of Figure 6 and never returns bytes that fail their
// checksums.
//
// # Invariants
//
//   - A Decision holds exactly one of: replicas to fetch, an error, or data
//     that verifies against the stored checksums.
//   - Data whose checksums do not verify is never returned as data: the
//     result is verified bytes, an error wrapping base.ErrDataLoss, or
//     ErrUnavailable.
//   - The cores read no clock, no randomness and no global state; the same
//     inputs give the same decision (testdata/decide.txt is the golden
//     script; decide_test.go checks DecideREP and DecideEC exhaustively
//     against an independent reference model).
//
// # Failure model
//
// A replica may be unavailable (node down: an operating error), missing (the
// node has no such chunk: damage), return content with flipped bits, return
// a short chunk, or have lost its sums record. A read that finds no good copy
// while some copies could not be read returns ErrUnavailable (an operating
// error: the missing copies may come back), not data loss.
package direct

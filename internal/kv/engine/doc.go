// Package engine is one KV replica's state machine on Pebble, and the
// block-level tools DIRECT's KV recovery needs (paper 000 section 4.1, 001
// sections 4.1-4.2): finding which data block a corruption error names,
// re-reading it, isolating damaged blocks to key ranges, and installing a
// patch over a range atomically. It knows nothing of raft, peers or the
// network: internal/kv's replica drives it from its apply worker and
// decides what to repair and when.
//
// # What it owns
//
//   - StateMachine (Open): a Pebble instance without its WAL (the raft log
//     is the shard's write-ahead log) whose user rows live under UserPrefix;
//     ApplyWrite applies one raft entry's batch (puts, deletes,
//     conditions); IngestRanges installs a patch with IngestAndExcise and
//     reads it back; InstallState replaces the whole state (a rebuild from a
//     peer); ScanDigest recomputes the digest.
//   - The applied record (AppliedState: applied index, term and Digest of
//     the rows), written in the same batch (or after the same ingest) as
//     the effects of the entry it names, in two checksummed copies at the
//     two ends of the key space (ReadApplied takes the newer that
//     verifies).
//   - The Digest: row count, wrapping sum and xor of a hash of every row,
//     kept up to date write by write (old value out, new in).
//   - Block tools: CorruptBlockHandle (the block a Pebble error names),
//     RereadBlock and BlockVerifies (our own CRC32C/xxhash check, without
//     Pebble's search of every single-bit flip), VerifySSTable (the
//     scrubber's whole-table check), IsolateCorruption and IsolateBlocks
//     (damaged blocks to key spans, from the table's index), DataBlockAt
//     (is a named block a data block: damage outside a table's live bounds
//     or in its metadata), TableLayout,
//     and CorruptBlock/FlipByteAt (damage on purpose, for demos and tests).
//   - Table key lists (tablekeys.go): every table of at most 128 distinct
//     user keys lists them in a table property, so IsolateBlocks names
//     exactly the keys a damaged run of such a table holds (DamagedSpan.
//     Keys), not the key range its index gives (a small flushed table's
//     bounds are the whole key space: the applied record's two copies).
//   - Reads past damaged tables (around.go: Around, GetWith,
//     ScanBoundedWith, ScanAround, ScanPieces): a key a damaged table
//     provably does not hold (not in its list, or a separator it does not
//     hold) is read with the table's blocks filtered out by its table id
//     (tableid.go), which is exact; every other key through the table.
//   - Reads that retry a transient flip (Get, Scan, ScanBounded re-read up
//     to ReadAttempts times before reporting corruption) and RowsCRC, the
//     checksum a patch piece travels with.
//
// # Invariants
//
//   - Invariant: the applied record is stored atomically with the effects
//     of the entry it names, so a restart re-applies exactly the missing
//     entries.
//   - Invariant: a patch is installed only if, read back, the range holds
//     exactly the patch's rows and every row outside the excised span is
//     still there: every table the excise cut (those listed before it and
//     those a flush it forced wrote, flushLog) keeps its remainders
//     (exciseLosses), checked from the tables' metadata when no compaction
//     ran meanwhile (the compaction gate), else by reading the rows around
//     the span before and after (keptCRC).
//   - Invariant: a read leaves a table out only for keys the table holds
//     no version of (its own list, or a separator sepAbsent proved), so
//     a read past damage returns what a read of an undamaged engine would.
//   - In invariants builds the applied record is decoded back before it is
//     written (checksum before the write); both copies are verified when
//     read (verify after the read).
//
// # Failure model
//
// A read that fails its block checksum on every attempt is returned as
// corruption (base.IsCorruption, via Classify), never as data. A write
// whose old value cannot be read (a damaged block) marks the digest unknown
// (Digest.Dirty) rather than guess. An applied record unreadable in both
// copies is reported (AppliedLost) and the replica takes a peer's state.
// Errors from Pebble that are not corruption are returned wrapped.
//
// A fatal error of Pebble's (Logger.Fatalf: a MANIFEST write or marker
// move that failed, after which Pebble cannot tell what is on disk) fails
// the engine instead of the process: the error is recorded (Failed,
// ErrEngineFailed), the owner told once, and from that instant nothing
// Pebble does reaches the files (fenceFS: changes are swallowed, so Pebble
// neither deletes what the durable MANIFEST still lists nor retries a
// flush without end); the files stay as a crash there would have left
// them. A failed directory sync fails the engine the same way (Pebble
// panics on one while it moves a marker, in pebble.Open or a background
// flush), and while pebble.Open runs any change that fails (create, write,
// sync, rename, link) fails the engine and is swallowed, so the open runs
// to its end and the DB it returns is closed, waiting for the compactions
// it started (Pebble's own error path closes its file cache under them);
// a panic still out of pebble.Open is returned as an error:
// no engine that cannot open or go on takes the process down. A failed
// engine takes no more writes and is never trusted again: its replica
// fail-stops and is replaced (internal/kv).
//
// Compactions go through the engine's own scheduler (internal/kv/engine/compactgate): none
// while pebble.Open runs, and after a compaction fails on damaged data, none
// for a pause that doubles with each further failure (100 ms to 5 s),
// because Pebble retries a failed compaction at once and runs a bit-flip
// search over the damaged block at every retry. A patch whose excise meets
// damage in a table it cuts, or whose span does not read back, returns the
// ranges to patch again (ExciseLossError) rather than an error that would
// make the replica rebuild. Pebble v2.1.7's excise drops a cut table's
// whole remainder when its seek for the remainder's bound meets a damaged
// block (it ignores the iterator's error), so before an excise the engine
// seeks there itself; on damage it does not excise and names the span
// grown over the damaged run each failing seek names, seeking again at the
// new edges until the seeks meet no damage (damagedWhereSeeksFail; one
// range, so its own excise seeks in healthy blocks; not over damage
// elsewhere in the cut tables, where no seek goes), refusing reads only of
// the span and those blocks (ExciseLossError.Refused: the rows between are
// intact). A read of the rows around the span that meets damage after the
// excise is other damage, not a loss: the cut tables' metadata must show
// their remainders kept. A span that
// does not read back names only its damaged blocks' keys (the patch's own
// table isolated, DIRECT 000 section 4.1.3); the rest of the span is in.
// An excise that fails on damage no isolation locates names only its span
// (nothing was excised), and the cut tables' rows around it only when the
// same span fails so twice in a row.
package engine

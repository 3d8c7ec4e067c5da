// Package journal is the SDF layer's metadata journal on flash
// (internal/sdf; DIRECT 000 section 4.2.2, policy 2: duplicate and
// checksum local metadata): it writes the records internal/sdf logs, in
// three copies, to the seven metadata zones, starts new epochs with a
// checkpoint of the whole state (inline, or as a checkpoint body in data
// zones lent to it), and reads the pages and the body back on open. The
// records, the merge and vote of page copies, the choice of the epoch and
// the replay are its pure core, internal/sdf/metalog; the page and record
// formats are internal/sdf/onflash.
//
// # What it owns
//
// Metadata pages are cut into 512-byte units, each with its own CRC32C over
// the page's epoch, stream sequence number, the unit's index and payload: a
// slice of the record stream; each record has its own length, type and
// CRC32C. Every page is programmed three times, in three metadata zones on
// different channels (on fewer channels, shifted by filler pages so the
// copies of a page sit on different dies where there are dies enough). An
// epoch begins with a checkpoint: superblock (format version, geometry),
// failed dies, non-default zone die sets and states, every file and its
// extents, then a "checkpoint done" record (Host.SnapshotLocked);
// incremental records follow (create, rename, delete, extents, zone reset,
// zone state, failed die). When the active zones are full, or a metadata
// program fails, or a die under the current epoch failed
// (CheckpointDueLocked), a new epoch is written to three other freshly
// erased metadata zones (the seventh is the spare); Open always starts a
// new epoch (Checkpoint, keeping the zones of the epoch it replayed).
//
// A checkpoint larger than half a metadata zone (a file table of many small
// files) is not written inline: its records form a checkpoint body,
// written three times in the metadata page format (sequence numbers
// onflash.BodySeq) to empty data zones lent to the journal on different
// channels (zones.Table.Lend), and the epoch's root holds only the
// superblock, a RecCheckpointBody record naming the body's zones, dies,
// pages, length and CRC32C, and the "checkpoint done" record. So the file
// table is bounded by the data zones, not by one metadata zone. Writes
// leave empty zones for the next body (BodyReserveLocked: twice the last
// one, three copies); the previous epoch's body is handed back to the data
// zones (read-only, no live page, erased by reclaim) once the new root is
// durable. On-flash format version 2 added the body; version 1 devices are
// read as they are.
//
// On open, Scan reads every programmed page of the metadata zones, pages
// the device reports uncorrectable included, for metalog.Merge and
// metalog.Latest; ReadBody reads the epoch's body for metalog.Replay.
//
// # Invariants
//
//   - Records are written in the order they were logged (LogLocked under
//     the host's lock, flushed in order under the journal's own mutex).
//   - The epoch that was durable stays intact until a newer root is
//     durable: a checkpoint never writes to the active zones or the zones
//     it is told to keep, and hands the old body back only after.
//   - A metadata write never programs past a zone's last page: a state
//     that outgrows the zones is a clean no-space error.
//
// # Failure model
//
// Metadata survives the loss of any two copies of a metadata page (or two
// whole metadata zones), and damage in all three copies as long as each
// unit verifies in some copy or is voted back; losing a unit beyond that
// loses the records after its page (the newest complete epoch before that
// point is used). A failed metadata program starts a new epoch elsewhere
// (the records' effects are in memory, so the checkpoint rewrites them); a
// failed body copy is written again on other zones. A checkpoint body page
// is read from its first copy, merged unit by unit from the others (and
// voted) when it does not verify there, and the whole body must match its
// CRC32C; a body page no copy gives back is a corruption error.
package journal

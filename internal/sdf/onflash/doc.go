// Package onflash is the SDF layer's format on flash (internal/sdf), as pure
// encoding and decoding with no device I/O: where zones and their pages lie
// on the geometry (Layout), the identity and checksum in every data page's
// OOB (PageID, EncodeOOB, DecodeOOB), the block-level P2L pages of Reparo's
// entrustment (Owner, EncodeP2L, DecodeP2L; Reparo 003 section 6.2), the
// metadata journal's pages cut into checksummed units and their bit-by-bit
// vote (FillMetaPage, ParseMetaUnit, ParseMetaPage, VoteMetaUnit; DIRECT
// policy 2), and the journal's record framing and types (RecWriter,
// RecReader, NextRecord, Rec*). internal/sdf decides what to write and
// when, does the I/O and replays the records; "Layout on flash" in its
// doc.go describes the whole format.
//
// # Invariants
//
//   - Every structure carries its own CRC32C over its bytes and its identity
//     (a data page's owner file, page and write sequence number; a P2L
//     page's zone and die; a metadata unit's epoch, page and index), so a
//     stale or misplaced copy never verifies as another.
//   - Decoding never trusts a length it reads: counts and sizes are checked
//     against the buffer before use.
//
// # Failure model
//
// Every decoder reports whether what it read verifies (ok false, or a
// sticky RecReader.Err) and never panics on damaged input; the caller
// treats a failed check as corruption (re-read, merge copies, vote, or
// report). VoteMetaUnit uses a voted unit only if the result verifies as
// that very unit.
package onflash

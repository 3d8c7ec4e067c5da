// Package sstmeta reads where a Pebble sstable keeps its metadata (index,
// filter, range-deletion, range-key, value-index, blob-reference,
// properties and meta-index blocks, and the footer) and reads those bytes
// back verified: the pieces guardfs keeps a second copy of (DIRECT 000
// section 4.1, local metadata duplication) and internal/sdfvfs protects.
//
// # What it owns
//
//   - ReadLayout: the metadata regions of one sstable, through Pebble's own
//     sstable reader (so every format Pebble writes is covered), sorted by
//     offset, each block with its 5-byte trailer.
//   - Layout.VerifiedBytes: the bytes of one region, checked against the
//     block's trailer checksum, or, for the footer, read twice and compared.
//
// # Invariants
//
//   - Bytes come out of VerifiedBytes only when they verified: a copy is
//     never made of damaged or transiently flipped bytes.
//   - Regions lie inside the table (a region running past size is cut at
//     size).
//
// # Failure model
//
// A table Pebble cannot open returns Pebble's error (the caller marks the
// file as one it cannot protect); a block whose checksum fails, or a footer
// that reads differently twice, is a base.CorruptionErrorf; a short read is
// an error wrapping io.ErrUnexpectedEOF. Nothing here writes.
package sstmeta

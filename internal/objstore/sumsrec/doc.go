// Package sumsrec is the format of a chunk's sums record: the 512 B sector
// CRC32Cs of one chunk (direct.Sums) as objstore stores them apart from the
// chunk's data, PerFile records to a sums file. It is pure: encoding,
// decoding and verification of bytes, no store and no I/O (objstore's
// ChunkStore reads and writes the records and names their files).
//
// # Format
//
// A record (Size = 520 bytes):
//
//	[0:4]     chunk data length, little endian (1..direct.ChunkSize)
//	[4:516]   the chunk's per-sector CRC32Cs, little endian, zero after the
//	          last sector
//	[516:520] CRC32C over the chunk identity (object, version, shard, chunk
//	          index; 24 bytes) followed by bytes [0:516]
//
// Record k of a sums file is at byte offset k*Size; with 64 KiB chunks and
// 4 KiB flash pages a file of PerFile records fills one page (one sums page
// per seven chunks, 112 data pages).
//
// # Invariants
//
//   - The identity is not stored: it is implied by the file name and the
//     slot, and covered by the record's CRC, so a record read from the wrong
//     slot or file does not verify.
//   - Decode accepts exactly the records Encode produces (fuzzed:
//     FuzzDecodeSums): no two byte strings decode to the same sums.
//
// # Failure model
//
// Any damage to a record (a flipped bit, a truncation, a record of another
// chunk, a slot never written: all zeros, IsEmpty) makes Decode return an
// error wrapping base.ErrCorruption, never other sums. Damaged returns the
// sector entries a record that failed its own CRC still holds, for
// per-sector use only: each entry is a CRC32C bound to the chunk identity
// and the sector index, so a sector that matches its entry verified as
// surely as with an intact record, and an entry the damage hit only makes
// its sector count as bad.
package sumsrec

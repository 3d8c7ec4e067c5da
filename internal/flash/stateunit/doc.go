// Package stateunit is how the flash emulator keeps its own device state
// (internal/flash: per block P/E counts, write pointers, bad flags, read
// counters; per die the failed flag) safe on the backend, as pure encoding
// and merging (DIRECT 000 section 4.2.2, policy 2, applied to the device's
// own metadata): the encoded state record is cut into UnitSize units, each
// with its own CRC32C and naming its record (sequence number) and place
// (Frame), written to Copies files; on open the copies are merged unit by
// unit, a unit that verifies in no copy voted bit by bit over three copies
// (Assemble). internal/flash encodes the record, writes and reads the copy
// files and decodes what Assemble returns; this package does no I/O.
//
// # Invariants
//
//   - A unit verifies only as its own record's unit at its own place: a
//     stale or misplaced unit never verifies as part of another record.
//   - Assemble returns a record only if every one of its units verified in
//     some copy or was voted back to a unit that verifies.
//
// # Failure model
//
// A flip costs one unit of one copy. A record missing a unit in every copy
// that no vote rebuilds falls back to the previous sequence number (the
// copies a crashed save had not reached yet); with none, Assemble reports
// an error (nothing at all when no copy holds any unit) and internal/flash
// refuses to guess the device's state. Merge
// counts the damaged copies, merged and voted units, so the next save
// rewrites them.
package stateunit

// Package pagefile is the on-disk layout of a file-backed emulated flash
// device (internal/flash OpenFile): one directory holding every programmed
// page's cells and the copies of the device's state record, on an
// internal/fsys file system (Open: the os's; OpenFS: any, an fsys.Mem in
// power-loss tests, where there is no LOCK and erase zeroes the slot
// headers instead of punching a hole). It knows nothing
// about NAND rules, geometry or what the state record means; internal/flash
// enforces the rules, encodes the record (internal/flash/stateunit frames
// it) and calls this package only for legal operations.
//
// # What it owns
//
//	pages    one sparse file, a slot per page at flat page index * slot
//	         size: header (magic u32, crc32c u32) then the page's bytes
//	         (data and OOB). The CRC covers the flat page index and the
//	         content, so a page written to the wrong slot is caught as well
//	         as bit rot of the backing file. Erasing a block punches a hole
//	         over its slots (or, where holes cannot be punched, zeroes the
//	         headers): an erased slot has no magic.
//	state.0  the framed state record in stateunit.Copies copies; every
//	state.1  save rewrites the copies one after the other, each synced
//	state.2  before the next is touched.
//	LOCK     held with flock while the directory is open.
//
// # Invariants
//
//   - A slot verifies only with the content last written to that same
//     page: its CRC is over the page's flat index and content.
//   - A save never has more than one state copy in flight: a crash tears at
//     most one copy, and the others hold the previous or the new record.
//   - Only one Store has a directory open at a time (on Linux; the lock is
//     advisory and a no-op elsewhere).
//
// # Failure model
//
// Operating errors (open, read, write, sync failures) are returned as they
// come from the OS and change nothing further. A slot whose header or CRC no
// longer verifies is a corruption error (base.ErrCorruption); its content is
// still copied out, because the device returns an uncorrectable page's
// corrupt content. State copies are returned as they are on disk, damaged
// or not: judging them is internal/flash/stateunit's job.
package pagefile

// Package bitrot damages stored files the way storage really fails, for
// experiments and tests that must "inject where the faults really land":
// every file a system stores (logs, WALs, device state, journals, indexes),
// not only the data it is built to repair.
//
// # What it owns
//
//   - Flip: uncorrectable bit errors at rest. Every stored bit of every
//     regular file under a root flips independently with probability UBER
//     (the gaps between flips are geometric, so the cost is per flip, not
//     per bit), from a seeded source: the same seed and files give the
//     same flips.
//   - Single faults at one place of one file (CORDS, FAST'17): zero a
//     block, overwrite it with junk, flip one bit, truncate, delete.
//   - Kind: a file's type by its name (raft log, Pebble MANIFEST, sstable,
//     ...), so experiments can report outcomes per file type.
//
// It works on any Pebble vfs.FS (vfs.Default for real directories).
//
// # Invariants
//
//   - A fault changes exactly what it reports and nothing else.
//   - Flip never changes a file's length.
package bitrot

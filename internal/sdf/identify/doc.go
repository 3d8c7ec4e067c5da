// Package identify is Reparo's Identifier on the host-managed layer
// (internal/sdf; Reparo 003 sections 4.2.2, 5.1, 6.2): given a die, it lists
// the live file ranges stored on it whose files lie in one bounded window
// of the logical space (get_lba_status for a window), by one of three
// methods:
//
//   - IDR: one worker scans the file table's extents (Scan with 1 worker).
//   - CDR: the file table, sorted by file ID, is cut into one region per
//     channel, scanned in parallel (Scan with a worker per channel).
//   - CDR*: block-level P2L entrustment (Entrusted): for every zone with a
//     block on the die, the last page of the neighbouring die's block lists
//     the owners of the die's block; one such page per full zone is read,
//     in parallel on the channels holding them, and zones not yet full use
//     the owner lists kept in memory. A failed die's owners are read once
//     and kept (the paper marks the failed entries in its map, section
//     6.3), so later windows read no flash; every candidate is checked
//     against the file table at query time.
//
// It owns the reads of P2L pages, the scan's workers and the owners cache.
// What a lost die means for the zones and files (the scan, the
// confirmation of candidates, the ranges) is internal/sdf/dieloss (pure);
// internal/sdf hosts it (Host: its lock, zone table, file table and
// channel workers) and validates the requests (sdf.FS.Identify).
//
// # Invariants
//
//   - All three methods return the same ranges, sorted by file ID and
//     offset, adjacent pages merged (internal/sdf's seeded tests check
//     entrustment against the scan and against the pages reads find lost).
//   - Only a failed die's owners are cached: on a live die they change with
//     every write.
//   - Lock order: the Identifier's own mutex is taken before the host's
//     lock, never while holding it; flash is read without the host's lock.
//
// # Failure model
//
// A P2L page that cannot be read or does not decode as the page it should
// be makes its zone fall back to the scan (Stats.ZonesByScan); nothing is
// guessed. The ranges are what the die holds now by the file table: a file
// removed or rewritten meanwhile is not listed.
package identify

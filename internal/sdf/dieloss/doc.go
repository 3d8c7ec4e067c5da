// Package dieloss is what the loss of a flash die means for the SDF layer
// (internal/sdf; Reparo 003 sections 4.2-4.3, 5.2, 6.2), as pure functions
// of the zone table (internal/sdf/zones) and the files' page maps
// (internal/sdf/extmap):
//
//   - for the zones (Fail): the zones open on the die take no more writes,
//     its empty data zones are re-formed without it (offline when no die is
//     left), a checkpoint body or active metadata zone on it asks for a new
//     epoch, the allocator's channel weights follow the surviving dies, and
//     the journal records that must make all this durable (the failed die,
//     the zones' new states and die sets);
//   - for the files (Scan, Candidate.Live, Ranges): which file pages are
//     on the die, found by scanning the extents of the files in a window of
//     the logical space (IDR, CDR) or by checking the owners read from P2L
//     pages against the page maps (CDR*, PlanP2L), as merged byte ranges to
//     repair;
//   - for the balance (Usage, FakeFailures, Check): every channel's live
//     data against its surviving capacity, the data above a channel's new
//     share that a rebalance moves (Reparo's fake failures), and whether the
//     device can still absorb its failed dies.
//
// internal/sdf reads the P2L pages, runs the scan's workers, journals the
// records and rewrites the ranges; internal/reparo holds the
// device-independent policy (detector, identifier methods and windows,
// handler shares). Nothing here does I/O, takes a lock or reads a clock:
// the caller holds the lock that guards the table and the maps.
//
// # Invariants
//
//   - Fail changes the table only the first time a die fails, and every
//     change it makes to a data zone is in the records it returns.
//   - A file page is reported lost on die d only if its file's map places it
//     on a data page of a zone striped over d, at d's position in the
//     stripe; Scan and the P2L candidates agree on every page (they are two
//     computations of one answer, and the sdf tests compare them).
//   - Ranges are sorted by file ID and offset, merge adjacent pages, and
//     never reach past a file's size.
//
// # Failure model
//
// None of its own: it reads what the table and the maps say. A P2L page
// that does not decode is the caller's to replace by the scan (PlanP2L
// names the zones that need it); two neighbouring dies failing together
// lose the P2L page of a block with its data (Reparo 6.3), which the scan
// covers.
package dieloss

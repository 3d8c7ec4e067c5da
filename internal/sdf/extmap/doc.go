// Package extmap is an SDF extent file's page map (internal/sdf): which
// data pages of which zone hold each page of the file, as extents of
// consecutive file pages on consecutive data pages of one zone, each with
// the write sequence number of its first page (the OOB of every page names
// it, so a read checks that the page it finds is the one the map expects).
// It is pure: internal/sdf keeps one Map per file, journals its extents
// (internal/sdf/metalog) and accounts for the pages Put and Truncate drop.
//
// # Invariants
//
//   - A Map's extents do not overlap and are sorted by FilePage; a file
//     page maps to at most one physical page.
//   - Put replaces exactly the file pages it maps and reports every piece
//     it replaced; extents that continue each other physically and in
//     sequence numbers are merged.
//
// # Failure model
//
// None of its own: it holds no data and does no I/O. A mapping that no
// longer matches what a page's OOB says is found by internal/sdf's read
// verification, not here.
package extmap

// Package hashring is the coordinator's placement policy: a consistent-hashing
// ring over the cluster's members, keyed by the FNV-1a hash of an object key
// (Chameleon 004 section IV-A), that names the nodes of a key's copies or
// shards.
//
// # What it owns
//
//   - KeyHash: an object key's identity (FNV-1a 64), also mixed into chunk
//     checksums and used as the wear balancer's object ID.
//   - Ring: VirtualNodes points per member, built once per membership view;
//     Walk lists every member in ring order from a key's position, Place
//     picks n distinct usable nodes (a down default node is replaced in
//     place by the next usable member on the walk).
//
// # Invariants
//
//   - Pure: no clock, no I/O, no randomness; the same members and key give
//     the same walk on every process (the coordinator, the simulator's
//     comparison, a restarted coordinator).
//   - A Ring is immutable; Place returns n distinct nodes or an error, and a
//     usable default node keeps its slot.
//
// # Failure model
//
// Nothing here fails but Place, which returns an error when fewer than n
// members exist or are usable; the caller (internal/coord) reports it to the
// writer. Changing KeyHash or the point layout would move every object: the
// reference values are pinned in ring_test.go.
package hashring

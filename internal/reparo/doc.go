// Package reparo is the pure policy core of die-level repair (Reparo, TOS'21,
// paper 003): when a flash die fails, repair that die's data instead of
// rebuilding the whole device. It holds decisions only: no clock (callers
// pass the time), no I/O, no goroutines. internal/sdf drives it from the
// device's I/O loop and the node drives the cluster side.
//
// # What it owns
//
//   - Detector (section 4.2.1): a grown bad block on a die (a program or
//     erase failure, or an uncorrectable read) starts a probe of the
//     physically adjacent blocks' first pages, walking outward while the
//     probes fail; every failed probe is one more bad block of the die, and
//     the die is declared failed when its bad blocks exceed
//     DetectorConfig.MaxBadBlocks (the paper's N_bad^die). A device that
//     reports the die failed is believed at once. Each failure is one
//     Failure event carrying the time of the first failing operation on the
//     die and the time of the declaration, so the detection latency is
//     measured, not assumed.
//   - Identifier methods (sections 4.2.2, 5.1, 6.2): IDR (one worker scans the
//     logical-to-physical map), CDR (the map split among one worker per
//     channel) and CDR* (block-level P2L entrustment: one page read per block
//     of the failed die). The scans live in internal/sdf, which owns the
//     map; this package names the methods, splits the work (Partition) and
//     bounds each query to a Window of the logical space, so a huge device
//     is never scanned in one call.
//   - Handler (sections 4.2.3, 5.2): after a loss, which share of the live
//     data each channel should hold. IDR: the victim channel keeps its share
//     and absorbs the loss (its utilization rises by 1/(x-1), Table 1). CDR:
//     shares proportional to the surviving dies, which is equation (3)
//     solved for every channel at once (alpha = |LS_h|/(D_ssd-1), equation
//     (4), is the single-failure case, Alpha below); the bytes the victim
//     holds above its new share are the fake failures (section 5.2.3) that
//     move through the normal repair path. Allocator turns shares into a
//     zone-by-zone channel choice (smooth weighted round-robin: with no
//     failure it is plain round-robin, SDF's placement).
//   - Throttle: a token bucket (bytes per second) for repair traffic, driven
//     by the caller's clock.
//
// # Invariants
//
//   - A die is declared failed at most once; a Failure's First is not after
//     its At.
//   - Shares sum to 1 over the channels that have surviving dies, and a
//     channel with no surviving die gets 0.
//   - The Allocator never picks a channel the caller marks ineligible, and
//     over a long run the zones it hands out per channel track the weights
//     within one zone.
//   - Every entry is in exactly one Partition part.
//
// # Failure model
//
// The detector assumes a die fails as a whole and shows it block by block
// (program, erase or read failures on many blocks); a single bad block with
// readable neighbours is a bad block, not a failed die, so random
// uncorrectable reads at high error rates do not fail a die. Two
// neighbouring dies failing together defeat P2L entrustment (section 6.3);
// the sdf identifier then falls back to the scan for the zones it cannot
// read.
package reparo

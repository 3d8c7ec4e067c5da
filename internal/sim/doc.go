// Package sim is flashmend's fleet simulator: a seeded, virtual-time model
// of N storage servers (1 to 100,000), each with a flash device, running a
// workload under a wear policy. The policy is internal/wear itself, the
// same balancer the coordinator runs: the simulator feeds it the flash
// monitor's statistics every epoch and carries out its write plans and
// moves; it holds no copy of the algorithms.
//
// # What it owns
//
//   - Device: a page-mapped FTL with greedy garbage collection and 15%
//     over-provisioning with paper 004 Table II's geometry and timing (4 KB
//     pages, 256 KB blocks, 25 us read, 200 us program, 1.5 ms erase), or
//     the SDF host-managed model (HostManaged: zones of several blocks as
//     the write and erase unit, no over-provisioning beyond the empty zones
//     garbage collection keeps, internal/sdf's default of 4). It counts
//     host page writes, GC copies and block erases, and serves requests in
//     virtual time on one queue (latency = queueing + programs + the GC
//     copies and erases the request triggered), or with Channels > 1 on
//     that many queues: a request's page operations dealt round-robin
//     over them, done when its last one is. Channels change timing only,
//     never where pages land (so not erases or write amplification); the
//     reports use one channel, the paper's Table II gives none.
//   - The fleet's default placement: a consistent-hashing ring with FNV-1a
//     (paper 004 section IV-A), a wear.Placer.
//   - Workloads: a Zipf generator for YCSB-style traces (exact inverse CDF,
//     ranks scattered by a seeded permutation), synthetic profiles of Table
//     III's five traces (request count, data set, bytes requested and write
//     ratio as in the paper; the Zipf skew of the MSR traces is our
//     assumption), and a reader of MSR-Cambridge CSV block traces (with a
//     writer that makes test files).
//   - The run (Run): objects are ObjectBytes pieces of the address space;
//     a write of some pages of an object goes where wear.PlanWrite says:
//     parts that stay on their server are updated in place (REP: the pages;
//     EC: the data shard pages and the parity rows they touch, 4 KiB stripe
//     units), parts on new servers are written whole and the old parts
//     trimmed after the commit. A write is two phases: first the reads it
//     needs (an EC update of part of a stripe row is a read-modify-write:
//     the old data and the old parity, or the rest of the row, whichever is
//     fewer; a write onto a new layout reads the old version's pages it
//     does not bring), then the programs, issued when the reads are back.
//     Reads take device time (they queue with other requests) but wear
//     nothing: a 4 KiB EC update programs three pages, as REP does, and
//     reads three more first. Epochs end on virtual time; moves run at
//     the epoch's end. Results: erase count per server, its standard
//     deviation (erase_sigma), total erases, write amplification (flash
//     programs over host writes), mean write latency per SSD request and
//     per client write (read phase included), the pages read by EC
//     read-modify-writes, the pages written to new layouts by conversions
//     and offloads, the pages written into REP copies, moved bytes, the
//     state mix per epoch, and per server its host pages, GC copies,
//     erases, GC victim utilization (mu) and final utilization.
//
// # Invariants
//
//   - A run is a pure function of its Config: no wall clock, no shared
//     randomness (the seed drives the workload; everything else is
//     deterministic).
//   - Every object's parts are on the servers of its readable layout, and
//     each part holds exactly the pages of the object it should
//     (checkObjects); device maps are consistent (Device.checkConsistency).
//   - The preload (the data set that exists before the trace) is not
//     counted: counters start after it. Then, unless FreshDevices, each
//     device is preconditioned (Device.Precondition): its free space
//     beyond the GC reserve becomes units of invalid pages, the state of a
//     device that has been in service, so that every page programmed
//     during the trace costs an erase (a block's worth of programs, one
//     erase: paper 004 eq. 2, which holds "after GC starts", the state its
//     Figure 7 is measured in). NB: on fresh devices a server erases
//     nothing until it has written its free space, so erase counts would
//     measure how far past its free space each server wrote (a function
//     of the device size we chose, Fill) rather than its wear rate.
//
// # Failure model
//
// Bad input (configuration, a trace line) is an invalid-argument error that
// names what is wrong. A server whose device has no room left is an error
// that says so (the policy never places parts on a server above its
// MaxUtilization; devices are sized so that the most loaded server's REP
// footprint under the default placement fills 70% of its logical capacity).
//
// # Differences from the paper's testbed
//
// The paper ran FlashSim behind a log-structured local store; here the FTL
// sees the object writes directly. The paper's EC splits each request into
// four data and two parity stripes ("a smaller stripe granularity",
// section IV-C3), so every EC write reaches six servers; here an object is
// striped in fixed 4 KiB units and a write reaches the data shards it
// touches and both parity shards, reading first when it covers part of a
// row (a read-modify-write). In this striping a REP write never programs
// fewer flash pages than an EC write of the same bytes (as many for a
// one-page update, twice as many for whole rows); the paper's advantage
// for REP comes from its FTL (lower write amplification for REP, its
// Figure 7(a)), which a page-mapped FTL with greedy GC does not reproduce.
// Device parallelism is modelled only as an option (Channels, timing only;
// by default a request's pages are programmed one after another), and
// intra-device wear levelling not at all (erase counts per server are what
// is balanced).
package sim

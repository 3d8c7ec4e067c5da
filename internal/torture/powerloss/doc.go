// Package powerloss is the reliability harness's power-loss test of a
// node's object store, plain files (StoreFile) or SDF on emulated flash
// (StoreSDF) (issue 16, "Crash points": a crash-consistent copy of the
// disk; `flashmend torture powerloss [--store sdf]`, part of `torture
// all`; docs/results/powerloss-file.md and powerloss-sdf.md). Where the crash points
// (internal/crashpoint, internal/torture/nemesis) kill a node process at
// named persistence steps and keep everything it wrote, this cuts the
// power at every file-system operation and keeps only what was synced.
//
// # What it owns
//
//   - Workloads drawn from a seed over objstore.ChunkStore on
//     filestore.OpenFS on fsys.Mem, or on objstore.OpenSDFStore with its
//     device's page file, state copies and format markers on fsys.Mem
//     (SDFStoreOptions.FS; power-safe in the sync modes, PowerUnsafe in
//     nosync): blob puts (each chunk's data and sums record, then the
//     blob's triplicated index entry), repairs of a chunk (out of place:
//     new pack records, dead bytes), blob deletes and pack compactions
//     (none on SDF, which reclaims zones itself).
//   - The crash: Mem's hook cuts the power before the n-th mutating
//     operation (every n, or drawn ones) in each Mode (a syncing store
//     keeping 0, 50 or 100 percent of the unsynced state; a store that
//     does not sync, crashed as a process).
//   - The check of the store's durability contract (filestore's doc.go;
//     SDF's: synced data, creates, renames and removes durable when the
//     call returns, internal/sdf doc.go): after a
//     restart from the image, every chunk and index entry acknowledged
//     before the crash and not deleted reads back verified and equal; the
//     write in flight is absent, corrupt (reported, for a repair) or
//     whole; a deleted blob is absent or whole (deletes are not synced);
//     nothing verifies with other bytes. Then the interrupted chunk is
//     repaired and a second restart from exactly what was synced must find
//     every acknowledged chunk again (the load's cuts and the repair are
//     durable).
//   - Result: a tally per mode and interrupted step, the failures (each
//     line reproduces its trial) and Markdown for the report.
//
// # Invariants
//
//   - Deterministic: the same Options give the same workloads, crash
//     points, images and tallies (the store runs on one goroutine; the
//     SDF store runs its device serially, SDFStoreOptions.Serial, since
//     SDF's channel workers would otherwise reach the file system in
//     another order each run: TestSDFPowerLossTrialCountsVaryRunToRun).
//   - A trial whose crash never happened, or whose workload failed for
//     another reason than the crash, is a failure, not a pass (on SDF any
//     error after the cut is the cut's: SDF retires a zone whose program
//     fails and may then run out of space).
//
// # Failure model
//
// The model is fsys.Mem's (POSIX guarantees at sector granularity: no
// device that lies about a sync, no reordering inside a sector, no I/O
// errors: internal/torture's CORDS cells inject those on real files).
package powerloss

// Package fsys is the file-system boundary of the stores that keep their
// data in ordinary files: the plain-file object store
// (internal/objstore/filestore) and the file-backed emulated flash device
// (internal/flash/pagefile, flash.Options.FS) with the SDF store's format
// markers (objstore.SDFStoreOptions.FS). It has the few operations
// they do on their directory trees, with the operating system's
// implementation (OS) and an in-memory one that can lose power (Mem), so
// that a store can be crashed at any I/O step and reopened from what a
// power loss leaves.
//
// The stores' interface is FS (open, rename, remove, mkdir,
// read a directory, stat, sync a directory, statfs) and File (pread,
// pwrite, write, sync, truncate, stat). Pebble's vfs.FS was the other
// candidate (its crashable MemFS does the same job for the KV store's
// tests): it has no Truncate, which the store's pack load needs to cut a
// torn tail, and no O_EXCL create, which its temporary files use.
//
// # What it owns
//
//   - OS: the os and syscall calls, one to one.
//   - Mem (NewMem): a directory tree in memory, safe for concurrent use,
//     whose Crash returns the image a power loss leaves and kills the
//     original (every later operation fails with ErrCrashed, as the dead
//     process's would); Image is a process crash (everything kept).
//     SetHook sees every mutating operation (Op: create, write, truncate,
//     sync, rename, remove, mkdir, syncdir) before it is applied, so a test
//     can crash at the n-th.
//   - Helpers on any FS: MkdirAll, MkdirAllDurable (each new directory's
//     parent synced), ReadFile, WriteFile, WalkDir (filepath.WalkDir's
//     order and SkipDir rules).
//
// # Power-loss model (Mem.Crash)
//
// POSIX's guarantees and no more, at sector granularity:
//
//   - A file's content and size are what its last Sync made durable, plus,
//     with CrashConfig.KeepPercent, each later-written SectorBytes sector
//     (and the later size) kept independently: an unsynced multi-sector
//     write may be torn between sectors, never inside one; a grown file may
//     end in zeros that were never written.
//   - A directory's entries are what its last SyncDir made durable, plus a
//     prefix of the changes made in it since (a journaled file system
//     commits them in order). Each change is atomic: a rename within one
//     directory is one change, so the target names the old or the new file,
//     never neither. A file's Sync does not make its entry durable, and a
//     new directory's whole subtree is lost unless its parent was synced
//     after the mkdir.
//   - KeepPercent 0 is exactly the synced state; 100 is a process crash.
//
// # Invariants
//
//   - OS adds nothing to the os calls (behaviour of the store on real files
//     is unchanged by the boundary).
//   - A crash image is itself fully durable: crashing it again keeps it.
//   - A file's Sync costs the sectors written since the previous one when
//     its size did not change (a flash device's page file is megabytes
//     and syncs at every SDF sync), a whole copy otherwise; either way the
//     synced state is exactly the file's content at the Sync
//     (TestMemSyncKeepsExactlyTheLastSyncedContent).
//   - The hook runs without Mem's lock; an operation whose hook crashed the
//     Mem is not applied and fails with ErrCrashed.
//
// # Failure model
//
// Mem is a test double: it injects no I/O errors (internal/torture/faultfs
// does, on Pebble's vfs.FS) and does not model a disk that reorders or
// lies about a completed sync.
package fsys

// Package guardfs is a Pebble vfs.FS layered over any vfs.FS (the OS file
// system, vfs.NewMem, internal/sdfvfs) that protects Pebble's own files:
// DIRECT's local metadata duplication (paper 000 section 4.1, policy 2) on
// every file system, not only on emulated flash. Without it, on plain files,
// deleting the manifest marker or truncating the MANIFEST made a replica
// open an older state and serve wrong answers, and a damaged MANIFEST,
// OPTIONS file, format-version marker or truncated sstable stopped Pebble
// from opening at all.
//
// # What it owns
//
// Files are put in a Class by name (Options.Classify, DefaultClassify):
//
//   - ClassFramed (MANIFEST-*, OPTIONS-*, marker.*, CURRENT, *.dbtmp): the
//     file is stored as Options.Copies copies (default 3; the file itself is
//     copy 0, the others are ReservedDir/m.<k>.<id>.<name>) in an
//     append-only framed format. Reading merges the copies frame by frame;
//     damaged, torn, foreign, missing copies, and a deleted file itself, are
//     rewritten from the merge (restored) on Open, Stat and List (List
//     brings back a file whose copies survive: a marker's information is its
//     name) and by Verify.
//   - ClassSealed (*.sst): the data passes through untouched (Pebble's block
//     checksums find damage there; the KV store repairs it with patches).
//     When the writer closes (or, for an sstable written elsewhere, at its
//     first Open), guardfs writes a sidecar, ReservedDir/s.<k>.<id>.<name>,
//     in max(1, Copies-1) copies (taken from the bytes the writer wrote,
//     which it keeps the end of, not from a read of the new file that could
//     meet damage the write did not make; from a read where the metadata is
//     larger than what it keeps): the sstable's size and verified copies of
//     its metadata ranges (index, filter, range-deletion, range-key, value
//     index, blob reference index, properties and meta-index blocks with
//     their trailers, and the footer, read and verified by
//     internal/guardfs/sstmeta; SSTMetadataRanges, which internal/sdfvfs
//     uses too). So every metadata byte exists Copies times,
//     the sstable's own counting as one. A read overlapping a copied range
//     is compared with the copy and served from it where they differ (and
//     the sstable rewritten in place when the FS allows WriteAt). An
//     sstable shorter than its recorded size, or deleted, is presented at
//     its recorded size: Stat and List show it, bytes past its physical end
//     read as zeros and its metadata from the copy, so Pebble opens and the
//     lost data blocks fail Pebble's own checksums as corruption, for the
//     KV store to patch. Link (vfs.LinkOrCopy in ingestion), Rename and
//     Remove carry the sidecar along.
//   - ClassPass (LOCK, WAL *.log, anything else): untouched. The KV store
//     runs Pebble without a WAL; its raft log is the source of truth.
//
// Restores write ReservedDir/t.<random>.<target>.tmp and rename it over
// the target. CopyOf names the copies of one file for a layer below that
// places copies apart (internal/sdfvfs pins them to different flash
// channels, so one failed die cannot hold every copy of a byte).
//
// ReservedDir (".guardfs") is created in each directory that holds guarded
// files, hidden from List and refused as a user path. Stats counts what the
// layer did; Verify(dir) is the scrubber's entry point: it merges every
// copy and sidecar in the directory, restores what it can (even with
// Options.NoRepair), seals sstables that have no sidecar, repairs sstable
// metadata in place, and reports what no copy holds.
//
// # Using it
//
//	fs, err := guardfs.New(vfs.Default, guardfs.Options{SSTReaderOptions: engine.SSTReaderOptions()})
//	db, err := pebble.Open(dir, &pebble.Options{FS: fs, DisableWAL: true, ...})
//	report, err := fs.Verify(dir) // from the scrubber, at its own pace
//
// One FS per process and directory tree (it keeps the open writers and
// loaded sidecars in memory); several Pebble stores may share it in
// different directories. Options.SSTReaderOptions must open the store's
// sstables (comparer, key schemas) or they cannot be sealed
// (Stats.SealErrors). Stats and each VerifyReport say what was repaired.
//
// # On-disk format
//
// Every guardfs structure is a sequence of frames (encoded, parsed and
// merged by internal/guardfs/frames), each its own checksum domain of at
// most frames.HeaderBytes + frames.MaxBytes (28 + 4096) bytes:
//
//	magic "GFS1" u32 | kind u8 | 0 u8 | length u16 | id u64 | offset u64 | CRC32C u32 | data
//
// The CRC covers the header and the data, so it binds the bytes to the
// file's identity (id: 64 random bits chosen at Create, kept by Rename and
// Link) and to their logical offset. Kind data carries the logical bytes
// [offset, offset+length); kind seal (length 0, offset = final size) is
// appended when the file is closed. Every Write is cut into frames of at
// most Options.FrameBytes (default 512) data bytes and appended to every
// copy: appends only, so the format works on append-only file systems
// (internal/sdfvfs); restores write a new file and rename it into place.
//
// The identity a file's frames must carry comes from its copies' names
// (directory entries, which a misdirected or stale data write cannot
// change): by majority of the copies present, ties broken by verified
// bytes; with no copy left, from the identity holding the most verified
// frames of the file itself.
//
// A sidecar is the framed file whose logical content is, little endian:
// magic "GFSC" u32 | version u32 | sstable size u64 | range count u32 |
// data offset u32, then (offset u64, length u64) per range, zeros up to
// the data offset (a multiple of the frame size, so copied bytes never
// share a frame with the header), then the copied bytes of each range.
//
// # Reading a framed file
//
// Parsing a copy keeps every frame that verifies; after bytes that do not
// (damage, junk, a torn tail) it resynchronizes on the next header that
// verifies, so a damaged frame costs only itself. Merging takes each
// logical byte from any copy holding a verified frame of the file's
// identity that covers it. The size is the seal's when any copy kept one,
// else the end of the last verified frame. A range below the size that no
// copy holds is returned as an error marked as corruption
// (errors.Mark(err, pebble.ErrCorruption), base.ErrCorruption in its chain)
// naming the file and the range; never as bytes. A file whose copies hold
// bytes but no frame of its identity is not an empty file: Open fails as
// corruption and its copies are left as they are.
//
// # Invariants
//
//   - A byte guardfs returns verified: a frame's CRC bound to the file's
//     identity and offset, or (sstables) the underlying bytes or a sidecar
//     copy that verified when it was made (a block's own checksum; the
//     footer read twice the same).
//   - A copy is replaced only by a merge that holds everything it held: a
//     copy that could not be read is replaced only when the merge lost
//     nothing. Files with an open writer are never restored.
//   - Copies and sidecars change with their file under FS.mu: Create,
//     Remove, Rename, Link, restores and sealing serialize.
//   - A directory MkdirAll creates is durable when it returns (the parent
//     of each new directory synced): it survives a power loss, not only a
//     process crash.
//
// # Failure model
//
// Handled: any single file's damage or loss (zeroed or junk blocks, flipped
// bits, truncation, deletion) of any file guardfs or Pebble keeps, except
// the WAL and LOCK; damage to several copies at different places; read
// errors (a chunk that fails is re-read sector by sector; an sstable range
// that cannot be read and has no copy is a corruption error, not an I/O
// error, so the KV store patches it); write and sync errors on some copies
// (the copy is dropped and restored at Close; Write fails only when every
// copy failed); lost writes (found as missing frames at the next merge).
// internal/guardfs/sweep damages every file of real Pebble stores one fault
// at a time and in random combinations.
//
// Crash cases. Create removes the old copies, then creates the file, then
// its copies: a crash leaves the old file with fewer copies or a new file
// with fewer copies (restored), never a copy of one identity under another.
// Remove removes the copies first: a crash leaves the file without copies
// (it still exists and is restored), never copies that would bring a
// removed file back. Rename removes the target's copies, moves the copies
// (which carry the identity) and then the file: after a crash in between,
// the new name resolves to the renamed content (its primary is restored
// from the moved copies, a stale primary of another identity is replaced)
// and the old name still holds the same content: both exist, as after a
// crash of link-then-unlink; Pebble removes the stale *.dbtmp or obsolete
// file at its next open. Sync syncs every copy and, the first time, the
// file's directory and ReservedDir; syncing a directory opened through
// guardfs syncs its ReservedDir first. Sidecars are synced before the
// writer's Close returns, so before Pebble records the sstable in its
// MANIFEST. A torn final frame is a shorter file: the bytes Pebble had not
// synced. An sstable whose sidecar was not made (crash before Close
// returned) is one Pebble never recorded.
//
// Not protected:
//
//   - A tail lost in every copy of an unsealed file (the MANIFEST being
//     written) looks like a torn write: the file is shorter, as if Pebble
//     had crashed before writing it. Sealed files (closed MANIFESTs,
//     OPTIONS, markers, sidecars) report such a tail as lost. The KV
//     store's check of its state against the raft log is the backstop.
//   - Bytes lost in every copy are lost (reported, never guessed).
//   - Sstable data blocks (Pebble finds the damage, the KV store patches
//     it), WAL files and LOCK.
//   - An sstable deleted or truncated before it ever got a sidecar (one
//     written by another FS and never opened through guardfs).
//   - Two guardfs instances (or two processes) on one directory: the writer
//     registry is in memory.
//   - Reading a framed file holds its merged content in memory (Pebble
//     reads the MANIFEST whole at open anyway); bound the MANIFEST with
//     pebble.Options.MaxManifestFileSize.
//
// # Why three copies
//
// model.GuardFramedLoss (exact for independent bit flips; checked against a
// seeded Monte Carlo of this package's merge in TestModelFramedMonteCarlo)
// and model.GuardSealedLoss (sstable metadata: the sstable plus Copies-1
// sidecar copies; TestModelSealedMonteCarlo) give, with 512 B frames (go
// test ./internal/model -run TestGuardGolden; internal/model/testdata/
// guard.golden), the probability that a file loses some byte when every
// stored bit flips with probability UBER:
//
//	framed file   UBER    N=1       N=2       N=3
//	64 KiB        1e-8    5.5e-3    2.4e-7    1.0e-11
//	              1e-7    5.4e-2    2.4e-5    1.0e-8
//	              1e-6    4.3e-1    2.4e-3    1.0e-5
//	1 MiB         1e-8    8.5e-2    3.8e-6    1.7e-10
//	              1e-7    5.9e-1    3.8e-4    1.7e-7
//	              1e-6    1.0       3.7e-2    1.6e-4
//	16 MiB        1e-6    1.0       4.6e-1    2.6e-3
//
//	sstable metadata (32 ranges)  UBER   N=2      N=3
//	1 MiB                         1e-7   8.5e-4   3.7e-7
//	                              1e-6   4.4e-2   1.9e-4
//
// A replica keeps on the order of 1 MiB of framed files (MANIFEST, OPTIONS,
// markers; sidecars are one or two percent of its sstables) and is
// restarted with damage at UBER 1e-8 to 1e-6 (issue 18: it must open at
// every one of them). Two copies keep the loss per restart below 1e-3 only
// up to UBER 1e-7: at 1e-6 a 1 MiB MANIFEST is lost in 4% of restarts, and
// with one sidecar copy a sidecar header flip leaves the sstable's
// metadata unprotected. Three copies keep it near 1e-4 at 1e-6. The third
// copy costs little: framed files are a tiny share of the writes (stored
// at 3.4 times their logical size: three copies and frame headers), and
// sidecars take 0.6% of sstable bytes (two copies of the metadata of
// sstables with Pebble's default 4 KiB blocks and 800 B values; go test
// ./internal/guardfs -run TestOverhead -v); one more fsync per MANIFEST
// sync and per sstable close. Copies=2 is the choice where UBER stays at
// or below 1e-7.
package guardfs

// Package sdfvfs runs Pebble on emulated flash: FS is a Pebble vfs.FS over
// the extent files of internal/sdf (SDF 002 section 3: the storage engine
// drives host-managed flash through a thin file layer), with DIRECT's local
// metadata duplication (DIRECT 000 section 4.1, policy 2, as ZippyDB does
// for RocksDB) built in.
//
// # What it owns
//
//   - The mapping of Pebble's paths onto sdf file names: slash-separated,
//     cleaned, no leading slash ("/db/000001.log" and "db/000001.log" are
//     the same file). Directories are emulated: a directory exists when it
//     is the root, holds a file, or has a marker (an empty sdf file named
//     "<dir>/", written by MkdirAll so empty directories survive a
//     reopen). List, Remove, RemoveAll and Stat work on that view.
//   - Lifetime hints (Options.Lifetime, DefaultLifetime): WALs short,
//     MANIFEST/OPTIONS/markers and flushed sstables medium, compaction
//     outputs long, so files that die together share zones and zones empty
//     without garbage collection.
//   - Whole-file duplication (Options.DuplicateFile, by default MANIFEST,
//     OPTIONS, CURRENT, marker files and Pebble's *.dbtmp files that become
//     OPTIONS or CURRENT by rename): every byte written to such a file
//     is also appended to a shadow copy ".sdfvfs/dup/<path>". Sync, rename
//     and remove act on both; a file renamed to a duplicated name (Pebble
//     writes OPTIONS as a temporary file first) gets its shadow copied then.
//     The file and its shadow are pinned (sdf.CreateOn) to two healthy
//     channels (no failed die, a zone that takes writes) half the healthy
//     set apart, and a zone spans every die of its channel, so one die (or
//     channel) failure cannot take both. If the primary's channel fails
//     while the file is written, the shadow takes over (failover: the
//     primary is removed and the shadow renamed in its place, Stats.Failovers);
//     if the shadow's fails, the shadow is dropped (Stats.CopyErrors).
//   - Range duplication (FS.DuplicateRanges, or Options.MetadataRanges when
//     a writer closes its file; SSTMetadataRanges selects an sstable's
//     index, filter, range-deletion/range-key, properties, meta-index and
//     footer blocks): the ranges are read back verified and written, each
//     with a CRC32C, to ".sdfvfs/ranges/<path>", pinned (as a preference)
//     to a channel with no failed die that holds no page of the copied
//     ranges, so one die failure cannot take both copies of a metadata
//     byte (rangesChannel; TestNoChannelHoldsEveryCopy).
//   - Sibling copies (Options.SiblingCopy, by default internal/raftlog's
//     generation files raftlog-G.0 and raftlog-G.1, and internal/guardfs's
//     copies of Pebble's metadata files and its sstables' sidecars,
//     guardfs.CopyOf, with their .tmp names): copies a caller keeps itself
//     are pinned, as a preference, copies 0 and 1 to the channels a file
//     and its shadow would get and further copies to the channels left, so
//     that up to one copy per channel sits on each (siblingChannel).
//   - Retirement off a failed die (RetireCopies): what the die held of a
//     duplicated file, a shadow or a range copy is rewritten from the other
//     copy at once, not when a read finds it (Reparo 6: nothing stays
//     mapped to a dead die); other files' ranges are the layers above's.
//   - The conversion of sdf corruption into Pebble corruption: a read that
//     fails sdf's page verification and has no intact copy returns an error
//     marked with pebble.ErrCorruption (cockroachdb/errors.Mark), which also
//     keeps the *sdf.CorruptionError and base.ErrCorruption in its chain, so
//     Pebble's EventListener.DataCorruption and BackgroundError fire and
//     the read fails.
//
// ".sdfvfs" is reserved: hidden from List and refused as a user path.
//
// # Invariants
//
//   - A read returns only bytes that verified: either sdf's page checksum
//     and identity of the primary, or of the shadow, or a range-copy record
//     whose CRC32C matches. Never unverified bytes (there is no raw read).
//   - A file and its copies change together: Create, Rename, Remove and
//     WriteAt hold FS.mu across the primary and its copies, and a copy of a
//     replaced or recreated file is dropped before the new file exists.
//   - A damaged primary range served from a copy is rewritten from that
//     copy (sdf.RewriteRange, whole pages, out of place) and read back
//     before the repair counts, unless Options.NoRepair; one repair per
//     damaged range runs at a time.
//
// # Failure model
//
// Operating errors (missing files, bad paths, closed sdf) come back as
// *os.PathError, missing files wrapping os.ErrNotExist as Pebble expects.
// Corruption is served from a copy or returned marked as corruption; never
// as data. A crash between writing a primary and its shadow leaves them of
// different lengths: reads fall back only for bytes the shadow holds. A
// crash between removing or renaming a file and its copies leaves orphaned
// copies, which New removes. A copy that cannot be made (its source does
// not verify, or no space) is counted in Stats.CopyErrors and does not fail
// the write, rename or close that asked for it: the file itself is good. Both
// copies damaged on the same bytes is a corruption error (DIRECT: report,
// never guess). sdf has no hard links: Link fails with an error that makes
// vfs.LinkOrCopy copy instead. Files grow only by appending: WriteAt
// rewrites bytes inside a file out of place (sdf.RewriteRange, copies
// following) and fails past the end; ReuseForWrite creates a fresh file. Lock is an in-process lock (one
// process owns an emulated device) held in the FS: make one FS per sdf.FS
// (several Pebble stores share it by using different directories).
//
// Copies also get a lifetime class of their own (sdf.LifetimeExtreme), so
// they normally fill zones of their own. sdf does not persist a
// channel pin: zones a pinned file gets after a reopen (GC relocation) may
// be anywhere; Placement reports, per file, whether a copy shares a channel
// with its primary. On a one-channel device copies share their primary's
// dies and protect against bit errors only, not against a die failure.
// Options.UnpinnedCopies leaves placement to sdf's round robin.
//
// # Measured
//
// The write amplification of each layer (sdf's: padding of synced partial
// pages, their rewrite, P2L pages, metadata, GC copies; Pebble's own) and
// the bytes the metadata copies cost are measured by `flashmend experiments
// run sdfvfs-write-amplification` (docs/results/sdfvfs-write-amplification.md)
// and BenchmarkPebbleWrite; no figure is kept here.
package sdfvfs

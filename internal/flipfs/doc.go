// Package flipfs is a fault-injecting Pebble vfs.FS: it flips bits in the
// bytes Pebble reads from sstables, one flip per 1/UBER bits read on average
// (DIRECT 000 section 5, "Error Injection": ZippyDB's custom RocksDB
// environment "flips bits as they are read from a file"). Every bit read
// from a file whose name ends in ".sst" flips independently with
// probability UBER; the gaps between flips are geometric, so the cost is per
// read, not per bit. It sits next to internal/sdfvfs (Pebble on SDF) and
// internal/guardfs (Pebble's files protected on any file system); the KV
// experiments, the tests and the torture harness wrap a replica's file
// system in it.
//
// # What it owns
//
//   - Transient flips change only the caller's buffer (a re-read is clean);
//     persistent flips are also written back into the stored file, as a
//     flash page that decayed would be. WAL, MANIFEST and raft log reads
//     are never touched: those have their own duplication (internal/raftlog,
//     internal/guardfs, internal/sdfvfs) and are not what the ZippyDB
//     experiments measure. Bit flips at rest in every file are
//     internal/bitrot's.
//   - With Options.ProtectMeta, an sstable's metadata blocks (index,
//     filter, properties, footer: sdfvfs.SSTMetadataRanges) are taken to be
//     duplicated locally (DIRECT policy 2): a flip that lands there is
//     counted (Stats.MetaAbsorbed) and not applied, so only data blocks
//     reach the KV store's repair, as in ZippyDB-DIRECT.
//   - Stats: bits read from sstables, flips, absorbed flips, flips per node
//     directory ("n1", ...).
//
// NB: internal/flash's UBERModel injects the same flips at the device;
// under internal/sdfvfs the SDF layer re-reads a page that fails its
// checksum and absorbs a transient flip before Pebble sees it. flipfs
// injects at the Pebble file boundary instead: a flip the device could not
// hide.
//
// # Invariants
//
//   - Flips happen only while enabled, only in reads of ".sst" files.
//   - The flip positions are a function of Options.Seed and the sequence of
//     reads (concurrent readers interleave their draws).
//
// # Failure model
//
// A persistent write-back that fails (the table was compacted away) leaves
// the flip transient.
package flipfs

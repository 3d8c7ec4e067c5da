// Package indexrebuild is the pure core of rebuilding the coordinator's
// object index from the nodes' local indexes: Merge takes what the nodes
// report and the index as it stands and returns the records to restore and
// the versions to collect. The I/O around it (asking every node, raising
// the version base, writing the records) is internal/coord's rebuild.go.
//
// # What it owns
//
// Every node keeps, per replica or shard it holds, a local index entry with
// the key, the version, the shard, the version's size and placement as
// written (objstore.BlobInfo), and can count the chunks it holds. From all
// nodes' entries the coordinator can name every object version the cluster
// stores. The plan, per key:
//
//   - versions the coordinator knows as in flight (pending) or collected
//     (garbage) are left alone;
//   - a version is complete when enough replicas or shards are whole (every
//     chunk present on the node): one replica (REP) or four shards (EC);
//   - the key's record is the newest complete version (or, if none is
//     complete, the newest version: all there is), unless the current
//     record already names that version or a newer one;
//   - every other version found is garbage (older versions whose collection
//     was lost with the store, writes that never committed).
//
// The placement of a restored version is the one recorded in its entries,
// with each slot moved to the node that actually reports holding it (a
// replica re-created elsewhere, a shard found on another node).
//
// What a rebuild cannot know: deletions whose blobs were not collected yet
// come back (the sweeper collects within seconds of a delete), and a write
// whose chunks were all written but never committed becomes visible (as if
// it had committed); per-key version numbers (KeyVersion) start again at 1.
//
// # Invariants
//
//   - Pure: no I/O, no clock; the same reports and index give the same plan
//     (records in key order, garbage in version order).
//   - A version the index knows as pending or garbage is never restored,
//     and a key whose record already names the chosen version or a newer
//     one is left as it is (Kept).
//   - Versions are cluster-unique, so entries are grouped by version; a
//     garbage version lists every node that reported holding any part of it.
//
// # Failure model
//
// Reports come from nodes whose local index entries may be incomplete or
// disagree (a lost size or placement, two entries naming different keys
// for one version): such entries are counted as Unrestorable and skipped,
// never guessed. A key with no complete version is restored at its newest
// version and counted as Incomplete (the reads and the scrubber repair or
// report what is missing).
package indexrebuild

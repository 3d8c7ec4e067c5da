// Package filestore is the plain-file objstore.Store a node keeps its chunk
// data, sums files and metadata files on (a directory of an ordinary file
// system), with a crash-injection hook for tests. Every file-system call
// goes through an fsys.FS (OpenFS; Open uses the operating system's), so
// that tests can run it on fsys.Mem and cut its power at any I/O step.
//
// # What it owns
//
//   - Store (Open): put/get/delete/list of named files, in-place writes of
//     content that is new (objstore.Creator, objstore.FreshWriter), range
//     reads, bit flips for fault injection, space (statfs) and usage.
//   - The pack file format (format.go: pure encoding and decoding of the
//     file header and the records) and the pack table (pack.go: the open
//     packs, their in-memory index, the load that scans a pack and cuts a
//     torn tail, append, compaction, whole-pack removal; PackStats).
//
// # Invariants
//
//   - Bytes once written are never modified in place, except by FlipBits
//     (the injected fault): a packed member's new content is a new record at
//     the pack's end; a plain file's new content is a temporary file renamed
//     over the old one; Create and WriteFresh write in place only a file that
//     does not exist yet or a range no file holds yet.
//   - Every record header carries a CRC32C seeded with its pack's key, so a
//     header copied into another pack does not verify. Content is returned
//     as stored: verifying it is the reader's job (objstore's sums records).
//
// # Packs
//
// The plain-file store keeps the many small files of a blob (one
// replica or shard of an object version: its chunks' data, its sums files)
// in one append-only pack file per blob and kind instead of one file per
// chunk, so that a chunk write is one pwrite to a file already open rather
// than an openat, a write and a close (the PUT path's cost was openat).
//
// Which names are packed: a name under d/ or k/ whose last element holds a
// dot, split at its last dot into the pack key and the member:
// d/<object>.<version>/<shard>.<chunk> is member <chunk> of pack
// d/<object>.<version>/<shard>, stored in the file
// <root>/d/<object>.<version>/<shard>.pack. The copies of a blob's local
// index entry, i/<object>.<version>/<shard>.<copy> (objstore.MetaFiles),
// are members "i.<copy>" of the blob's sums pack k/<object>.<version>/<shard>
// (no k/ name maps to a member holding a dot): a blob costs a node two
// files and two directories, not five files and three directories. (The
// entry's copies were files of their own in a directory of their own, each
// written to a temporary file and renamed, and removed one by one with the
// blob: file creations and directory operations that a CPU profile of a
// PUT, `go test -run '^$' -bench 'Put$/REP' -cpuprofile put.prof
// ./internal/client`, showed as its largest per-object cost.) They are
// written after the blob's batch committed (objstore.ChunkStore.
// PutBlobInfo), each record fsynced with sync, and go with the pack when
// the blob is deleted. Every other name is a plain file, as before. A pack
// file name can never be a plain file's: a name ending in ".pack" under d/
// or k/ holds a dot, so it is itself packed.
//
// Stores written before index members keep an entry's copies as plain
// files under i/: the store still reads them (when the pack holds no such
// member), lists, damages and deletes them there, so those nodes open and
// find their blobs (TestIndexEntriesInSumsPack); new copies go to the pack.
//
// A pack file:
//
//	file header (16 bytes):
//	  [0:8]   packMagic
//	  [8:12]  CRC32C of the pack key (the name the file holds members of)
//	  [12:16] CRC32C over [0:12]
//	records, appended:
//	  [0:4]   recordMagic
//	  [4]     kind: recordPut (the member's whole content follows) or
//	          recordDelete (no content)
//	  [5]     length of the member name (1..255)
//	  [6:8]   zero
//	  [8:12]  content length
//	  [12:16] CRC32C of the content
//	  [16:20] CRC32C, seeded with the pack key's, over [0:16] and the member
//	          name: a header copied into another pack does not verify
//	  [20:20+name]          member name
//	  [20+name:+length]     content
//
// The record headers are the pack's index, each with its own checksum; the
// store keeps it in memory (member -> offset and length of its latest
// content), built by one scan of the headers when the pack is first used.
// The last record of a member wins; a delete record ends the member.
//
// Writes never modify bytes already written: a member's new content (a
// repair, a sums file with one more record) is a new record at the end, and
// the old content stays until compaction copies the live records into a new
// pack file renamed over the old one (out of place, crash-safe). A pack whose
// dead bytes exceed its live bytes (and packCompactMinDead) is compacted
// after the write that made it so; a pack with no live member is removed.
//
// # Recycling
//
// A store without sync (its writes survive a process crash, not a power
// loss: devcluster's nodes unless SyncWrites, the benchmarks' and the
// datapath experiment's) does not unlink the pack files and blob
// directories it deletes: it moves them into a pool (<root>/recycle.tmp, at
// most recycleMax of each, recycleMaxBytes of file content) and makes a new
// pack file or blob directory by renaming a pooled one into place (renameat2 without replacement, so a pooled directory
// never takes the place of one that exists). A PUT that replaces an object
// version then allocates and frees no inode (on ext4 without a journal,
// this project's machine, allocating one scans past every inode freed in
// the last minutes), and its records are written over the pooled file's
// pages instead of new ones (recycle.go has the profile). A pooled file
// holds nothing or the records of one pack, and is never taken for a pack
// of that key: what it held reads as bytes that hold no record in any
// other pack, cut off when the batch writing the new pack commits, or by
// the load after a crash as a torn tail (TestReusedFileCrash). Open empties
// the pool an earlier process left (removing names only), and the pool's
// names (".tmp") are never listed. With sync nothing is pooled: a power
// loss may keep a rename's new name without the removal of its old one,
// and a deleted pack's name could then come back naming a live pack's file
// (TestRecycledFilesAndDirs, TestSyncedStoreDoesNotRecycle).
//
// # Failure model
//
// A crash tears at most the record being appended (writes of
// one pack are serialized; with sync each record is fsynced before the write
// returns). The scan stops at the first header that does not verify or whose
// content runs past the file's end, and checks the content CRC of the last
// record; if no verifying record follows that point, it is a torn tail and
// the file is truncated there (PackStats.TornTails): the record was never
// acknowledged. If a verifying record does follow, the bytes in between are
// damage (a flipped header in the middle of the file, PackStats.
// DamagedRegions): they are skipped and the scan goes on, so one bad header
// costs the members whose latest record it was (they read as missing and
// are repaired from the other copies), not the pack. Content CRCs of other
// records are not checked by the store: a member's content is checked by
// its reader (a chunk against its sums record, a sums record by its own
// CRC), and Get returns stored bytes, corrupt or not, as the Store contract
// says.
//
// A pack whose file header does not verify and holds no verified record
// was torn while being created (a power loss can keep a new file's size
// and not its bytes) and gets its header anew, counted as a torn tail; a
// damaged header with records after it is damage (DamagedRegions) and
// the records are read on.
//
// # Durability contract
//
// With syncWrites (a node's default, `flashmend node --sync`), a write
// that returned survives a power loss: Put, Create and WriteFresh fsync
// the file and, when they made or renamed a name, its directory; a packed
// member's record is fsynced before the write returns, a new pack and
// every new directory are synced into their parents, a compaction's new
// pack is synced before it is renamed over the old one and the directory
// after. Deletes (Delete, DeleteDir, a pack emptied) are not synced: after
// a power loss a deleted name may come back with its old, whole content.
// Without syncWrites only a process crash is survived (the kernel keeps
// what was written).
//
// A batch (Store.NewBatch, objstore.Batch: a node's WriteChunks stream, a
// PUT's replica or shard) defers the fsync of its packed writes to its
// Commit, one per pack written instead of one per record: what a batch
// wrote survives a power loss once Commit returned, and the node
// acknowledges nothing of it before (TestBatchDurableAtCommit). Until then
// a power loss may keep any part of it, as it may of a record being
// appended; a pack awaiting its batch's fsync is not closed to bound the
// open files. internal/torture/powerloss checks exactly this
// contract on fsys.Mem (`flashmend torture powerloss`).
//
// A failed append (not a crash) is cut off again; when the truncate fails
// too, the pack is loaded anew from its file before its next use, as a
// restart would. A failed compaction leaves the old pack as it was.
package filestore

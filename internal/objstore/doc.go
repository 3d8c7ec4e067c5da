// Package objstore owns flashmend's object storage on a node: the chunk and
// sums files of object versions on a local Store, the chunk service's verify,
// re-read and out-of-place repair, and the triplicated metadata files
// (DIRECT 000 sections 4.2.2 and 5; 001 section 4.2). The chunk format
// (ChunkID, 512 B sector CRC32Cs bound to the chunk identity) and the DIRECT
// read decisions that use it live in internal/direct.
//
// # What it owns
//
//   - The sums records: a chunk's sector checksums (direct.Sums), computed
//     once at the writing client and travelling with the data, are stored
//     apart from the data they cover (a separate sums record with its own
//     CRC32C; the record format is package sumsrec), packed (see Layout).
//     Every node verifies what it receives
//     before acknowledging, so corruption cannot spread by replication.
//   - The capacity accounting of an SDF-backed store per layer
//     (SDFStore.Capacity) and the fill used to measure it (FillREP,
//     CapacityMix; experiment objstore-capacity).
//   - The node-local store interface (Store: put/get/delete of named files
//     plus bit flips for fault injection), an in-memory implementation
//     (MemStore), the SDF-backed one (SDFStore), a fault-injecting wrapper (FaultStore: UBER flips on read, transient or
//     persistent), the chunk store a node serves (ChunkStore: verify on write,
//     verify and re-read once on read, out-of-place repair, counters), and
//     triplicated checksummed metadata files (MetaFiles, DIRECT 000 4.2.2).
//
// # Layout on a store
//
// Names: d/<object %016x>.<version>/<shard>.<chunk> is a chunk's data (at
// most 64 KiB); k/<object>.<version>/<shard>.g<group> is a sums file holding
// the sums records of chunks group*7 .. group*7+6 of that blob (replica or
// shard), record k at byte offset k*520; i/<object>.<version>/<shard>.m<copy>
// are the three copies of the blob's local index entry (MetaFiles).
//
// On plain files (package filestore, which owns the format) the data and
// sums names of a blob are members of two append-only pack files per blob
// (d/<object>.<version>/<shard>.pack, k/<object>.<version>/<shard>.pack),
// and the index entry's copies members of the sums pack: a member's write
// appends a checksummed record, a repair appends the member anew (out of
// place), and a crash tears at most the record being appended.
//
// A sums record (package sumsrec) is 520 bytes: data length (4), 128
// sector CRC32Cs (zero after the chunk's last sector), and a CRC32C over the
// chunk identity followed by the first 516 bytes. The identity is implied by name and slot
// and covered by the CRC, so a record in the wrong slot or file, a slot never
// written (zeros) or a damaged record does not verify; its chunk then counts
// as corrupt (ReadChunk returns Sums nil, Corrupt) and is repaired, which
// rewrites the record. A sums file is as long as its highest written slot:
// seven records (3640 bytes) fit one 4 KiB flash page, so a blob of n chunks
// costs ceil(n/7) sums pages instead of the n pages of one file per record
// (SDF stores give every file at least one page): 0.893% of full-chunk data,
// against the 4/512 = 0.781% floor of the checksums themselves.
//
// Writes of a record are serialized per sums file. A new chunk's record goes
// into a slot never written (zeros, or past the file's end): on a store that
// can (FreshWriter: filestore.Store, which appends the sums file's new content to
// its pack) it is written without rewriting the file out of place, touching
// no byte written before; a new chunk's data file is likewise written in
// place (Creator: filestore.Store appends it to the blob's data pack; no
// temporary file and rename). Neither needs a second durable step: a crash
// that tears either leaves a record or data that does not verify, and the
// chunk counts as corrupt and is repaired, as for a crash between data and
// record (filestore's TestFileStoreCrashTornWrites). When the file already
// holds the slot and the store is a RangeWriter (SDFStore: sdf RewriteRange,
// FaultStore passes through), only the record's bytes are rewritten, out of
// place (the flash pages they touch are reprogrammed and remapped); otherwise
// the file is read, the slot replaced, and the whole file written anew (Put,
// out of place), the other slots carried over unchanged; slots that do not
// verify are read up to twice more first, so a transient flip on the way out
// is not written back as damage.
//
// Format change: stores written before the packed layout (one k/.../<shard>.
// <chunk> file per record) are not readable by this version: their chunks
// have no record in the new files and count as corrupt. There has been no
// release; wipe old data directories.
//
// # Group commit
//
// A node stores a PUT's stream of chunks (one replica or shard) in one
// Batch (ChunkStore.NewBatch, WriteChunkIn): on a store that can defer its
// syncs (Batcher: filestore.Store) the chunks' data and sums records are
// made durable together by Batch.Commit, one fsync per file instead of two
// per chunk; the node records the blob's local index entry and acknowledges
// the stream only after Commit. Other stores write each chunk durably as
// WriteChunk does. Durability before the acknowledgement is unchanged. The
// batch (ChunkBatch) also holds each new chunk's sums record until its sums
// file's group of seven is complete (or the batch commits) and writes the
// group's records in one write: one sums write per seven chunks instead of
// seven reads and seven rewrites of the growing file. Data still goes out
// before the records that cover it.
//
// # Invariants
//
//   - Data whose checksums do not verify is never returned as data: a read
//     returns verified bytes or an error wrapping base.ErrCorruption /
//     base.ErrDataLoss.
//   - A repair rewrites a chunk out of place (new file, atomic rename, or a
//     new record appended to its pack) and its sums record out of place
//     (range rewrite, new file or new pack record); bytes once written are
//     never modified in place (in-place writes only fill a new file, a slot
//     that held nothing, or a pack's end). Writing one chunk's record never changes
//     another chunk's record bytes.
//   - Every on-disk structure carries a CRC32C. Assertions come in pairs
//     around persistence: in invariants builds a sums record or metadata
//     record is decoded back before it is written, and every read verifies
//     what it read (internal/invariants).
//
// # Space
//
// A ChunkStore over a store that reports its space (SpaceReporter: SDF's
// usable pages minus live pages and GC's working room, statfs for plain
// files, a capacity for MemStore) keeps a repair reserve
// (SetRepairReserve): new writes that would eat into it are refused with an
// error wrapping base.ErrNoSpace; repairs may use it, and a repair that
// meets a full device has the store collect garbage (Collector) and tries
// once more. Failed repairs are counted (ChunkStats.RepairFailed).
//
// # Failure model
//
// Bits may flip in stored data (persistent) or on the way out of the device
// (transient); whole files may vanish; nodes may be down. The checksums
// themselves may be corrupt: a sums record that fails its own CRC makes its
// chunk (only that chunk: every record has its own CRC) count as corrupt,
// and it is rewritten with the repair. A lost sums file makes its (up to
// seven) chunks count as corrupt on this node; they are repaired from the
// other replicas or shards. A crash between a chunk's data and its record
// leaves a chunk without a record: corrupt, repaired the same way. A missing
// chunk file is damage too: the node answers not found, the reader judges the
// replica corrupt (direct.ReplicaRead.Missing) and re-creates the chunk, counted in
// ChunkStats.MissingRepaired; re-creating chunk 0 rewrites the blob's local
// index entry as well (BlobInfo carries the version's size and placement, so
// a node's local index alone names the object versions it holds). Metadata
// files survive the corruption of any two of their three copies, and a
// missing copy is rewritten from a good one. A read the device fails (EIO,
// IsMediaError) on a chunk's data or its sums record is damage too: the
// node answers the chunk as corrupt (no data; ChunkStats.ReadErrors), the
// reader serves another copy and rewrites this one out of place, like a
// checksum mismatch. Rewriting a record whose sums file no longer reads
// carries over the records that still read and leaves the others empty:
// their chunks then count as corrupt here and are repaired in turn.
package objstore

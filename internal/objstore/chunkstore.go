package objstore

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"

	"github.com/flashmend/flashmend/internal/base"
	"github.com/flashmend/flashmend/internal/crashpoint"
	"github.com/flashmend/flashmend/internal/direct"
	"github.com/flashmend/flashmend/internal/invariants"
	"github.com/flashmend/flashmend/internal/objstore/sumsrec"
)

// ChunkStore is the object store a node serves: chunks and their sums
// records (stored apart, under different names) plus the node's local object
// index, all on one Store (one device).
type ChunkStore struct {
	store Store
	meta  *MetaFiles
	// sumsMu serializes the read-modify-write of a sums file shared by
	// several chunks.
	sumsMu sumsLocks
	// reserve is the fraction of the device kept free for repairs
	// (SetRepairReserve).
	reserveMu sync.Mutex
	reserve   float64
	// headroom is the space kept for others sharing the device
	// (SetSharedHeadroom); nil keeps none.
	headroom func() base.Bytes
	c        struct {
		chunksWritten, bytesWritten, chunksRead, bytesRead atomic.Int64
		transient, persistent, repaired, rejected          atomic.Int64
		metaRepaired, missingRepaired                      atomic.Int64
		refusedFull, repairFailed                          atomic.Int64
		readErrors                                         atomic.Int64
	}
}

// NewChunkStore serves chunks kept in store.
func NewChunkStore(store Store) *ChunkStore {
	return &ChunkStore{store: store, meta: NewMetaFiles(store)}
}

// Store returns the underlying store.
func (c *ChunkStore) Store() Store { return c.store }

// Meta returns the triplicated metadata files on this store.
func (c *ChunkStore) Meta() *MetaFiles { return c.meta }

func blobDir(object, version uint64) string { return fmt.Sprintf("%016x.%d", object, version) }

// DataName is the store file holding a chunk's data.
func DataName(id direct.ChunkID) string {
	return fmt.Sprintf("d/%s/%d.%d", blobDir(id.Object, id.Version), id.Shard, id.Index)
}

func infoName(object, version uint64, shard uint32) string {
	return fmt.Sprintf("i/%s/%d", blobDir(object, version), shard)
}

// ChunkStats are a node device's counters.
type ChunkStats struct {
	Device        string
	ChunksWritten int64
	BytesWritten  int64
	ChunksRead    int64
	BytesRead     int64
	// Transient counts reads whose first copy failed verification and whose
	// re-read verified: a flip on the way out of the device.
	Transient int64
	// Persistent counts reads that failed verification twice: damage on the
	// device, served from another replica and repaired.
	Persistent int64
	// Repaired counts chunks rewritten out of place by a repair.
	Repaired int64
	// Rejected counts writes refused because the data did not verify.
	Rejected int64
	// MetaRepaired counts metadata copies rewritten.
	MetaRepaired int64
	// MissingRepaired counts chunks re-created because their file was
	// missing (a repair the writer marked as such; also in Repaired).
	MissingRepaired int64
	// RefusedFull counts new writes refused to keep the repair reserve
	// free; RepairFailed the repair writes that failed (device full, write
	// error), each left for the next read or scrub to try again.
	RefusedFull, RepairFailed int64
	// ReadErrors counts reads of a chunk's data or sums record that the
	// device failed (EIO): that copy is judged corrupt and repaired like a
	// checksum mismatch.
	ReadErrors int64
}

func (s ChunkStats) String() string {
	return fmt.Sprintf("%s: read %d chunks, transient %d, persistent %d, repaired %d (missing %d), rejected %d, meta repaired %d",
		s.Device, s.ChunksRead, s.Transient, s.Persistent, s.Repaired, s.MissingRepaired, s.Rejected, s.MetaRepaired)
}

// Stats returns the counters.
func (c *ChunkStore) Stats() ChunkStats {
	return ChunkStats{
		Device:          c.store.Name(),
		ChunksWritten:   c.c.chunksWritten.Load(),
		BytesWritten:    c.c.bytesWritten.Load(),
		ChunksRead:      c.c.chunksRead.Load(),
		BytesRead:       c.c.bytesRead.Load(),
		Transient:       c.c.transient.Load(),
		Persistent:      c.c.persistent.Load(),
		Repaired:        c.c.repaired.Load(),
		Rejected:        c.c.rejected.Load(),
		MetaRepaired:    c.c.metaRepaired.Load(),
		MissingRepaired: c.c.missingRepaired.Load(),
		RefusedFull:     c.c.refusedFull.Load(),
		RepairFailed:    c.c.repairFailed.Load(),
		ReadErrors:      c.c.readErrors.Load(),
	}
}

// AddMissingRepairs counts chunks re-created by the caller because they
// were missing.
func (c *ChunkStore) AddMissingRepairs(n int) { c.c.missingRepaired.Add(int64(n)) }

// AddMetaRepairs counts metadata copies rewritten by the caller.
func (c *ChunkStore) AddMetaRepairs(n int) { c.c.metaRepaired.Add(int64(n)) }

// WriteChunk verifies data against sums and stores both, out of place. A
// write that does not verify is refused with a corruption error and changes
// nothing: corruption does not spread by replication. repair marks the
// rewrite of a chunk found corrupt.
//
// A new write (not a repair) that would eat into the repair reserve
// (SetRepairReserve) is refused with an error wrapping base.ErrNoSpace.
// A repair may use the reserve; one that meets a full device has the store
// collect garbage (Collector) and tries once more. A repair that still
// fails is counted (ChunkStats.RepairFailed) and its error returned.
func (c *ChunkStore) WriteChunk(id direct.ChunkID, data []byte, sums []uint32, repair bool) error {
	if !repair {
		if err := c.checkRoom(len(data) + sumsrec.Size); err != nil {
			return fmt.Errorf("chunk %s: %w", id, err)
		}
		return c.writeChunk(id, data, sums, false, nil)
	}
	err := c.writeChunk(id, data, sums, true, nil)
	if base.IsNoSpace(err) {
		if col, ok := c.store.(Collector); ok {
			if cerr := col.Collect(); cerr != nil {
				err = fmt.Errorf("%w (garbage collection: %v)", err, cerr)
			} else {
				err = c.writeChunk(id, data, sums, true, nil)
			}
		}
	}
	if err != nil && !base.IsCorruption(err) && !base.IsInvalidArgument(err) {
		c.c.repairFailed.Add(1)
	}
	return err
}

// writeChunk writes a chunk's data and sums record, in batch b when not nil
// (a new chunk only: its record waits in b, see ChunkBatch).
func (c *ChunkStore) writeChunk(id direct.ChunkID, data []byte, sums []uint32, repair bool, b *ChunkBatch) error {
	if len(data) > direct.ChunkSize {
		return base.InvalidArgumentf("chunk %s: %d bytes exceed the chunk size %d", id, len(data), direct.ChunkSize)
	}
	if len(data) == 0 {
		return base.InvalidArgumentf("chunk %s: empty chunk", id)
	}
	if len(sums) != direct.SectorCount(len(data)) {
		return base.InvalidArgumentf("chunk %s: %d checksums for %d bytes", id, len(sums), len(data))
	}
	if err := direct.Verify(id, data, sums); err != nil {
		c.c.rejected.Add(1)
		return fmt.Errorf("refusing write: %w", err)
	}
	written := int64(len(data))
	patched := false
	if repair {
		n, ok, err := c.patchChunk(id, data)
		if err != nil {
			return err
		}
		patched, written = ok, n
	}
	if !patched {
		// A new chunk's file is created in place (a crash that tears it
		// leaves data that does not verify against the record, written
		// after it); a repair replaces the file out of place.
		put := c.store.Put
		if cr, ok := c.store.(Creator); ok && !repair {
			put = cr.Create
		}
		if b != nil {
			put = b.store.Create
		}
		if err := put(DataName(id), data); err != nil {
			return err
		}
	}
	crashpoint.Hit("chunk-data")
	rec := sumsrec.Encode(id, len(data), sums)
	if invariants.Enabled {
		// Checksum before the write: the record decodes back to what it
		// stores (the read side verifies every record it reads).
		n, back, err := sumsrec.Decode(id, rec)
		_ = invariants.Check(err == nil && n == len(data) && slices.Equal(back, sums),
			"objstore: sums record of %s does not decode back before its write: %v", id, err)
	}
	if b != nil {
		if err := b.addRecord(id, rec); err != nil {
			return err
		}
	} else {
		if err := c.writeRecord(id, rec, nil); err != nil {
			return err
		}
		crashpoint.Hit("chunk-sums")
	}
	c.c.chunksWritten.Add(1)
	c.c.bytesWritten.Add(written)
	if repair {
		c.c.repaired.Add(1)
	}
	return nil
}

// patchChunk repairs a chunk in place at the smallest granularity the store
// allows: the stored content (as the device reads it, damage included) is
// compared with the verified data sector by sector and only the runs of
// sectors that differ are rewritten (out of place: RangeWriter, on SDF
// sdf.FS.RewriteRange reprograms only the pages they touch). A die that
// failed under a chunk striped over every die costs one page of flash
// writes, not the chunk. It reports false (and the caller writes the whole
// chunk) when the store cannot rewrite ranges, the file is missing or of
// another length, or most of it differs.
func (c *ChunkStore) patchChunk(id direct.ChunkID, data []byte) (int64, bool, error) {
	rw, ok := c.store.(RangeWriter)
	if !ok {
		return 0, false, nil
	}
	name := DataName(id)
	cur, err := c.store.Get(name)
	if err != nil || len(cur) != len(data) {
		return 0, false, nil
	}
	type run struct{ off, end int }
	var runs []run
	diff := 0
	for off := 0; off < len(data); off += direct.SectorSize {
		end := min(off+direct.SectorSize, len(data))
		if string(cur[off:end]) == string(data[off:end]) {
			continue
		}
		diff += end - off
		if n := len(runs); n > 0 && runs[n-1].end == off {
			runs[n-1].end = end
		} else {
			runs = append(runs, run{off, end})
		}
	}
	if diff > len(data)/2 {
		return 0, false, nil
	}
	for _, r := range runs {
		if err := rw.WriteAt(name, int64(r.off), data[r.off:r.end]); err != nil {
			if errors.Is(err, ErrRangeUnsupported) {
				return 0, false, nil
			}
			return 0, false, err
		}
	}
	return int64(diff), true, nil
}

// ChunkRead is what a node returns for a chunk read.
type ChunkRead struct {
	Data []byte
	// Sums is nil when the sums record failed its own checksum.
	Sums []uint32
	// DamagedSums are the entries of a sums record that failed its own
	// checksum (DamagedSums), for per-sector use; nil otherwise.
	DamagedSums []uint32
	// Corrupt is set when the chunk failed verification twice; Data is then
	// the corrupt content, for a majority vote.
	Corrupt bool
	// Transient is set when the first read failed and the re-read verified.
	Transient bool
}

func (r ChunkRead) String() string {
	return fmt.Sprintf("%dB corrupt=%v transient=%v sums=%v", len(r.Data), r.Corrupt, r.Transient, r.Sums != nil)
}

// ReadChunk reads and verifies a chunk; on a mismatch it re-reads once to
// tell a transient flip from damage on the device, and counts which it was.
// A missing chunk is an error wrapping ErrNotFound.
func (c *ChunkStore) ReadChunk(id direct.ChunkID) (ChunkRead, error) {
	return c.ReadChunkInto(id, nil)
}

// ReadChunkInto is ReadChunk with the chunk's bytes read into a buffer
// from alloc (nil: a new one), which returns a slice of n bytes: a reader
// that passes the bytes on and recycles the buffer (the node's streamed
// reads, into the data path's pool) saves an allocation per chunk. On a
// store without BufferGetter, and for a re-read, the bytes are in a new
// buffer as ReadChunk's.
func (c *ChunkStore) ReadChunkInto(id direct.ChunkID, alloc func(n int) []byte) (ChunkRead, error) {
	r, err := c.readOnceInto(id, alloc)
	if err != nil {
		return r, err
	}
	return c.rereadOnMismatch(r, func() (ChunkRead, error) { return c.readOnce(id) })
}

// rereadOnMismatch counts read r and, when it failed its checksums, reads
// once more (again): a read that verifies then was a transient error, one
// that fails again a persistent one.
func (c *ChunkStore) rereadOnMismatch(r ChunkRead, again func() (ChunkRead, error)) (ChunkRead, error) {
	c.c.chunksRead.Add(1)
	c.c.bytesRead.Add(int64(len(r.Data)))
	if !r.Corrupt {
		return r, nil
	}
	r2, err := again()
	if err != nil {
		return r, err
	}
	if !r2.Corrupt {
		c.c.transient.Add(1)
		r2.Transient = true
		return r2, nil
	}
	c.c.persistent.Add(1)
	return r2, nil
}

func (c *ChunkStore) readOnce(id direct.ChunkID) (ChunkRead, error) { return c.readOnceInto(id, nil) }

func (c *ChunkStore) readOnceInto(id direct.ChunkID, alloc func(n int) []byte) (ChunkRead, error) {
	var data []byte
	var err error
	if bg, ok := c.store.(BufferGetter); ok && alloc != nil {
		data, err = bg.GetInto(DataName(id), alloc)
	} else {
		data, err = c.store.Get(DataName(id))
	}
	unreadable := false
	if err != nil {
		if !IsMediaError(err) {
			return ChunkRead{}, err
		}
		// The device cannot read this copy: it is damage like a checksum
		// mismatch, answered as corrupt (no data) so that the reader
		// serves another copy and rewrites this one, out of place.
		c.c.readErrors.Add(1)
		data, unreadable = nil, true
	}
	var r ChunkRead
	r.Data = data
	rec, err := c.readRecord(id)
	if err != nil {
		if !IsMediaError(err) {
			return ChunkRead{}, err
		}
		c.c.readErrors.Add(1)
		rec = nil // as a record that does not verify: rewritten by the repair
	}
	if rec != nil {
		// A record that verifies is trusted even when its length differs
		// from the data's: then the data is what is wrong.
		if _, sums, derr := sumsrec.Decode(id, rec); derr == nil {
			r.Sums = sums
		} else {
			r.DamagedSums = sumsrec.Damaged(rec)
		}
	}
	r.Corrupt = unreadable || r.Sums == nil || direct.Verify(id, data, r.Sums) != nil
	return r, nil
}

// IsMediaError reports whether err is the device failing to read or write
// bytes it holds (EIO: a bad sector, a failed die under a plain file),
// rather than the file being absent or the request wrong. A chunk or sums
// record the device cannot read is judged corrupt and repaired.
func IsMediaError(err error) bool { return errors.Is(err, syscall.EIO) }

// Corrupt flips bits of a stored chunk's data: bits consecutive bits from
// byte offset within the chunk (fault injection; persistent damage).
func (c *ChunkStore) Corrupt(id direct.ChunkID, byteOffset int64, bits int) error {
	if bits <= 0 || bits > 8*direct.ChunkSize {
		return base.InvalidArgumentf("corrupt: bits %d outside [1, %d]", bits, 8*direct.ChunkSize)
	}
	return c.store.FlipBits(DataName(id), byteOffset*8, bits)
}

// BlobInfo is one entry of a node's local object index: a replica or shard
// of an object version this node holds.
type BlobInfo struct {
	Key        string `json:"key"`
	Object     uint64 `json:"object"`
	Version    uint64 `json:"version"`
	Shard      uint32 `json:"shard"`
	Redundancy string `json:"redundancy"`
	Chunks     uint32 `json:"chunks"`
	// SizeBytes, Placement (node IDs by replica or shard) and
	// CreatedUnixMs describe the object version as written, so that the
	// coordinator's index can be rebuilt from the nodes' local indexes.
	// Zero in entries written before they were recorded.
	SizeBytes     int64    `json:"size_bytes,omitempty"`
	Placement     []uint64 `json:"placement,omitempty"`
	CreatedUnixMs int64    `json:"created_unix_ms,omitempty"`
}

func (b BlobInfo) String() string {
	return fmt.Sprintf("%s@%d shard %d (%s, %d chunks)", b.Key, b.Version, b.Shard, b.Redundancy, b.Chunks)
}

// PutBlobInfo records a blob in the local object index (triplicated).
func (c *ChunkStore) PutBlobInfo(info BlobInfo) error {
	b, err := json.Marshal(info)
	if err != nil {
		return err
	}
	crashpoint.Hit("index-update")
	// Entries are immutable (one per object version and shard): no need to
	// read the old copies for a sequence number.
	return c.meta.WriteNew(infoName(info.Object, info.Version, info.Shard), b)
}

// BlobInfoOf returns the local index entry of one blob (an error wrapping
// ErrNotFound when the node does not hold it), repairing corrupt copies.
func (c *ChunkStore) BlobInfoOf(object, version uint64, shard uint32) (BlobInfo, error) {
	var info BlobInfo
	res, err := c.meta.Read(infoName(object, version, shard))
	if err != nil {
		return info, err
	}
	c.c.metaRepaired.Add(int64(res.Repaired))
	if err := json.Unmarshal(res.Payload, &info); err != nil {
		return info, base.CorruptionErrorf("local index entry of %016x.%d/%d: %v", object, version, shard, err)
	}
	return info, nil
}

// Blobs lists the local object index, repairing corrupt copies on the way.
func (c *ChunkStore) Blobs() ([]BlobInfo, error) {
	names, err := c.store.List("i/")
	if err != nil {
		return nil, err
	}
	seen := map[string]bool{}
	var out []BlobInfo
	for _, n := range names {
		entry := n[:strings.LastIndex(n, ".m")]
		if seen[entry] {
			continue
		}
		seen[entry] = true
		res, err := c.meta.Read(entry)
		if err != nil {
			return out, err
		}
		c.c.metaRepaired.Add(int64(res.Repaired))
		var info BlobInfo
		if err := json.Unmarshal(res.Payload, &info); err != nil {
			return out, base.CorruptionErrorf("local index entry %s: %v", entry, err)
		}
		out = append(out, info)
	}
	return out, nil
}

// BlobShard names one replica or shard of an object version.
type BlobShard struct {
	Object, Version uint64
	Shard           uint32
}

// ChunkCounts counts the chunk files this store holds, per replica or shard
// of an object version.
func (c *ChunkStore) ChunkCounts() (map[BlobShard]int, error) {
	names, err := c.store.List("d/")
	if err != nil {
		return nil, err
	}
	out := map[BlobShard]int{}
	for _, n := range names {
		var b BlobShard
		var index uint32
		if _, err := fmt.Sscanf(n, "d/%016x.%d/%d.%d", &b.Object, &b.Version, &b.Shard, &index); err != nil {
			continue // not a chunk file
		}
		out[b]++
	}
	return out, nil
}

// DeleteBlob removes every chunk, sums record and index entry of an object
// version held here.
func (c *ChunkStore) DeleteBlob(object, version uint64) error {
	dir := blobDir(object, version)
	for _, prefix := range []string{"d/" + dir + "/", "k/" + dir + "/", "i/" + dir + "/"} {
		if dd, ok := c.store.(DirDeleter); ok {
			if err := dd.DeleteDir(prefix); err != nil {
				return err
			}
			continue
		}
		names, err := c.store.List(prefix)
		if err != nil {
			return err
		}
		for _, n := range names {
			if err := c.store.Delete(n); err != nil {
				return err
			}
		}
	}
	return nil
}

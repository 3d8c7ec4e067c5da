package client

import (
	"fmt"

	"github.com/flashmend/flashmend/internal/base"
	"github.com/flashmend/flashmend/internal/direct"
	"github.com/flashmend/flashmend/internal/gen/nodepb"
	"github.com/flashmend/flashmend/internal/gen/objectpb"
)

// layout is how an object version is cut into chunks.
//
// REP: chunk i holds bytes [i*64KiB, (i+1)*64KiB) and every replica stores
// the same chunks. EC: row r holds bytes [r*256KiB, (r+1)*256KiB), split
// into four data shard chunks of rowLen bytes (the last row's chunks are
// zero-padded to equal length) and two parity chunks of the same length.
type layout struct {
	size      int64
	ec        bool
	object    uint64
	version   uint64
	copies    int
	chunks    int // REP chunks or EC rows
	placement []uint64
	rec       *objectpb.ObjectRecord
}

const rowBytes = direct.DataShards * direct.ChunkSize

func newLayout(rec *objectpb.ObjectRecord) (layout, error) {
	l := layout{size: rec.SizeBytes, object: rec.Object, version: rec.Version, placement: rec.Placement, rec: rec}
	switch rec.Redundancy {
	case objectpb.Redundancy_REP:
		l.copies = 3
		l.chunks = int((rec.SizeBytes + direct.ChunkSize - 1) / direct.ChunkSize)
	case objectpb.Redundancy_EC:
		l.ec = true
		l.copies = direct.TotalShards
		l.chunks = int((rec.SizeBytes + rowBytes - 1) / rowBytes)
	default:
		return l, base.CorruptionErrorf("object %q: unknown redundancy %v in index", rec.Key, rec.Redundancy)
	}
	if len(rec.Placement) != l.copies {
		return l, base.CorruptionErrorf("object %q: %d placements for %d copies", rec.Key, len(rec.Placement), l.copies)
	}
	return l, nil
}

func (l layout) String() string {
	kind := "rep"
	if l.ec {
		kind = "ec"
	}
	return fmt.Sprintf("%s %dB in %d chunks on %v", kind, l.size, l.chunks, l.placement)
}

// chunkLen is the length of REP chunk i, or of every shard chunk of EC row i.
func (l layout) chunkLen(i int) int {
	if !l.ec {
		return int(min(direct.ChunkSize, l.size-int64(i)*direct.ChunkSize))
	}
	rem := min(rowBytes, l.size-int64(i)*rowBytes)
	return int((rem + direct.DataShards - 1) / direct.DataShards)
}

// dataLen is the number of object bytes chunk (or row) i carries.
func (l layout) dataLen(i int) int {
	if !l.ec {
		return l.chunkLen(i)
	}
	return int(min(rowBytes, l.size-int64(i)*rowBytes))
}

// blobInfo is the local index entry of replica or shard `shard` on a node:
// enough to rebuild the version's index record from the node alone.
func (l layout) blobInfo(shard int, createdUnixMs int64) *nodepb.BlobInfo {
	red := "rep"
	if l.ec {
		red = "ec"
	}
	if l.rec.CreatedUnixMs != 0 {
		createdUnixMs = l.rec.CreatedUnixMs
	}
	return &nodepb.BlobInfo{Key: l.rec.Key, Object: l.object, Version: l.version, Shard: uint32(shard),
		Redundancy: red, Chunks: uint32(l.chunks), SizeBytes: l.size,
		Placement: append([]uint64(nil), l.placement...), CreatedUnixMs: createdUnixMs}
}

func (l layout) id(shard, index int) direct.ChunkID {
	return direct.ChunkID{Object: l.object, Version: l.version, Shard: uint32(shard), Index: uint32(index)}
}

// replicaBytes is the number of bytes replica or shard r stores.
func (l layout) replicaBytes() int64 {
	var n int64
	for i := 0; i < l.chunks; i++ {
		n += int64(l.chunkLen(i))
	}
	return n
}

// locate maps an offset in a replica's (or shard's) stored bytes to the
// chunk and the offset within it.
func (l layout) locate(offset int64) (chunk int, within int64, err error) {
	if offset < 0 || offset >= l.replicaBytes() {
		return 0, 0, base.InvalidArgumentf("offset %d outside the %d bytes stored per replica", offset, l.replicaBytes())
	}
	// Every chunk but the last is full.
	return int(offset / direct.ChunkSize), offset % direct.ChunkSize, nil
}

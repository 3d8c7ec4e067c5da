package objlayout

import (
	"fmt"

	"github.com/flashmend/flashmend/internal/base"
	"github.com/flashmend/flashmend/internal/direct"
	"github.com/flashmend/flashmend/internal/gen/nodepb"
	"github.com/flashmend/flashmend/internal/gen/objectpb"
)

// Layout is how an object version is cut into chunks.
//
// REP: chunk i holds bytes [i*64KiB, (i+1)*64KiB) and every replica stores
// the same chunks. EC: row r holds bytes [r*256KiB, (r+1)*256KiB), split
// into four data shard chunks of rowLen bytes (the last row's chunks are
// zero-padded to equal length) and two parity chunks of the same length.
type Layout struct {
	Size      int64
	EC        bool
	Object    uint64
	Version   uint64
	Copies    int
	Chunks    int // REP chunks or EC rows
	Placement []uint64
	Rec       *objectpb.ObjectRecord
}

// RowBytes is the object bytes of one EC row: a chunk per data shard.
const RowBytes = direct.DataShards * direct.ChunkSize

// New is the layout of the version rec records; a record whose redundancy
// or placement does not fit is corruption of the index.
func New(rec *objectpb.ObjectRecord) (Layout, error) {
	l := Layout{Size: rec.SizeBytes, Object: rec.Object, Version: rec.Version, Placement: rec.Placement, Rec: rec}
	switch rec.Redundancy {
	case objectpb.Redundancy_REP:
		l.Copies = 3
		l.Chunks = int((rec.SizeBytes + direct.ChunkSize - 1) / direct.ChunkSize)
	case objectpb.Redundancy_EC:
		l.EC = true
		l.Copies = direct.TotalShards
		l.Chunks = int((rec.SizeBytes + RowBytes - 1) / RowBytes)
	default:
		return l, base.CorruptionErrorf("object %q: unknown redundancy %v in index", rec.Key, rec.Redundancy)
	}
	if len(rec.Placement) != l.Copies {
		return l, base.CorruptionErrorf("object %q: %d placements for %d copies", rec.Key, len(rec.Placement), l.Copies)
	}
	return l, nil
}

func (l Layout) String() string {
	kind := "rep"
	if l.EC {
		kind = "ec"
	}
	return fmt.Sprintf("%s %dB in %d chunks on %v", kind, l.Size, l.Chunks, l.Placement)
}

// ChunkLen is the length of REP chunk i, or of every shard chunk of EC row i.
func (l Layout) ChunkLen(i int) int {
	if !l.EC {
		return int(min(direct.ChunkSize, l.Size-int64(i)*direct.ChunkSize))
	}
	rem := min(RowBytes, l.Size-int64(i)*RowBytes)
	return int((rem + direct.DataShards - 1) / direct.DataShards)
}

// DataLen is the number of object bytes chunk (or row) i carries.
func (l Layout) DataLen(i int) int {
	if !l.EC {
		return l.ChunkLen(i)
	}
	return int(min(RowBytes, l.Size-int64(i)*RowBytes))
}

// BlobInfo is the local index entry of replica or shard `shard` on a node:
// enough to rebuild the version's index record from the node alone.
func (l Layout) BlobInfo(shard int, createdUnixMs int64) *nodepb.BlobInfo {
	red := "rep"
	if l.EC {
		red = "ec"
	}
	if l.Rec.CreatedUnixMs != 0 {
		createdUnixMs = l.Rec.CreatedUnixMs
	}
	return &nodepb.BlobInfo{Key: l.Rec.Key, Object: l.Object, Version: l.Version, Shard: uint32(shard),
		Redundancy: red, Chunks: uint32(l.Chunks), SizeBytes: l.Size,
		Placement: append([]uint64(nil), l.Placement...), CreatedUnixMs: createdUnixMs}
}

// ID names chunk index of replica or shard shard.
func (l Layout) ID(shard, index int) direct.ChunkID {
	return direct.ChunkID{Object: l.Object, Version: l.Version, Shard: uint32(shard), Index: uint32(index)}
}

// ReplicaBytes is the number of bytes replica or shard r stores.
func (l Layout) ReplicaBytes() int64 {
	var n int64
	for i := 0; i < l.Chunks; i++ {
		n += int64(l.ChunkLen(i))
	}
	return n
}

// Locate maps an offset in a replica's (or shard's) stored bytes to the
// chunk and the offset within it.
func (l Layout) Locate(offset int64) (chunk int, within int64, err error) {
	if offset < 0 || offset >= l.ReplicaBytes() {
		return 0, 0, base.InvalidArgumentf("offset %d outside the %d bytes stored per replica", offset, l.ReplicaBytes())
	}
	// Every chunk but the last is full.
	return int(offset / direct.ChunkSize), offset % direct.ChunkSize, nil
}

// UnitBytes is the object bytes one unit of l carries: a chunk (REP) or a
// row (EC).
func (l Layout) UnitBytes() int64 {
	if l.EC {
		return RowBytes
	}
	return direct.ChunkSize
}

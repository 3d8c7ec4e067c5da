package client

import (
	"context"

	"github.com/flashmend/flashmend/internal/base"
	"github.com/flashmend/flashmend/internal/client/objlayout"
	"github.com/flashmend/flashmend/internal/direct"
	"github.com/flashmend/flashmend/internal/gen/nodepb"
	"github.com/flashmend/flashmend/internal/gen/objectpb"
	"github.com/flashmend/flashmend/internal/wire"
)

// Corrupt flips bits consecutive bits of the bytes stored for replica (REP)
// or shard (EC) of key's current version, at byte offset of that replica's
// or shard's data: persistent damage, as DIRECT's fault-injection script.
func (c *Client) Corrupt(ctx context.Context, key string, replica int, offset int64, bits int) error {
	_, err := c.CorruptAt(ctx, key, replica, offset, bits)
	return err
}

// Corrupted says where Corrupt flipped bits.
type Corrupted struct {
	Record *objectpb.ObjectRecord
	// Replica is the replica (REP) or shard (EC) index, Node the node
	// holding it.
	Replica int
	Node    uint64
	// Chunk is the damaged chunk; OffsetInChunk the byte where the flipped
	// bits start within it.
	Chunk         direct.ChunkID
	OffsetInChunk int64
	Bits          int
}

// CorruptAt is Corrupt, and says where the damage landed.
func (c *Client) CorruptAt(ctx context.Context, key string, replica int, offset int64, bits int) (*Corrupted, error) {
	rec, err := c.Stat(ctx, key)
	if err != nil {
		return nil, err
	}
	l, err := objlayout.New(rec)
	if err != nil {
		return nil, err
	}
	if replica < 0 || replica >= l.Copies {
		return nil, base.InvalidArgumentf("replica %d outside [0, %d)", replica, l.Copies)
	}
	if bits <= 0 || bits > 64 {
		return nil, base.InvalidArgumentf("bits %d outside [1, 64]", bits)
	}
	chunk, within, err := l.Locate(offset)
	if err != nil {
		return nil, err
	}
	if within*8+int64(bits) > int64(l.ChunkLen(chunk))*8 {
		return nil, base.InvalidArgumentf("%d bits at offset %d cross the end of chunk %d", bits, offset, chunk)
	}
	shard := 0
	if l.EC {
		shard = replica
	}
	id := l.ID(shard, chunk)
	nc, err := c.nodeClient(ctx, l.Placement[replica])
	if err != nil {
		return nil, err
	}
	_, err = nc.CorruptChunk(ctx, &nodepb.CorruptChunkRequest{
		Chunk:       &nodepb.ChunkRef{Object: id.Object, Version: id.Version, Shard: id.Shard, Index: id.Index},
		OffsetBytes: within, Bits: int32(bits),
	})
	if err != nil {
		return nil, wire.FromStatus(err)
	}
	return &Corrupted{Record: rec, Replica: replica, Node: l.Placement[replica], Chunk: id, OffsetInChunk: within, Bits: bits}, nil
}

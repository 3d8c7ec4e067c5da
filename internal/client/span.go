package client

import (
	"context"
	"errors"
	"fmt"
	"io/fs"

	"github.com/flashmend/flashmend/internal/direct"
	"github.com/flashmend/flashmend/internal/gen/nodepb"
	"github.com/flashmend/flashmend/internal/wire"
)

// RepairSpan is the kind of a repair that rewrote only the lost sectors of
// a chunk (RepairJob.Kind, RepairEvent.Kind): Reparo's die repair at sector
// granularity.
const RepairSpan = "span"

// readChunkSpan asks a node for one span of a chunk (the node verifies the
// span against the stored sums of its sectors and re-reads once). The
// ReplicaRead holds the span and its sectors' sums, as the span decision
// cores take it; with allSums, all the chunk's sums are returned too when
// the node's record verified (nil otherwise). wire is the bytes the answer
// carried (data and sums).
func (c *Client) readChunkSpan(ctx context.Context, nodeID uint64, id direct.ChunkID, span direct.Span, allSums bool) (r direct.ReplicaRead, all []uint32, wireBytes int64) {
	nc, err := c.memberClient(ctx, nodeID, false)
	if err != nil {
		return direct.ReplicaRead{Fetched: true, Err: err}, nil, 0
	}
	ctx, cancel := context.WithTimeout(ctx, c.opts.RPCTimeout)
	defer cancel()
	resp, err := nc.ReadChunk(ctx, &nodepb.ReadChunkRequest{
		Chunk:       &nodepb.ChunkRef{Object: id.Object, Version: id.Version, Shard: id.Shard, Index: id.Index},
		OffsetBytes: int64(span.Off), LengthBytes: int64(span.Len), AllSums: allSums,
	})
	if err != nil {
		err = wire.FromStatus(err)
		if errors.Is(err, fs.ErrNotExist) {
			return direct.ReplicaRead{Fetched: true, Missing: true}, nil, 0
		}
		return direct.ReplicaRead{Fetched: true, Err: fmt.Errorf("node %d: read %s %v: %w", nodeID, id, span, err)}, nil, 0
	}
	wireBytes = int64(len(resp.Data) + 4*len(resp.Sums))
	r = replicaReadOf(resp)
	if allSums && resp.SumsValid {
		// The span's own sums, as the decision cores verify it.
		all = resp.Sums
		first, n := span.FirstSector(), direct.SectorCount(len(resp.Data))
		if first+n <= len(all) {
			r.Sums = all[first : first+n]
		} else {
			r.Sums, all = nil, nil
		}
	}
	return r, all, wireBytes
}

// patchChunk sends a node the new bytes of some spans of a chunk; the node
// merges them into what it holds, verifies the whole chunk against its
// sums (sums, when not nil, stand in for a sums record it lost) and
// rewrites only what changed. A result that does not verify is refused
// with a corruption error and changes nothing.
func (c *Client) patchChunk(ctx context.Context, nodeID uint64, id direct.ChunkID, spans []direct.Span, data [][]byte, sums []uint32) (int64, error) {
	nc, err := c.nodeClient(ctx, nodeID)
	if err != nil {
		return 0, err
	}
	req := &nodepb.PatchChunkRequest{
		Chunk: &nodepb.ChunkRef{Object: id.Object, Version: id.Version, Shard: id.Shard, Index: id.Index},
		Sums:  sums,
	}
	for k, sp := range spans {
		req.Patches = append(req.Patches, &nodepb.ChunkPatch{OffsetBytes: int64(sp.Off), Data: data[k]})
	}
	ctx, cancel := context.WithTimeout(ctx, c.opts.RPCTimeout)
	defer cancel()
	resp, err := nc.PatchChunk(ctx, req)
	if err != nil {
		return 0, fmt.Errorf("node %d: patch %s: %w", nodeID, id, wire.FromStatus(err))
	}
	return resp.BytesWritten, nil
}

package client

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"slices"
	"sync"
	"time"

	"github.com/flashmend/flashmend/internal/base"
	"github.com/flashmend/flashmend/internal/direct"
	"github.com/flashmend/flashmend/internal/gen/coordpb"
	"github.com/flashmend/flashmend/internal/gen/nodepb"
	"github.com/flashmend/flashmend/internal/gen/objectpb"
	"github.com/flashmend/flashmend/internal/wire"
)

// ParseRedundancy parses "rep" or "ec".
func ParseRedundancy(s string) (objectpb.Redundancy, error) {
	switch s {
	case "rep", "REP":
		return objectpb.Redundancy_REP, nil
	case "ec", "EC":
		return objectpb.Redundancy_EC, nil
	}
	return 0, base.InvalidArgumentf("unknown redundancy %q (want rep or ec)", s)
}

// writeTask is one chunk bound for one replica or shard.
type writeTask struct {
	replica int
	id      direct.ChunkID
	data    []byte
	info    *nodepb.BlobInfo
}

// Put writes data as a new version of key and commits it once every chunk
// is durable on every replica or shard. A node that fails during the write
// is excluded and the write starts again on a new placement.
func (c *Client) Put(ctx context.Context, key string, data []byte, red objectpb.Redundancy) (*objectpb.ObjectRecord, error) {
	if err := checkUTF8("object key", key); err != nil {
		return nil, err
	}
	if int64(len(data)) > c.info.MaxObjectBytes {
		return nil, base.InvalidArgumentf("object of %d bytes exceeds the cluster's limit of %s", len(data), base.Bytes(c.info.MaxObjectBytes))
	}
	var exclude []uint64
	var lastErr error
	for attempt := 0; attempt < c.opts.WriteAttempts; attempt++ {
		begin, err := c.coord.BeginPut(ctx, &coordpb.BeginPutRequest{
			Key: key, SizeBytes: int64(len(data)), Redundancy: red, Exclude: exclude,
		})
		if err != nil {
			if lastErr != nil {
				// No placement left without the nodes that failed: their
				// reason (a full device, say) is the one that matters.
				return nil, fmt.Errorf("put %q: nodes %v failed (%w); no placement left without them: %v", key, exclude, lastErr, wire.FromStatus(err))
			}
			return nil, wire.FromStatus(err)
		}
		if begin.Redundancy != objectpb.Redundancy_REDUNDANCY_UNSPECIFIED {
			red = begin.Redundancy // the cluster's wear policy decides
		}
		placement := make([]uint64, len(begin.Placement))
		for i, n := range begin.Placement {
			placement[i] = n.Id
		}
		rec := &objectpb.ObjectRecord{Key: key, Object: begin.Object, Version: begin.Version,
			SizeBytes: int64(len(data)), Redundancy: red, Placement: placement}
		failed, err := c.writeAll(ctx, rec, data)
		if err == nil {
			resp, err := c.coord.CommitPut(ctx, &coordpb.CommitPutRequest{
				Key: key, Version: begin.Version, SizeBytes: int64(len(data)), Redundancy: red, Placement: placement,
			})
			if err != nil {
				c.abort(key, begin.Version)
				return nil, wire.FromStatus(err)
			}
			return resp.Record, nil
		}
		c.abort(key, begin.Version)
		if len(failed) == 0 || ctx.Err() != nil {
			return nil, err
		}
		c.opts.Logf("client: put %q v%d: nodes %v failed (%v); placing again", key, begin.Version, failed, err)
		exclude = append(exclude, failed...)
		lastErr = err
	}
	return nil, fmt.Errorf("put %q: gave up after %d placements: %w", key, c.opts.WriteAttempts, lastErr)
}

// abort tells the coordinator to drop a pending version (best effort: an
// unreachable coordinator expires it on its own).
func (c *Client) abort(key string, version uint64) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := c.coord.AbortPut(ctx, &coordpb.AbortPutRequest{Key: key, Version: version}); err != nil {
		c.opts.Logf("client: abort of %q version %d: %v (it expires on its own)", key, version, err)
	}
}

// writeAll writes every chunk of a version to its replicas or shards. It
// returns the nodes that failed with operating errors (to be excluded), or
// a hard error (bad input, corruption) with no failed nodes.
func (c *Client) writeAll(ctx context.Context, rec *objectpb.ObjectRecord, data []byte) ([]uint64, error) {
	l, err := newLayout(rec)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	tasks := make(chan writeTask)
	var mu sync.Mutex
	var failed []uint64
	var firstErr error
	isFailed := func(replica int) bool {
		mu.Lock()
		defer mu.Unlock()
		return slices.Contains(failed, l.placement[replica])
	}
	var wg sync.WaitGroup
	for w := 0; w < c.opts.ChunksInFlight; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for t := range tasks {
				if isFailed(t.replica) {
					continue
				}
				err := c.writeChunk(ctx, l.placement[t.replica], t.id, t.data, false, t.info)
				if err == nil {
					continue
				}
				mu.Lock()
				if firstErr == nil {
					firstErr = err
				}
				if base.IsInvalidArgument(err) || base.IsCorruption(err) {
					cancel()
				} else if !slices.Contains(failed, l.placement[t.replica]) {
					failed = append(failed, l.placement[t.replica])
				}
				mu.Unlock()
			}
		}()
	}
	now := c.opts.Clock.Now().UnixMilli()
	info := func(shard int) *nodepb.BlobInfo { return l.blobInfo(shard, now) }
	if l.chunks == 0 {
		// An empty object stores no chunk; its replicas or shards are
		// only local index entries (so a rebuilt index still has it).
		for r := 0; r < l.copies; r++ {
			shard := 0
			if l.ec {
				shard = r
			}
			select {
			case tasks <- writeTask{replica: r, id: l.id(shard, 0), info: info(shard)}:
			case <-ctx.Done():
			}
		}
	}
produce:
	for i := 0; i < l.chunks; i++ {
		var batch []writeTask
		if l.ec {
			shards, err := c.rowShards(l, data, i)
			if err != nil {
				mu.Lock()
				firstErr = err
				mu.Unlock()
				break
			}
			for s, sh := range shards {
				t := writeTask{replica: s, id: l.id(s, i), data: sh}
				if i == 0 {
					t.info = info(s)
				}
				batch = append(batch, t)
			}
		} else {
			chunk := data[l.offset(i) : l.offset(i)+int64(l.chunkLen(i))]
			for r := 0; r < l.copies; r++ {
				t := writeTask{replica: r, id: l.id(0, i), data: chunk}
				if i == 0 {
					t.info = info(0)
				}
				batch = append(batch, t)
			}
		}
		for _, t := range batch {
			select {
			case tasks <- t:
			case <-ctx.Done():
				break produce
			}
		}
	}
	close(tasks)
	wg.Wait()
	mu.Lock()
	defer mu.Unlock()
	if firstErr == nil && ctx.Err() != nil {
		firstErr = ctx.Err()
	}
	if firstErr != nil && len(failed) > 0 && (base.IsInvalidArgument(firstErr) || base.IsCorruption(firstErr)) {
		failed = nil
	}
	return failed, firstErr
}

// writeChunk sends one chunk with its checksums, computed here once.
func (c *Client) writeChunk(ctx context.Context, nodeID uint64, id direct.ChunkID, data []byte, repair bool, info *nodepb.BlobInfo) error {
	return c.writeChunkReq(ctx, nodeID, id, data, repair, false, info)
}

// writeChunkReq is writeChunk with the missing flag: the repair re-creates
// a chunk the node did not have.
func (c *Client) writeChunkReq(ctx context.Context, nodeID uint64, id direct.ChunkID, data []byte, repair, missing bool, info *nodepb.BlobInfo) error {
	nc, err := c.nodeClient(ctx, nodeID)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, c.opts.RPCTimeout)
	defer cancel()
	_, err = nc.WriteChunk(ctx, &nodepb.WriteChunkRequest{
		Chunk: &nodepb.ChunkRef{Object: id.Object, Version: id.Version, Shard: id.Shard, Index: id.Index},
		Data:  data, Sums: direct.Sums(id, data), Repair: repair, Info: info, Missing: missing,
	})
	if err != nil {
		return fmt.Errorf("node %d: write %s: %w", nodeID, id, wire.FromStatus(err))
	}
	return nil
}

// readChunk asks a node for a chunk; the node verifies and re-reads once.
func (c *Client) readChunk(ctx context.Context, nodeID uint64, id direct.ChunkID) direct.ReplicaRead {
	nc, err := c.memberClient(ctx, nodeID, false)
	if err != nil {
		return direct.ReplicaRead{Fetched: true, Err: err}
	}
	ctx, cancel := context.WithTimeout(ctx, c.opts.RPCTimeout)
	defer cancel()
	resp, err := nc.ReadChunk(ctx, &nodepb.ReadChunkRequest{
		Chunk: &nodepb.ChunkRef{Object: id.Object, Version: id.Version, Shard: id.Shard, Index: id.Index},
	})
	if err != nil {
		err = wire.FromStatus(err)
		if errors.Is(err, fs.ErrNotExist) {
			// The node answered and has no such chunk, although the
			// index places it there: damage, re-created by the repair.
			return direct.ReplicaRead{Fetched: true, Missing: true}
		}
		return direct.ReplicaRead{Fetched: true, Err: fmt.Errorf("node %d: read %s: %w", nodeID, id, err)}
	}
	r := direct.ReplicaRead{Fetched: true, Data: resp.Data}
	if resp.SumsValid {
		r.Sums = resp.Sums
		if r.Sums == nil {
			r.Sums = []uint32{}
		}
	} else {
		r.DamagedSums = resp.Sums
	}
	return r
}

package kv

import (
	"context"
	"sync"
	"time"

	"github.com/flashmend/flashmend/internal/base"
	"github.com/flashmend/flashmend/internal/gen/kvpb"
	"github.com/flashmend/flashmend/internal/kv/engine"
)

// blockFetchTimeout bounds one peer's answer to FetchBlock.
const blockFetchTimeout = 2 * time.Second

// BlockForPeer answers a peer's FetchBlock: this replica's copies of the
// block, as stored (engine.StateMachine.BlockCopies).
func (r *Replica) BlockForPeer(req *kvpb.FetchBlockRequest) (*kvpb.FetchBlockResponse, error) {
	if req.Length == 0 || req.TableSize == 0 {
		return nil, base.InvalidArgumentf("kv: fetch block %d/%d of a %d-byte table", req.Offset, req.Length, req.TableSize)
	}
	r.smMu.RLock()
	defer r.smMu.RUnlock()
	if r.smClosed || r.Failed() != nil {
		return nil, r.unavailable()
	}
	copies, err := r.sm.BlockCopies(req.TableSize, req.Offset, req.Length)
	if err != nil {
		return nil, base.InvalidArgumentf("%v", err)
	}
	return &kvpb.FetchBlockResponse{Copies: copies, Crc: entriesCRC(copies)}, nil
}

// mergeRange repairs the damaged data blocks (offsets in the table at
// path) of a range no peer could send, by block merge
// (engine.MergeBlock): each block is put together from this replica's
// damaged copy and the peers' copies of the same table, and written over
// the damaged copy. It reports whether every block was repaired and the
// range now reads back.
func (r *Replica) mergeRange(path string, offsets []uint64, rg Range) bool {
	if len(offsets) == 0 {
		return false
	}
	st, err := r.fs.Stat(path)
	if err != nil {
		return false
	}
	for _, off := range offsets {
		h, err := engine.BlockHandle(r.fs, path, off)
		if err != nil {
			return false
		}
		own, err := engine.ReadBlock(r.fs, path, h)
		if err != nil {
			return false
		}
		req := &kvpb.FetchBlockRequest{Shard: uint64(r.shard.ID), TableSize: uint64(st.Size()), Offset: h.Offset, Length: h.Length}
		merged, _, ok := engine.MergeBlock(h, own, r.peerBlockCopies(req))
		if !ok {
			return false
		}
		if err := engine.WriteBlock(r.fs, path, h, merged); err != nil {
			return false
		}
		r.mu.Lock()
		r.stats.BlocksMerged++
		r.mu.Unlock()
	}
	r.smMu.RLock()
	defer r.smMu.RUnlock()
	if r.smClosed {
		return false
	}
	_, _, err = engine.Scan(r.sm.DB(), rg.Start, rg.End, 0)
	return err == nil
}

// peerBlockCopies asks every peer for its copies of a block, at once, and
// returns those that arrived intact.
func (r *Replica) peerBlockCopies(req *kvpb.FetchBlockRequest) [][]byte {
	var mu sync.Mutex
	var out [][]byte
	var wg sync.WaitGroup
	for rid, node := range r.shard.Replicas {
		if rid == r.id {
			continue
		}
		wg.Add(1)
		go func(node base.NodeID) {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(context.Background(), blockFetchTimeout)
			defer cancel()
			resp, err := r.env.FetchBlock(ctx, node, req)
			if err != nil || entriesCRC(resp.Copies) != resp.Crc {
				return
			}
			mu.Lock()
			out = append(out, resp.Copies...)
			mu.Unlock()
		}(node)
	}
	wg.Wait()
	return out
}

package node

import (
	"context"
	"io"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/flashmend/flashmend/internal/base"
	"github.com/flashmend/flashmend/internal/direct"
	"github.com/flashmend/flashmend/internal/gen/nodepb"
	"github.com/flashmend/flashmend/internal/objstore"
	"github.com/flashmend/flashmend/internal/wire"
)

// service implements nodepb.NodeServer over the node's chunk store.
type service struct {
	nodepb.UnimplementedNodeServer
	n *Node
}

func chunkID(ref *nodepb.ChunkRef) (direct.ChunkID, error) {
	if ref == nil {
		return direct.ChunkID{}, base.InvalidArgumentf("missing chunk reference")
	}
	if ref.Version == 0 {
		return direct.ChunkID{}, base.InvalidArgumentf("chunk reference with version 0")
	}
	if ref.Shard >= direct.TotalShards {
		return direct.ChunkID{}, base.InvalidArgumentf("shard %d out of range", ref.Shard)
	}
	return direct.ChunkID{Object: ref.Object, Version: ref.Version, Shard: ref.Shard, Index: ref.Index}, nil
}

func (s *service) WriteChunk(ctx context.Context, req *nodepb.WriteChunkRequest) (*nodepb.WriteChunkResponse, error) {
	if err := s.writeChunk(req, nil); err != nil {
		return nil, wire.ToStatus(err)
	}
	return &nodepb.WriteChunkResponse{}, nil
}

// WriteChunks stores a stream of chunks, each as WriteChunk does, and
// answers once all are stored; the first that fails ends the call. Each
// request's data aliases a pooled receive buffer (wire.ChunkWrite), handed
// back once the chunk is stored (the store keeps no reference to it).
//
// Group commit: the stream's new chunks are written in one store batch
// (objstore.Batch) and made durable together when the stream ends, one
// fsync per file instead of two per chunk; only then are the blob infos
// the stream carried recorded (so a node's local index names a blob only
// once its chunks are durable) and the stream answered. Nothing is
// acknowledged before it is durable; a stream that fails acknowledges
// nothing (the client places the write again).
func (s *service) WriteChunks(stream nodepb.Node_WriteChunksServer) error {
	var stored uint32
	batch := s.n.chunks.NewBatch()
	var infos []*nodepb.BlobInfo
	for {
		// NB: the request is set for a codec other than the data path's
		// (which would unmarshal into it as protobuf does).
		w := wire.ChunkWrite{WriteChunkRequest: &nodepb.WriteChunkRequest{}}
		if err := stream.RecvMsg(&w); err != nil {
			if err != io.EOF {
				return err
			}
			if err := batch.Commit(); err != nil {
				return wire.ToStatus(err)
			}
			for _, info := range infos {
				if err := s.n.chunks.PutBlobInfo(blobInfoOf(info)); err != nil {
					return wire.ToStatus(err)
				}
			}
			return stream.SendAndClose(&nodepb.WriteChunksResponse{Chunks: stored})
		}
		req := w.WriteChunkRequest
		err := s.writeChunk(req, batch)
		w.Release()
		if err != nil {
			// The chunks before this one stay stored (not acknowledged,
			// nor synced): their sums records go out.
			if ferr := batch.Flush(); ferr != nil {
				s.n.cfg.Logf("node %s: write stream failed (%v); its chunks' sums records: %v", s.n.id, err, ferr)
			}
			return wire.ToStatus(err)
		}
		if req.Info != nil {
			infos = append(infos, req.Info)
		}
		stored++
	}
}

// writeChunk stores one chunk (or an empty object's index entry), counts
// and records it, and records the blob's info when the request carries it.
// With a batch (WriteChunks), a new chunk is written in it and the blob's
// info is left to the caller, to record once the batch is durable.
func (s *service) writeChunk(req *nodepb.WriteChunkRequest, batch *objstore.ChunkBatch) error {
	id, err := chunkID(req.Chunk)
	if err != nil {
		return err
	}
	if info := req.Info; info != nil {
		if info.Object != id.Object || info.Version != id.Version || info.Shard != id.Shard || info.Key == "" {
			return base.InvalidArgumentf("blob info %v does not match chunk %s", info, id)
		}
	}
	if req.Missing && !req.Repair {
		return base.InvalidArgumentf("chunk %s: a missing-chunk write must be a repair", id)
	}
	if len(req.Data) == 0 && req.Info != nil && req.Info.Chunks == 0 && req.Info.SizeBytes == 0 && id.Index == 0 {
		// An empty object has no chunk: only its local index entry, so
		// that the nodes still name it when the index is rebuilt.
		if batch != nil {
			return nil
		}
		return s.n.chunks.PutBlobInfo(blobInfoOf(req.Info))
	}
	if batch != nil && !req.Repair {
		err = s.n.chunks.WriteChunkIn(batch, id, req.Data, req.Sums)
	} else {
		err = s.n.chunks.WriteChunk(id, req.Data, req.Sums, req.Repair)
	}
	if err != nil {
		switch {
		case base.IsCorruption(err):
			s.n.history.record(KindRejectedWrite, &id, "")
		case req.Repair && !base.IsInvalidArgument(err):
			// Never silent: counted, kept in the history with its reason,
			// and logged; the writer reports it and tries again later.
			s.n.history.record(KindRepairFailed, &id, err.Error())
			s.n.cfg.Logf("node %s: repair of %s failed: %v", s.n.id, id, err)
		case base.IsNoSpace(err):
			s.n.history.count(CountRefusedFull, 1)
		}
		return err
	}
	switch {
	case req.Missing:
		s.n.chunks.AddMissingRepairs(1)
		s.n.history.record(KindMissingRepaired, &id, "")
	case req.Repair:
		s.n.history.record(KindRepaired, &id, "")
	}
	if info := req.Info; info != nil && batch == nil {
		return s.n.chunks.PutBlobInfo(blobInfoOf(info))
	}
	return nil
}

func blobInfoOf(info *nodepb.BlobInfo) objstore.BlobInfo {
	return objstore.BlobInfo{
		Key: info.Key, Object: info.Object, Version: info.Version, Shard: info.Shard,
		Redundancy: info.Redundancy, Chunks: info.Chunks,
		SizeBytes: info.SizeBytes, Placement: info.Placement, CreatedUnixMs: info.CreatedUnixMs,
	}
}

func (s *service) ReadChunk(ctx context.Context, req *nodepb.ReadChunkRequest) (*nodepb.ReadChunkResponse, error) {
	id, err := chunkID(req.Chunk)
	if err != nil {
		return nil, wire.ToStatus(err)
	}
	if req.LengthBytes == 0 {
		if req.OffsetBytes != 0 {
			return nil, wire.ToStatus(base.InvalidArgumentf("chunk %s: offset %d without a length", id, req.OffsetBytes))
		}
		resp, err := s.readChunk(id, nil)
		if err != nil {
			return nil, wire.ToStatus(err)
		}
		return resp, nil
	}
	if req.OffsetBytes < 0 || req.OffsetBytes >= direct.ChunkSize || req.LengthBytes < 0 || req.LengthBytes > direct.ChunkSize {
		return nil, wire.ToStatus(base.InvalidArgumentf("chunk %s: range [%d, +%d) outside a chunk", id, req.OffsetBytes, req.LengthBytes))
	}
	span := direct.Span{Off: int(req.OffsetBytes), Len: int(min(req.LengthBytes, direct.ChunkSize-req.OffsetBytes))}
	r, err := s.n.chunks.ReadChunkSpan(id, span, req.AllSums)
	if err != nil {
		return nil, wire.ToStatus(err)
	}
	return s.readResponse(id, r), nil
}

// PatchChunk repairs part of a chunk (ChunkStore.PatchChunk): the die
// repair's write of the lost sectors alone.
func (s *service) PatchChunk(ctx context.Context, req *nodepb.PatchChunkRequest) (*nodepb.PatchChunkResponse, error) {
	id, err := chunkID(req.Chunk)
	if err != nil {
		return nil, wire.ToStatus(err)
	}
	if len(req.Patches) > direct.MaxSpans {
		return nil, wire.ToStatus(base.InvalidArgumentf("patch %s: %d patches, at most %d", id, len(req.Patches), direct.MaxSpans))
	}
	patches := make([]objstore.Patch, len(req.Patches))
	for i, p := range req.Patches {
		if p.OffsetBytes < 0 || p.OffsetBytes >= direct.ChunkSize {
			return nil, wire.ToStatus(base.InvalidArgumentf("patch %s: offset %d outside a chunk", id, p.OffsetBytes))
		}
		patches[i] = objstore.Patch{Off: int(p.OffsetBytes), Data: p.Data}
	}
	n, err := s.n.chunks.PatchChunk(id, patches, req.Sums)
	if err != nil {
		if !base.IsCorruption(err) && !base.IsInvalidArgument(err) && !objstore.IsNotFound(err) {
			s.n.history.record(KindRepairFailed, &id, err.Error())
			s.n.cfg.Logf("node %s: patch of %s failed: %v", s.n.id, id, err)
		}
		return nil, wire.ToStatus(err)
	}
	if n > 0 {
		s.n.history.record(KindRepaired, &id, "")
	}
	return &nodepb.PatchChunkResponse{BytesWritten: n}, nil
}

// readChunk reads, verifies (re-reading once) and counts one chunk, into a
// buffer from alloc (nil: a new one).
func (s *service) readChunk(id direct.ChunkID, alloc func(n int) []byte) (*nodepb.ReadChunkResponse, error) {
	r, err := s.n.chunks.ReadChunkInto(id, alloc)
	if err != nil {
		return nil, err
	}
	return s.readResponse(id, r), nil
}

// readResponse counts a chunk (or span) read and answers it.
func (s *service) readResponse(id direct.ChunkID, r objstore.ChunkRead) *nodepb.ReadChunkResponse {
	s.n.history.countReads(1)
	switch {
	case r.Transient:
		s.n.history.record(KindTransient, &id, "")
	case r.Corrupt:
		s.n.history.record(KindPersistent, &id, "")
	}
	sums := r.Sums
	if sums == nil {
		sums = r.DamagedSums // sums_valid false: per-sector use only
	}
	return &nodepb.ReadChunkResponse{
		Data: r.Data, Sums: sums, SumsValid: r.Sums != nil, Corrupt: r.Corrupt, Transient: r.Transient,
	}
}

// MaxReadChunks bounds the chunks one ReadChunks call asks for.
const MaxReadChunks = 1024

// readChunksAhead is how many chunks a ReadChunks call reads ahead of the
// one it is sending: the node holds at most readChunksAhead+1 chunks (plus
// what gRPC buffers up to the reader's flow-control window) per call.
const readChunksAhead = 2

// ReadChunks streams many chunks of one replica or shard, each read and
// verified as ReadChunk does, in the order asked. A chunk that is missing
// or fails to read is answered as such and the call goes on; the reading
// runs one step ahead of the sending, on its own goroutine, so the file
// reads overlap the network.
func (s *service) ReadChunks(req *nodepb.ReadChunksRequest, stream nodepb.Node_ReadChunksServer) error {
	if req.Version == 0 {
		return wire.ToStatus(base.InvalidArgumentf("chunk reference with version 0"))
	}
	if req.Shard >= direct.TotalShards {
		return wire.ToStatus(base.InvalidArgumentf("shard %d out of range", req.Shard))
	}
	if len(req.Indexes) > MaxReadChunks {
		return wire.ToStatus(base.InvalidArgumentf("%d chunks asked in one call, at most %d", len(req.Indexes), MaxReadChunks))
	}
	ctx := stream.Context()
	// Each chunk is read into a buffer of the data path's pool and sent
	// without a copy (wire.ChunkFrame): gRPC puts the buffer back once the
	// transport has written it.
	out := make(chan *wire.ChunkFrame, readChunksAhead)
	go func() {
		defer close(out)
		for _, idx := range req.Indexes {
			id := direct.ChunkID{Object: req.Object, Version: req.Version, Shard: req.Shard, Index: idx}
			f := &wire.ChunkFrame{Resp: &nodepb.ReadChunksResponse{Index: idx}}
			r, err := s.readChunk(id, func(n int) []byte {
				f.Buf = wire.ChunkBufferPool.Get(n)
				return *f.Buf
			})
			switch {
			case objstore.IsNotFound(err):
				f.Resp.Missing = true
			case err != nil:
				f.Resp.Error = err.Error()
			default:
				f.Resp.Chunk = r
			}
			select {
			case out <- f:
			case <-ctx.Done():
				return
			}
		}
	}()
	for f := range out {
		if err := stream.SendMsg(f); err != nil {
			// The reader went away: stop the reads too (ctx is done).
			for range out {
			}
			return err
		}
	}
	return ctx.Err()
}

func (s *service) DeleteBlob(ctx context.Context, req *nodepb.DeleteBlobRequest) (*nodepb.DeleteBlobResponse, error) {
	if req.Version == 0 {
		return nil, wire.ToStatus(base.InvalidArgumentf("delete of version 0"))
	}
	return &nodepb.DeleteBlobResponse{}, wire.ToStatus(s.n.chunks.DeleteBlob(req.Object, req.Version))
}

func (s *service) CorruptChunk(ctx context.Context, req *nodepb.CorruptChunkRequest) (*nodepb.CorruptChunkResponse, error) {
	id, err := chunkID(req.Chunk)
	if err != nil {
		return nil, wire.ToStatus(err)
	}
	if req.OffsetBytes < 0 || req.OffsetBytes >= direct.ChunkSize {
		return nil, wire.ToStatus(base.InvalidArgumentf("offset %d outside the chunk", req.OffsetBytes))
	}
	return &nodepb.CorruptChunkResponse{}, wire.ToStatus(s.n.chunks.Corrupt(id, req.OffsetBytes, int(req.Bits)))
}

func (s *service) InjectUBER(ctx context.Context, req *nodepb.InjectUBERRequest) (*nodepb.InjectUBERResponse, error) {
	return &nodepb.InjectUBERResponse{}, wire.ToStatus(s.n.fault.SetUBER(req.Rate, req.Persistent))
}

func (s *service) Fill(ctx context.Context, req *nodepb.FillRequest) (*nodepb.FillResponse, error) {
	if !req.Fill {
		if req.LeaveBytes != 0 {
			return nil, wire.ToStatus(base.InvalidArgumentf("fill: leave_bytes %d given with fill false (removing the ballast)", req.LeaveBytes))
		}
		free, err := s.n.Unfill()
		if err != nil {
			return nil, wire.ToStatus(err)
		}
		return &nodepb.FillResponse{FreeBytes: uint64(free)}, nil
	}
	if req.LeaveBytes > 1<<50 {
		return nil, wire.ToStatus(base.InvalidArgumentf("fill: leave_bytes %d is more than any device", req.LeaveBytes))
	}
	ballast, free, err := s.n.Fill(base.Bytes(req.LeaveBytes))
	if err != nil {
		return nil, wire.ToStatus(err)
	}
	return &nodepb.FillResponse{BallastBytes: uint64(ballast), FreeBytes: uint64(free)}, nil
}

func (s *service) FailDie(ctx context.Context, req *nodepb.FailDieRequest) (*nodepb.FailDieResponse, error) {
	df, ok := s.n.inner.(objstore.DieFailer)
	if !ok {
		return nil, wire.ToStatus(base.InvalidArgumentf("node %s: store %s has no dies (not on emulated flash)", s.n.id, s.n.inner.Name()))
	}
	return &nodepb.FailDieResponse{}, wire.ToStatus(df.FailDie(int(req.Die)))
}

func (s *service) DieRepairs(ctx context.Context, req *nodepb.DieRepairsRequest) (*nodepb.DieRepairsResponse, error) {
	return &nodepb.DieRepairsResponse{Jobs: s.n.DieRepairs()}, nil
}

func (s *service) DieRepairDone(ctx context.Context, req *nodepb.DieRepairDoneRequest) (*nodepb.DieRepairDoneResponse, error) {
	return &nodepb.DieRepairDoneResponse{}, wire.ToStatus(s.n.DieRepairDone(req))
}

func (s *service) Stats(ctx context.Context, req *nodepb.StatsRequest) (*nodepb.StatsResponse, error) {
	resp := s.n.Stats()
	if req.WithHistory {
		resp.History = s.n.RepairHistory()
	}
	return resp, nil
}

func (s *service) Metrics(ctx context.Context, req *nodepb.MetricsRequest) (*nodepb.MetricsResponse, error) {
	if s.n.cfg.Metrics == nil {
		return nil, status.Error(codes.Unimplemented, "this node runs without metrics (--metrics off)")
	}
	text, err := s.n.cfg.Metrics()
	if err != nil {
		return nil, status.Errorf(codes.Internal, "metrics: %v", err)
	}
	return &nodepb.MetricsResponse{Text: text}, nil
}

func (s *service) ListBlobs(ctx context.Context, req *nodepb.ListBlobsRequest) (*nodepb.ListBlobsResponse, error) {
	blobs, err := s.n.chunks.Blobs()
	if err != nil {
		return nil, wire.ToStatus(err)
	}
	present, err := s.n.chunks.ChunkCounts()
	if err != nil {
		return nil, wire.ToStatus(err)
	}
	resp := &nodepb.ListBlobsResponse{}
	for _, b := range blobs {
		resp.Blobs = append(resp.Blobs, &nodepb.BlobInfo{
			Key: b.Key, Object: b.Object, Version: b.Version, Shard: b.Shard, Redundancy: b.Redundancy, Chunks: b.Chunks,
			SizeBytes: b.SizeBytes, Placement: b.Placement, CreatedUnixMs: b.CreatedUnixMs,
			ChunksPresent: uint32(present[objstore.BlobShard{Object: b.Object, Version: b.Version, Shard: b.Shard}]),
		})
	}
	return resp, nil
}

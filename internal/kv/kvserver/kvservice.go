package kvserver

import (
	"context"

	"github.com/flashmend/flashmend/internal/base"
	"github.com/flashmend/flashmend/internal/gen/kvpb"
	"github.com/flashmend/flashmend/internal/kv"
	"github.com/flashmend/flashmend/internal/kv/kvapi"
)

// kvServer is the client API. Every handler validates its input first.
type kvServer struct {
	kvpb.UnimplementedKVServer
	svc *Service
}

func (s *kvServer) shardReplica(shard uint64, keys ...[]byte) (*kv.Replica, error) {
	r, err := s.svc.replica(shard)
	if err != nil {
		return nil, err
	}
	for _, k := range keys {
		if !r.Shard().Range.Contains(k) {
			return nil, base.InvalidArgumentf("kv: key %q is not in shard %s %s", k, r.Shard().ID, r.Shard().Range)
		}
	}
	return r, nil
}

func (s *kvServer) Get(ctx context.Context, req *kvpb.GetRequest) (*kvpb.GetResponse, error) {
	if err := kvapi.ValidateKey(req.Key); err != nil {
		return nil, kvapi.ToStatus(err)
	}
	r, err := s.shardReplica(req.Shard, req.Key)
	if err != nil {
		return nil, kvapi.ToStatus(err)
	}
	if req.TxnId != 0 {
		v, found, err := r.TxnGet(req.TxnId, req.Key)
		if err != nil {
			return nil, kvapi.ToStatus(err)
		}
		return &kvpb.GetResponse{Found: found, Value: v}, nil
	}
	v, found, applied, err := r.Get(ctx, req.Key, req.Read)
	if err != nil {
		return nil, kvapi.ToStatus(err)
	}
	return &kvpb.GetResponse{Found: found, Value: v, AppliedIndex: applied}, nil
}

func (s *kvServer) Scan(ctx context.Context, req *kvpb.ScanRequest) (*kvpb.ScanResponse, error) {
	if err := kvapi.ValidateRange(req.Start, req.End); err != nil {
		return nil, kvapi.ToStatus(err)
	}
	limit, err := kvapi.ValidateLimit(req.Limit)
	if err != nil {
		return nil, kvapi.ToStatus(err)
	}
	pageBytes, err := kvapi.ValidatePageBytes(req.MaxBytes)
	if err != nil {
		return nil, kvapi.ToStatus(err)
	}
	r, err := s.shardReplica(req.Shard)
	if err != nil {
		return nil, kvapi.ToStatus(err)
	}
	// Clip to the shard.
	start, end := req.Start, req.End
	if string(start) < string(r.Shard().Range.Start) {
		start = r.Shard().Range.Start
	}
	if len(r.Shard().Range.End) > 0 && (len(end) == 0 || string(end) > string(r.Shard().Range.End)) {
		end = r.Shard().Range.End
	}
	if len(end) > 0 && string(start) >= string(end) {
		return &kvpb.ScanResponse{}, nil
	}
	if req.TxnId != 0 {
		rows, more, err := r.TxnScan(req.TxnId, start, end, limit)
		if err != nil {
			return nil, kvapi.ToStatus(err)
		}
		return &kvpb.ScanResponse{Rows: rows, More: more}, nil
	}
	rows, more, applied, err := r.Scan(ctx, start, end, limit, pageBytes, req.Read)
	if err != nil {
		return nil, kvapi.ToStatus(err)
	}
	return &kvpb.ScanResponse{Rows: rows, More: more, AppliedIndex: applied}, nil
}

func (s *kvServer) batchReplica(shard uint64, b *kvpb.WriteBatch) (*kv.Replica, error) {
	if err := kvapi.ValidateBatch(b); err != nil {
		return nil, err
	}
	var keys [][]byte
	for _, op := range b.Ops {
		keys = append(keys, op.Key)
	}
	for _, c := range b.Conditions {
		keys = append(keys, c.Key)
	}
	return s.shardReplica(shard, keys...)
}

func (s *kvServer) Write(ctx context.Context, req *kvpb.WriteRequest) (*kvpb.WriteResponse, error) {
	r, err := s.batchReplica(req.Shard, req.Batch)
	if err != nil {
		return nil, kvapi.ToStatus(err)
	}
	if len(req.Batch.Scans) > 0 {
		return nil, kvapi.ToStatus(base.InvalidArgumentf("kv: scan validation is for transactions only"))
	}
	idx, err := r.Write(ctx, req.Batch)
	if err != nil {
		return nil, kvapi.ToStatus(err)
	}
	return &kvpb.WriteResponse{Index: idx}, nil
}

func (s *kvServer) TxnBegin(ctx context.Context, req *kvpb.TxnBeginRequest) (*kvpb.TxnBeginResponse, error) {
	r, err := s.shardReplica(req.Shard)
	if err != nil {
		return nil, kvapi.ToStatus(err)
	}
	id, err := r.TxnBegin(ctx)
	if err != nil {
		return nil, kvapi.ToStatus(err)
	}
	return &kvpb.TxnBeginResponse{TxnId: id}, nil
}

func (s *kvServer) TxnCommit(ctx context.Context, req *kvpb.TxnCommitRequest) (*kvpb.WriteResponse, error) {
	r, err := s.shardReplica(req.Shard)
	if err != nil {
		return nil, kvapi.ToStatus(err)
	}
	for _, op := range req.Ops {
		if !r.Shard().Range.Contains(op.Key) {
			r.TxnAbort(req.TxnId)
			return nil, kvapi.ToStatus(base.InvalidArgumentf("kv: key %q is not in shard %s", op.Key, r.Shard().ID))
		}
	}
	idx, err := r.TxnCommit(ctx, req.TxnId, req.Ops)
	if err != nil {
		return nil, kvapi.ToStatus(err)
	}
	return &kvpb.WriteResponse{Index: idx}, nil
}

func (s *kvServer) TxnAbort(_ context.Context, req *kvpb.TxnAbortRequest) (*kvpb.TxnAbortResponse, error) {
	r, err := s.shardReplica(req.Shard)
	if err != nil {
		return nil, kvapi.ToStatus(err)
	}
	r.TxnAbort(req.TxnId)
	return &kvpb.TxnAbortResponse{}, nil
}

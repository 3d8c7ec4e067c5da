package kv

import (
	"context"

	"github.com/flashmend/flashmend/internal/base"
	"github.com/flashmend/flashmend/internal/gen/kvpb"
)

// kvServer is the client API. Every handler validates its input first.
type kvServer struct {
	kvpb.UnimplementedKVServer
	svc *Service
}

func (s *kvServer) shardReplica(shard uint64, keys ...[]byte) (*Replica, error) {
	r, err := s.svc.replica(shard)
	if err != nil {
		return nil, err
	}
	for _, k := range keys {
		if !r.shard.Range.Contains(k) {
			return nil, base.InvalidArgumentf("kv: key %q is not in shard %s %s", k, r.shard.ID, r.shard.Range)
		}
	}
	return r, nil
}

func (s *kvServer) Get(ctx context.Context, req *kvpb.GetRequest) (*kvpb.GetResponse, error) {
	if err := validateKey(req.Key); err != nil {
		return nil, toStatus(err)
	}
	r, err := s.shardReplica(req.Shard, req.Key)
	if err != nil {
		return nil, toStatus(err)
	}
	if req.TxnId != 0 {
		v, found, err := r.TxnGet(req.TxnId, req.Key)
		if err != nil {
			return nil, toStatus(err)
		}
		return &kvpb.GetResponse{Found: found, Value: v}, nil
	}
	v, found, applied, err := r.Get(ctx, req.Key, req.Read)
	if err != nil {
		return nil, toStatus(err)
	}
	return &kvpb.GetResponse{Found: found, Value: v, AppliedIndex: applied}, nil
}

func (s *kvServer) Scan(ctx context.Context, req *kvpb.ScanRequest) (*kvpb.ScanResponse, error) {
	if err := validateRange(req.Start, req.End); err != nil {
		return nil, toStatus(err)
	}
	limit, err := validateLimit(req.Limit)
	if err != nil {
		return nil, toStatus(err)
	}
	pageBytes, err := validatePageBytes(req.MaxBytes)
	if err != nil {
		return nil, toStatus(err)
	}
	r, err := s.shardReplica(req.Shard)
	if err != nil {
		return nil, toStatus(err)
	}
	// Clip to the shard.
	start, end := req.Start, req.End
	if string(start) < string(r.shard.Range.Start) {
		start = r.shard.Range.Start
	}
	if len(r.shard.Range.End) > 0 && (len(end) == 0 || string(end) > string(r.shard.Range.End)) {
		end = r.shard.Range.End
	}
	if len(end) > 0 && string(start) >= string(end) {
		return &kvpb.ScanResponse{}, nil
	}
	if req.TxnId != 0 {
		rows, more, err := r.TxnScan(req.TxnId, start, end, limit)
		if err != nil {
			return nil, toStatus(err)
		}
		return &kvpb.ScanResponse{Rows: rows, More: more}, nil
	}
	rows, more, applied, err := r.Scan(ctx, start, end, limit, pageBytes, req.Read)
	if err != nil {
		return nil, toStatus(err)
	}
	return &kvpb.ScanResponse{Rows: rows, More: more, AppliedIndex: applied}, nil
}

func (s *kvServer) batchReplica(shard uint64, b *kvpb.WriteBatch) (*Replica, error) {
	if err := validateBatch(b); err != nil {
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
		return nil, toStatus(err)
	}
	if len(req.Batch.Scans) > 0 {
		return nil, toStatus(base.InvalidArgumentf("kv: scan validation is for transactions only"))
	}
	idx, err := r.Write(ctx, req.Batch)
	if err != nil {
		return nil, toStatus(err)
	}
	return &kvpb.WriteResponse{Index: idx}, nil
}

func (s *kvServer) TxnBegin(ctx context.Context, req *kvpb.TxnBeginRequest) (*kvpb.TxnBeginResponse, error) {
	r, err := s.shardReplica(req.Shard)
	if err != nil {
		return nil, toStatus(err)
	}
	id, err := r.TxnBegin(ctx)
	if err != nil {
		return nil, toStatus(err)
	}
	return &kvpb.TxnBeginResponse{TxnId: id}, nil
}

func (s *kvServer) TxnCommit(ctx context.Context, req *kvpb.TxnCommitRequest) (*kvpb.WriteResponse, error) {
	r, err := s.shardReplica(req.Shard)
	if err != nil {
		return nil, toStatus(err)
	}
	for _, op := range req.Ops {
		if !r.shard.Range.Contains(op.Key) {
			r.TxnAbort(req.TxnId)
			return nil, toStatus(base.InvalidArgumentf("kv: key %q is not in shard %s", op.Key, r.shard.ID))
		}
	}
	idx, err := r.TxnCommit(ctx, req.TxnId, req.Ops)
	if err != nil {
		return nil, toStatus(err)
	}
	return &kvpb.WriteResponse{Index: idx}, nil
}

func (s *kvServer) TxnAbort(_ context.Context, req *kvpb.TxnAbortRequest) (*kvpb.TxnAbortResponse, error) {
	r, err := s.shardReplica(req.Shard)
	if err != nil {
		return nil, toStatus(err)
	}
	r.TxnAbort(req.TxnId)
	return &kvpb.TxnAbortResponse{}, nil
}

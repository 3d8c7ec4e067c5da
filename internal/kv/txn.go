package kv

import (
	"context"
	"errors"
	"sync"

	"github.com/flashmend/flashmend/internal/kv/engine"
	"github.com/flashmend/flashmend/internal/kv/kvapi"

	"github.com/cockroachdb/pebble/v2"

	"github.com/flashmend/flashmend/internal/base"
	"github.com/flashmend/flashmend/internal/gen/kvpb"
)

// txn is an open transaction on the leader: reads come from one Pebble
// snapshot; commit proposes the writes with every read as a condition
// (optimistic validation at apply time, on every replica alike).
type txn struct {
	id uint64
	// mu guards snap: reads of the snapshot and its release exclude each
	// other. Lock order: never take Replica.mu while holding it.
	mu    sync.Mutex
	snap  *pebble.Snapshot
	epoch uint64
	conds []*kvpb.Condition
	scans []*kvpb.ScanRead
	// invalid is set when a repair replaced data under the snapshot.
	invalid bool
}

func (t *txn) release() {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.snap != nil {
		_ = t.snap.Close()
		t.snap = nil
	}
}

// invalidateSnapshots aborts every open transaction: a patch or rebuild
// changed this replica's data under their snapshots (DIRECT 001 4.2,
// snapshot invalidation).
func (r *Replica) invalidateSnapshots() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.epoch++
	for _, t := range r.txns {
		if !t.invalid {
			// NB: the snapshot is closed by TxnAbort or TxnCommit, never
			// here: a TxnGet may be reading it right now.
			t.invalid = true
			r.stats.TxnsInvalidated++
		}
	}
}

// TxnBegin opens a transaction at a linearizable point.
func (r *Replica) TxnBegin(ctx context.Context) (uint64, error) {
	if !r.IsLeader() {
		return 0, &kvapi.Error{Reason: kvpb.ErrorDetail_NOT_LEADER, Leader: r.leaderNode(), Msg: r.String() + " is not the leader"}
	}
	if err := r.prepareRead(ctx, &kvpb.ReadOptions{Consistency: kvpb.Consistency_STRONG}); err != nil {
		return 0, err
	}
	if err := r.readable(Range{}); err != nil {
		// A replica under repair cannot offer a whole snapshot; the client
		// retries (the leader may move, or the repair finishes).
		return 0, kvapi.NewError(kvpb.ErrorDetail_REPLICA_UNAVAILABLE, "%s: %v", r, err)
	}
	r.smMu.RLock()
	if r.smClosed {
		r.smMu.RUnlock()
		return 0, kvapi.ErrReplicaUnavailable
	}
	snap := r.sm.DB().NewSnapshot()
	r.smMu.RUnlock()
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.txns) >= r.opts.MaxOpenTxns {
		_ = snap.Close()
		return 0, kvapi.NewError(kvpb.ErrorDetail_REPLICA_UNAVAILABLE, "%s: %d transactions open", r, len(r.txns))
	}
	t := &txn{id: r.nextID.Add(1), snap: snap, epoch: r.epoch}
	r.txns[t.id] = t
	return t.id, nil
}

func (r *Replica) openTxn(id uint64) (*txn, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	t, ok := r.txns[id]
	if !ok {
		return nil, base.InvalidArgumentf("kv: %s: no open transaction %d", r, id)
	}
	if t.invalid || t.epoch != r.epoch {
		return nil, kvapi.NewError(kvpb.ErrorDetail_TXN_ABORTED, "%s: transaction %d snapshot invalidated by a repair", r, id)
	}
	return t, nil
}

// TxnGet reads key at the transaction's snapshot and records the read.
func (r *Replica) TxnGet(id uint64, key []byte) ([]byte, bool, error) {
	t, err := r.openTxn(id)
	if err != nil {
		return nil, false, err
	}
	var v []byte
	var found bool
	a := r.around() // past damaged tables, like Get
	t.mu.Lock()
	if t.snap == nil {
		err = kvapi.NewError(kvpb.ErrorDetail_TXN_ABORTED, "%s: transaction %d snapshot released", r, id)
	} else {
		v, found, err = engine.GetWith(t.snap, key, a)
	}
	t.mu.Unlock()
	if err != nil {
		r.TxnAbort(id)
		return nil, false, err
	}
	r.mu.Lock()
	t.conds = append(t.conds, &kvpb.Condition{Key: key, Exists: found, Value: v})
	r.mu.Unlock()
	return v, found, nil
}

// TxnScan scans at the transaction's snapshot and records the range read.
func (r *Replica) TxnScan(id uint64, start, end []byte, limit int) ([]*kvpb.KeyValue, bool, error) {
	t, err := r.openTxn(id)
	if err != nil {
		return nil, false, err
	}
	var rows []*kvpb.KeyValue
	var more bool
	a := r.around() // past damaged tables, like Scan
	t.mu.Lock()
	if t.snap == nil {
		err = kvapi.NewError(kvpb.ErrorDetail_TXN_ABORTED, "%s: transaction %d snapshot released", r, id)
	} else {
		rows, more, err = engine.ScanBoundedWith(t.snap, start, end, limit, 0, a)
	}
	t.mu.Unlock()
	if err != nil {
		r.TxnAbort(id)
		return nil, false, err
	}
	r.mu.Lock()
	t.scans = append(t.scans, &kvpb.ScanRead{Start: start, End: end, Limit: uint32(limit), Crc: engine.RowsCRC(nil, rows)})
	r.mu.Unlock()
	return rows, more, nil
}

// TxnCommit validates and applies the writes through the log.
func (r *Replica) TxnCommit(ctx context.Context, id uint64, ops []*kvpb.Op) (uint64, error) {
	t, err := r.openTxn(id)
	if err != nil {
		r.TxnAbort(id)
		return 0, err
	}
	defer r.TxnAbort(id)
	if len(ops) == 0 {
		return 0, nil // read-only: its reads were a consistent snapshot
	}
	r.mu.Lock()
	b := &kvpb.WriteBatch{Ops: ops, Conditions: t.conds, Scans: t.scans}
	r.mu.Unlock()
	if err := kvapi.ValidateBatch(b); err != nil {
		return 0, err
	}
	idx, err := r.Write(ctx, b)
	if errors.Is(err, kvapi.ErrConditionFailed) {
		return 0, kvapi.NewError(kvpb.ErrorDetail_TXN_ABORTED, "%s: transaction %d read changed", r, id)
	}
	return idx, err
}

// TxnAbort drops the transaction.
func (r *Replica) TxnAbort(id uint64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if t, ok := r.txns[id]; ok {
		t.release()
		delete(r.txns, id)
	}
}

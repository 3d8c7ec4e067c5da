package kv

import (
	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/flashmend/flashmend/internal/kv/engine"

	"github.com/flashmend/flashmend/internal/raftlog"
)

// What the external tests (package kv_test, which run whole clusters from
// internal/kv/kvcluster) reach inside a replica for.

const RebuildDiverged = rebuildDiverged

// LockSM returns the replica's state machine held shared (a rebuild cannot
// replace it) until unlock is called.
func (r *Replica) LockSM() (sm *engine.StateMachine, unlock func()) {
	r.smMu.RLock()
	return r.sm, r.smMu.RUnlock
}

// RaftLog is the replica's raft log.
func (r *Replica) RaftLog() *raftlog.Log { return r.log }

// RaftUp reports whether the raft loop runs (the log is whole).
func (r *Replica) RaftUp() bool { return r.raft.Up() }

// Verified reports whether the engine was checked against its digest.
func (r *Replica) Verified() bool { return r.verified.Load() }

// Repairing returns how many ranges the replica is repairing and how many
// patch requests it has in flight.
func (r *Replica) Repairing() (recovering, pending int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.repair.Recovering()), r.repair.Requests()
}

// Files returns where the replica keeps its files.
func (r *Replica) Files() (vfs.FS, string) { return r.fs, r.dir }

// Separators returns the index separators (user keys) of the replica's data
// blocks, after compacting its engine into one level.
func (r *Replica) Separators() ([][]byte, error) {
	r.smMu.RLock()
	defer r.smMu.RUnlock()
	return r.sm.Separators()
}

// CorruptBlockAt damages the data block holding key at fraction frac of
// its bytes.
func (r *Replica) CorruptBlockAt(key []byte, frac float64) (string, uint64, error) {
	r.smMu.RLock()
	defer r.smMu.RUnlock()
	return r.sm.CorruptBlockAt(key, frac)
}

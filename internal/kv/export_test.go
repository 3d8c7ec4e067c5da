package kv

import (
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

// HoldReads stands for a client read in flight on the replica (one that
// found its range readable and has not finished reading) until release.
func (r *Replica) HoldReads() (release func()) {
	r.readMu.RLock()
	return r.readMu.RUnlock
}

package kv

import (
	"fmt"
	"time"

	"github.com/flashmend/flashmend/internal/base"
	"github.com/flashmend/flashmend/internal/kv/keyspan"
)

// Range is a user key range [Start, End); an empty End is unbounded.
// internal/kv/keyspan owns the type and its set operations.
type Range = keyspan.Range

// RepairEvent describes one completed repair of a replica, for experiments
// and metrics (Options.OnRepair).
type RepairEvent struct {
	Node  base.NodeID
	Shard base.ShardID
	// Rebuild is set when the replica's whole state was replaced (crash
	// baseline, no patch in time, cascading error); otherwise a patch of
	// Ranges was ingested.
	Rebuild bool
	// Detected is when the corruption was reported (zero if the repair had
	// no detection, e.g. a cascading apply failure); Applied is when the
	// repaired state was installed.
	Detected, Applied time.Time
	// Bytes is the encoded size of the patch or of the transferred state;
	// Rows is the number of key-value rows in it.
	Bytes  uint64
	Rows   int
	Ranges []Range
	// Phases is when a patch went through each step (zero for a
	// rebuild).
	Phases RepairPhases
}

// RepairPhases are the times a patch request went through each step
// between its detection and its install (Applied): first proposed,
// committed (seen in the damaged replica's raft log), reached by the
// damaged replica's apply worker, and its pieces gathered (every range
// covered, every peer answered, or PatchTimeout). A retried request's
// phases are the retry's. Zero where unknown (a commit the replica did not
// see before applying it).
type RepairPhases struct {
	Proposed, Committed, Reached, Gathered time.Time
}

// Latency is detection to repaired state installed (0 without detection).
func (e RepairEvent) Latency() time.Duration {
	if e.Detected.IsZero() {
		return 0
	}
	return e.Applied.Sub(e.Detected)
}

func (e RepairEvent) String() string {
	kind := "patch"
	if e.Rebuild {
		kind = "rebuild"
	}
	return fmt.Sprintf("%s %s@%s %v bytes=%d rows=%d ranges=%v", kind, e.Shard, e.Node, e.Latency(), e.Bytes, e.Rows, e.Ranges)
}

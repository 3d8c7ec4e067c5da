package raftnode

import (
	"context"
	"time"

	pb "go.etcd.io/raft/v3/raftpb"

	"github.com/flashmend/flashmend/internal/base"
	"github.com/flashmend/flashmend/internal/raftlog"
)

// LogRepair says how to repair a raft log that lost entries in both copies
// (RepairLog).
type LogRepair struct {
	Log *raftlog.Log
	// Peers returns the other replicas' nodes, in the order to ask them
	// (called for each span fetched).
	Peers func() []base.NodeID
	// Fetch asks one peer for the entries [lo, hi] of its log (checked end
	// to end) and the commit index it knows.
	Fetch func(ctx context.Context, from base.NodeID, lo, hi uint64) ([]*pb.Entry, uint64, error)
	// FetchTimeout bounds one Fetch; Timeout the whole repair, on Clock.
	FetchTimeout, Timeout time.Duration
	Clock                 base.Clock
	// Filled, if set, counts the entries a peer's answer filled in.
	Filled func(n int)
	Stop   <-chan struct{}
}

// RepairLog fills the holes of a raft log that lost entries in both copies
// from the peers' logs (raftlog.Log.Offer), round after round with a
// growing pause, then seals it (Seal) or, past Timeout, cuts what no peer
// supplied (GiveUp: the leader replicates it again). It returns
// ErrStopped if Stop closed first, or the error of Seal or GiveUp.
func RepairLog(c LogRepair) error {
	deadline := c.Clock.Now().Add(c.Timeout)
	for attempt := 0; ; attempt++ {
		d := c.Log.Damage()
		if len(d.Holes) == 0 {
			break // only an unknown tail may be left: Seal keeps a vote floor
		}
		// Each hole with its anchor (the intact entry after it) on its own:
		// a peer's answer stops at the peer's own first hole, so one span
		// from our first hole would leave later holes to other rounds.
		for _, h := range d.Holes {
			fetchAndOffer(c, h.Lo, h.Hi+1)
		}
		// What anchors could not prove, committed entries can: from just
		// past our commit index (see raftlog.Log.Offer).
		if lo, hi, ok := c.Log.RepairSpan(); ok && len(c.Log.Damage().Holes) > 0 {
			fetchAndOffer(c, lo, hi)
		}
		if len(c.Log.Damage().Holes) == 0 || c.Clock.Now().After(deadline) {
			break
		}
		select {
		case <-base.After(c.Clock, min(time.Duration(attempt+1)*20*time.Millisecond, 500*time.Millisecond)):
		case <-c.Stop:
			return ErrStopped
		}
	}
	if len(c.Log.Damage().Holes) == 0 {
		return c.Log.Seal()
	}
	return c.Log.GiveUp()
}

// fetchAndOffer asks each peer for the entries [lo, hi] of its log and
// offers what it returns to the damaged log, until nothing is missing
// there.
func fetchAndOffer(c LogRepair, lo, hi uint64) {
	for _, node := range c.Peers() {
		select {
		case <-c.Stop:
			return
		default:
		}
		ctx, cancel := context.WithTimeout(context.Background(), c.FetchTimeout)
		ents, commit, err := c.Fetch(ctx, node, lo, hi)
		cancel()
		if err != nil {
			continue
		}
		n, err := c.Log.Offer(ents, commit)
		if err == nil && n > 0 && c.Filled != nil {
			c.Filled(n)
		}
		missing := false
		for _, h := range c.Log.Damage().Holes {
			if h.Lo <= hi && h.Hi >= lo {
				missing = true
			}
		}
		if !missing {
			return
		}
	}
}

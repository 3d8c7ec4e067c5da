package kv

import (
	"testing"

	"github.com/flashmend/flashmend/internal/gen/kvpb"
	"github.com/flashmend/flashmend/internal/kv/kvapi"
)

// TestSupersededProposalsAnsweredAtOnce: once an entry of a later term is
// applied, a proposal this replica appended as leader in an earlier term
// and has not applied can never commit (terms only grow along the log);
// it is answered NOT_LEADER (its client tries again at once) instead of
// waiting out ProposalTimeout. Proposals of the same or a later term, and
// ones whose term is unknown (forwarded, or a rebuild skipped entries),
// keep waiting.
func TestSupersededProposalsAnsweredAtOnce(t *testing.T) {
	r := &Replica{waiters: map[uint64]*waiter{}}
	h := (*raftHost)(r)
	chans := map[uint64]chan proposalResult{}
	for id, term := range map[uint64]uint64{1: 4, 2: 5, 3: 6, 4: 0, 5: 4} {
		chans[id] = make(chan proposalResult, 1)
		r.waiters[id] = &waiter{ch: chans[id]}
		h.Proposed(id, term)
	}
	r.forgetProposalTerms() // a rebuild: none of them is known lost any more
	r.dropSuperseded(9)
	for id, ch := range chans {
		select {
		case res := <-ch:
			t.Fatalf("proposal %d answered after a rebuild: %v", id, res.err)
		default:
		}
	}
	for id, term := range map[uint64]uint64{1: 4, 2: 5, 3: 6, 5: 4} {
		h.Proposed(id, term)
	}
	r.dropSuperseded(5)
	for id, lost := range map[uint64]bool{1: true, 5: true, 2: false, 3: false, 4: false} {
		select {
		case res := <-chans[id]:
			if !lost {
				t.Fatalf("proposal %d answered: %v", id, res.err)
			}
			if e, ok := res.err.(*kvapi.Error); !ok || e.Reason != kvpb.ErrorDetail_NOT_LEADER {
				t.Fatalf("proposal %d: %v, want NOT_LEADER", id, res.err)
			}
		default:
			if lost {
				t.Fatalf("proposal %d of an earlier term not answered", id)
			}
		}
	}
	if len(r.waiters) != 3 {
		t.Fatalf("%d waiters left, want 3", len(r.waiters))
	}
}

package patch

import (
	"sort"
	"time"

	"github.com/flashmend/flashmend/internal/gen/kvpb"
	"github.com/flashmend/flashmend/internal/kv/keyspan"
)

// Span is one damaged key range a replica isolated: Narrow is what it lost
// (reads there are refused and its peers send the rows), Wide the span its
// patch excises (Narrow plus the index separators around it), Blocks the
// file offsets of the damaged data blocks it covers (if known).
type Span struct {
	Narrow, Wide keyspan.Range
	Blocks       []uint64
}

// Request is a patch request of the damaged replica: registered under a
// patch id (Tracker.Add), proposed through raft until its entry applies.
type Request struct {
	// Path is the damaged table; Ranges are what the replica lost (its
	// peers send them), Wide[i] the span the patch of Ranges[i] excises,
	// Blocks[i] the damaged data blocks it covers.
	Path         string
	Ranges, Wide []keyspan.Range
	Blocks       [][]uint64
	Detected     time.Time
	// ProposedAt is when the request was last proposed (zero: not yet, or
	// the proposal was dropped); RetryAfter holds a re-request back.
	ProposedAt time.Time
	RetryAfter time.Time
	ProposalID uint64
	// Committed is set once an entry of the request committed (Tracker.
	// Committed): it is in the log and will apply, however long the apply
	// takes, so it is never proposed again. Resends counts the proposals
	// that did not commit in time (each waits twice as long as the last).
	Committed bool
	Resends   int
	// Leader is the leader the request was last proposed to (its raft
	// ID, as the proposer knew it).
	Leader uint64
	// FirstProposed and CommittedAt are when the request was first
	// proposed and when its entry committed (for the repair's phases).
	FirstProposed, CommittedAt time.Time
	// Retries counts the requests before this one for the same damage
	// whose ranges no peer could send (Retry).
	Retries int
}

// Parts collects, for one patch id, the pieces received for each requested
// range and their rows (keyed by the range's String).
type Parts struct {
	Pieces map[string][]keyspan.Range
	Rows   map[string][]*kvpb.KeyValue
	// Bytes is the encoded size of the patches that brought pieces.
	Bytes uint64
	// from holds the peers that answered (with pieces or without).
	from map[uint64]bool
}

// Covers reports whether the pieces received for rg cover it.
func (p Parts) Covers(rg keyspan.Range) bool { return keyspan.Covers(p.Pieces[rg.String()], rg) }

// Proposal is a patch request to propose now (Tracker.Due).
type Proposal struct {
	ProposalID, PatchID uint64
	Ranges              []keyspan.Range
}

// Tracker is a replica's repair state: the ranges it refuses to read, its
// patch requests by id, the pieces received for each, and what patches
// already repaired. It is not safe for concurrent use (the replica holds
// its mutex); the zero value is empty and ready.
type Tracker struct {
	// recovering lists ranges whose data the replica lost and is
	// repairing, and spans held while a patch is ingested; reads in them
	// are refused. Invariant: every range of a pending request is in it
	// until the request settles or the tracker resets.
	recovering []keyspan.Range
	pending    map[uint64]*Request
	parts      map[uint64]*Parts
	// repaired holds the ranges patched, by damaged file; repairedBlocks
	// the damaged data blocks (file offsets) they covered.
	repaired       map[string][]keyspan.Range
	repairedBlocks map[string]map[uint64]bool
}

// Busy reports whether a request for the damaged file path is pending.
// Damage found in it after that request applies is new damage.
func (t *Tracker) Busy(path string) bool {
	for _, q := range t.pending {
		if q.Path == path {
			return true
		}
	}
	return false
}

// BlockRepaired reports whether the data block at offset of path lies in a
// range a patch already cut out of the live data (the backing file keeps it
// until compactions drop the file): nothing live reads it.
func (t *Tracker) BlockRepaired(path string, offset uint64) bool {
	return t.repairedBlocks[path][offset]
}

// Admit turns the damaged spans of file path into a request: spans a patch
// already repaired are dropped (their blocks remembered), the others are
// refused to reads from now on. It returns the request (nil if nothing is
// left to repair) and the indices of the spans it kept.
func (t *Tracker) Admit(path string, detected time.Time, spans []Span) (*Request, []int) {
	q := &Request{Path: path, Detected: detected}
	var kept []int
	for i, sp := range spans {
		done := false
		for _, d := range t.repaired[path] {
			if d.Includes(sp.Narrow) {
				done = true
			}
		}
		if done {
			t.noteRepairedBlocks(path, sp.Blocks)
			continue
		}
		q.Ranges = append(q.Ranges, sp.Narrow)
		q.Wide = append(q.Wide, sp.Wide)
		q.Blocks = append(q.Blocks, sp.Blocks)
		kept = append(kept, i)
	}
	if len(q.Ranges) == 0 {
		return nil, nil
	}
	t.recovering = append(t.recovering, q.Ranges...)
	return q, kept
}

// NoteDeadBlock remembers a damaged block of path that holds no live row
// (outside the bounds of the table that uses it): BlockRepaired reports it
// from now on, so its later reports are dropped.
func (t *Tracker) NoteDeadBlock(path string, offset uint64) {
	t.noteRepairedBlocks(path, []uint64{offset})
}

func (t *Tracker) noteRepairedBlocks(path string, blocks []uint64) {
	if len(blocks) == 0 {
		return
	}
	if t.repairedBlocks == nil {
		t.repairedBlocks = map[string]map[uint64]bool{}
	}
	if t.repairedBlocks[path] == nil {
		t.repairedBlocks[path] = map[uint64]bool{}
	}
	for _, b := range blocks {
		t.repairedBlocks[path][b] = true
	}
}

// Add registers q under patchID; it waits there until Settle.
func (t *Tracker) Add(patchID uint64, q *Request) {
	if t.pending == nil {
		t.pending = map[uint64]*Request{}
	}
	t.pending[patchID] = q
}

// Due returns the requests to propose at now, in patch id order: new ones,
// ones whose proposal was dropped, ones proposed to another leader than
// leader (the leader now: a leader change loses uncommitted proposals, a
// follower's forwarded one silently), and ones whose proposal did not
// commit within resend of being proposed, that wait doubling with each
// further resend up to maxResend. A request one of whose entries
// committed is not proposed again: it applies however long its apply
// waits behind others or for its patch (resending those proposed each
// again and made every peer build and send its pieces again: a repair
// storm). Each proposal gets a new proposal id from nextID and counts as
// proposed at now to leader. A request keeps its patch id: if two of its
// entries commit, the second finds nothing waiting.
func (t *Tracker) Due(now time.Time, leader uint64, resend, maxResend time.Duration, nextID func() uint64) []Proposal {
	ids := make([]uint64, 0, len(t.pending))
	for id := range t.pending {
		ids = append(ids, id)
	}
	sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
	var out []Proposal
	for _, id := range ids {
		q := t.pending[id]
		if q.Committed || now.Before(q.RetryAfter) {
			continue
		}
		if !q.ProposedAt.IsZero() && q.Leader == leader {
			wait := resend
			for i := 0; i < q.Resends && wait < maxResend; i++ {
				wait *= 2
			}
			if now.Sub(q.ProposedAt) < min(wait, maxResend) {
				continue
			}
			q.Resends++
		}
		q.ProposedAt, q.Leader = now, leader
		if q.FirstProposed.IsZero() {
			q.FirstProposed = now
		}
		q.ProposalID = nextID()
		out = append(out, Proposal{ProposalID: q.ProposalID, PatchID: id, Ranges: q.Ranges})
	}
	return out
}

// Committed notes that an entry of the request registered under patchID
// committed at at. It reports whether a request was waiting for that.
func (t *Tracker) Committed(patchID uint64, at time.Time) bool {
	q, ok := t.pending[patchID]
	if !ok || q.Committed {
		return false
	}
	q.Committed, q.CommittedAt = true, at
	return true
}

// Uncommitted reports whether a request is registered whose entry has not
// committed yet.
func (t *Tracker) Uncommitted() bool {
	for _, q := range t.pending {
		if !q.Committed {
			return true
		}
	}
	return false
}

// Dropped marks the request proposed as proposalID as not proposed (raft
// refused it), so the next Due proposes it again.
func (t *Tracker) Dropped(proposalID uint64) {
	for _, q := range t.pending {
		if q.ProposalID == proposalID {
			q.ProposedAt = time.Time{}
		}
	}
}

// Waiting returns the request registered under patchID, if any.
func (t *Tracker) Waiting(patchID uint64) (*Request, bool) {
	q, ok := t.pending[patchID]
	return q, ok
}

// Deliver adds a peer's patch for patchID: its pieces go to the requested
// ranges that include them; a row already received for a range (from
// another peer's overlapping piece: the same value, as of the same entry)
// is not added twice. size (the patch's encoded size) counts only if a
// piece was new. It reports whether anything changed (a new piece, or a
// first answer from this peer); a patch nothing waits for changes nothing.
func (t *Tracker) Deliver(patchID, from uint64, pieces []keyspan.Range, rows []*kvpb.KeyValue, size uint64) bool {
	q, waiting := t.pending[patchID]
	if !waiting {
		return false
	}
	if t.parts == nil {
		t.parts = map[uint64]*Parts{}
	}
	p, ok := t.parts[patchID]
	if !ok {
		p = &Parts{Pieces: map[string][]keyspan.Range{}, Rows: map[string][]*kvpb.KeyValue{}, from: map[uint64]bool{}}
		t.parts[patchID] = p
	}
	added := false
	if !p.from[from] {
		p.from[from] = true
		added = true
	}
	for _, piece := range pieces {
		for _, rg := range q.Ranges {
			if !rg.Includes(piece) {
				continue
			}
			key := rg.String()
			if keyspan.Covers(p.Pieces[key], piece) {
				continue // nothing new
			}
			have := map[string]bool{}
			for _, kv := range p.Rows[key] {
				have[string(kv.Key)] = true
			}
			for _, kv := range rows {
				if piece.Contains(kv.Key) && !have[string(kv.Key)] {
					have[string(kv.Key)] = true // once, even if pieces of one patch overlap
					p.Rows[key] = append(p.Rows[key], kv)
				}
			}
			p.Pieces[key] = append(p.Pieces[key], piece)
			added = true
		}
	}
	if added && len(pieces) > 0 {
		p.Bytes += size
	}
	return added
}

// Received returns a copy of what arrived for patchID and how many peers
// answered.
func (t *Tracker) Received(patchID uint64) (Parts, int) {
	out := Parts{Pieces: map[string][]keyspan.Range{}, Rows: map[string][]*kvpb.KeyValue{}}
	p := t.parts[patchID]
	if p == nil {
		return out, 0
	}
	out.Bytes = p.Bytes
	for k, v := range p.Pieces {
		out.Pieces[k] = append([]keyspan.Range(nil), v...)
	}
	for k, v := range p.Rows {
		out.Rows[k] = append([]*kvpb.KeyValue(nil), v...)
	}
	return out, len(p.from)
}

// Refused returns a range under repair that rg overlaps, if any: reads of
// rg are refused as corruption.
func (t *Tracker) Refused(rg keyspan.Range) (keyspan.Range, bool) {
	for _, rec := range t.recovering {
		if rec.Overlaps(rg) {
			return rec, true
		}
	}
	return keyspan.Range{}, false
}

// Hold refuses reads of the spans around while a patch is ingested and
// checked (an excise that loses a damaged table's remainder must not be
// read as absent rows).
func (t *Tracker) Hold(around []keyspan.Range) {
	t.recovering = append(t.recovering, around...)
}

// Release ends a Hold of around, keeping keep refused (what the excise
// lost: patched in turn).
func (t *Tracker) Release(around, keep []keyspan.Range) {
	t.recovering = append(keyspan.Remove(t.recovering, around), keep...)
}

// Settle ends the request patchID of damaged file path once its entry
// applied: the ranges done (patched) and merged (block merge) are no longer
// refused, and done is remembered as repaired with its blocks. A refused
// range they cover in part stays refused in the rest only (a patch whose
// own table came back damaged in one block settles the rest of its range:
// only that block's keys wait for the next patch). It reports whether no
// range is refused any more.
func (t *Tracker) Settle(patchID uint64, path string, done, merged []keyspan.Range, doneBlocks []uint64) bool {
	fixed := append(append([]keyspan.Range(nil), done...), merged...)
	var still []keyspan.Range
	for _, rec := range t.recovering {
		still = append(still, keyspan.Subtract(rec, fixed)...)
	}
	t.recovering = still
	delete(t.parts, patchID)
	if len(done) > 0 {
		if t.repaired == nil {
			t.repaired = map[string][]keyspan.Range{}
		}
		t.repaired[path] = append(t.repaired[path], done...)
		t.noteRepairedBlocks(path, doneBlocks)
	}
	delete(t.pending, patchID)
	return len(still) == 0
}

// Reset forgets every request, refused range and repaired range: the
// replica's whole state was replaced (a rebuild). Blocks known repaired are
// kept: the files that hold them may still be live.
func (t *Tracker) Reset() {
	t.recovering = nil
	t.repaired = nil
	t.pending = nil
	t.parts = nil
}

// Recovering returns a copy of the ranges refused to reads.
func (t *Tracker) Recovering() []keyspan.Range {
	return append([]keyspan.Range(nil), t.recovering...)
}

// Requests returns how many patch requests are pending.
func (t *Tracker) Requests() int { return len(t.pending) }

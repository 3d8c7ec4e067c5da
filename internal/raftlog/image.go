package raftlog

import (
	"fmt"
	"strings"

	"go.etcd.io/raft/v3"
	pb "go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"

	"github.com/flashmend/flashmend/internal/base"
)

// image is the pure in-memory state of the log: what replaying the records
// produces. It does no I/O.
//
// Invariant: ents[i] is nil (a hole) or has Index == base.index+1+i.
// Invariant: a sealed log (one raft uses) has no holes.
type image struct {
	base  entryID
	ents  []*pb.Entry
	hs    *pb.HardState
	snap  *pb.Snapshot
	floor entryID
}

func newImage() *image {
	return &image{
		hs:   &pb.HardState{},
		snap: &pb.Snapshot{Metadata: &pb.SnapshotMetadata{ConfState: &pb.ConfState{}}},
	}
}

func (m *image) clone() *image {
	c := *m
	c.ents = append([]*pb.Entry(nil), m.ents...)
	return &c
}

func (m *image) firstIndex() uint64 { return m.base.index + 1 }
func (m *image) lastIndex() uint64  { return m.base.index + uint64(len(m.ents)) }

// at returns the entry at index i, or nil for a hole or an index outside the
// log.
func (m *image) at(i uint64) *pb.Entry {
	if i <= m.base.index || i > m.lastIndex() {
		return nil
	}
	return m.ents[i-m.base.index-1]
}

// termAt returns the term of index i if the log knows it.
func (m *image) termAt(i uint64) (uint64, bool) {
	if i == m.base.index {
		return m.base.term, true
	}
	if e := m.at(i); e != nil {
		return e.GetTerm(), true
	}
	return 0, false
}

// lastID is the index and term of the last entry (the base if none).
func (m *image) lastID() entryID {
	if len(m.ents) == 0 {
		return m.base
	}
	if e := m.ents[len(m.ents)-1]; e != nil {
		return entryID{e.GetIndex(), e.GetTerm()}
	}
	return entryID{index: m.lastIndex()}
}

// reset restarts the log after id (a snapshot, or a generation's base).
func (m *image) reset(id entryID) {
	m.base = id
	m.ents = nil
}

// compact drops entries up to and including id.index, which becomes the
// base (its term is id.term).
func (m *image) compact(id entryID) {
	if id.index <= m.base.index {
		return
	}
	if id.index >= m.lastIndex() {
		m.reset(id)
		return
	}
	m.ents = append([]*pb.Entry(nil), m.ents[id.index-m.base.index:]...)
	m.base = id
}

// truncate drops the entries from index i on (i > base).
func (m *image) truncate(i uint64) {
	if i <= m.base.index {
		i = m.base.index + 1
	}
	if i <= m.lastIndex() {
		m.ents = m.ents[:i-m.base.index-1]
	}
}

// put stores e at its index, dropping any suffix from there (raft's
// conflict rule) and leaving holes between the last index and e.
func (m *image) put(e *pb.Entry) {
	i := e.GetIndex()
	if i <= m.base.index {
		return // compacted already
	}
	m.truncate(i)
	for m.lastIndex()+1 < i {
		m.ents = append(m.ents, nil)
	}
	m.ents = append(m.ents, e)
}

// unsettle turns the entries in (from, to] into holes, extending the log
// with holes up to to if it is shorter.
func (m *image) unsettle(from, to uint64) {
	from = max(from, m.base.index)
	for m.lastIndex() < to {
		m.ents = append(m.ents, nil)
	}
	for i := from + 1; i <= to; i++ {
		m.ents[i-m.base.index-1] = nil
	}
}

// Span is a closed range of log indexes.
type Span struct{ Lo, Hi uint64 }

func (s Span) String() string { return fmt.Sprintf("[%d,%d]", s.Lo, s.Hi) }

// holes lists the runs of missing entries.
func (m *image) holes() []Span {
	var out []Span
	for k, e := range m.ents {
		if e != nil {
			continue
		}
		i := m.base.index + 1 + uint64(k)
		if n := len(out); n > 0 && out[n-1].Hi+1 == i {
			out[n-1].Hi = i
			continue
		}
		out = append(out, Span{Lo: i, Hi: i})
	}
	return out
}

// Damage is what a replay could not recover on its own: entries no copy
// holds intact (or that a lost record may have replaced), records lost
// after the last intact entry, and a hard state a lost record may have
// superseded. The log's peers hold what is missing (Log.Offer).
type Damage struct {
	// Holes are the runs of entries that are missing or uncertain.
	Holes []Span
	// TailUnknown: records after the last intact entry were lost, so the
	// log may have held entries past its last index.
	TailUnknown bool
	// HardStateUncertain: a record lost after the last intact hard state
	// may have held a newer one (a vote): the replica must not vote until
	// it has heard from a leader.
	HardStateUncertain bool
	// Losses counts places where records were lost in every copy.
	Losses int
	// MaxTermSeen is the highest term of any intact record.
	MaxTermSeen uint64
	// LastSeen is the last entry the log held before the damage, as far as
	// the intact records tell (with TailUnknown, entries may have followed).
	LastSeen entryID
	// LostAfterHardState is how many bytes were lost after the last intact
	// hard state record: they bound how many newer hard states (term
	// changes) a HardStateUncertain log may have lost.
	LostAfterHardState int64
}

// Empty reports whether there is nothing to repair.
func (d Damage) Empty() bool { return len(d.Holes) == 0 && !d.TailUnknown && !d.HardStateUncertain }

func (d Damage) String() string {
	if d.Empty() {
		return "none"
	}
	var parts []string
	if len(d.Holes) > 0 {
		parts = append(parts, fmt.Sprintf("holes %v", d.Holes))
	}
	if d.TailUnknown {
		parts = append(parts, "tail unknown after "+d.LastSeen.String())
	}
	if d.HardStateUncertain {
		parts = append(parts, "hard state uncertain")
	}
	return fmt.Sprintf("%s (%d losses)", strings.Join(parts, ", "), d.Losses)
}

// replay builds the image of a generation from its parsed items and reports
// the damage.
//
// A loss is one or more records of unknown kinds. Entries written before it
// above the commit index known at that point may have been replaced by
// entries in the lost records (raft overwrites only uncommitted entries), so
// they become holes up to the next intact entry (whose predecessors the
// lost records may have written). Entries at or below that commit index
// cannot have been replaced and stay. Entries written after the loss are
// newer than anything in it and are kept: they anchor the repair (raft's
// log matching: a peer whose entry at an index has the same term holds
// exactly our entries before it).
func replay(items []item) (*image, Damage) {
	m := newImage()
	var d Damage
	var commit uint64 // highest commit index seen so far
	pending := false  // a loss not yet followed by an intact entry
	var pendingCommit uint64
	for _, it := range items {
		var rec decoded
		var err error
		if !it.loss {
			rec, err = decodeRecord(it.rec)
		}
		if it.loss || err != nil {
			d.Losses++
			if !pending {
				pending, pendingCommit = true, commit
			}
			d.HardStateUncertain = true
			d.LostAfterHardState += max(it.lossBytes, int64(len(it.rec)))
			continue
		}
		switch rec.kind {
		case recEntry:
			if pending {
				m.unsettle(pendingCommit, rec.entry.GetIndex()-1)
				pending = false
			}
			m.put(rec.entry)
			d.MaxTermSeen = max(d.MaxTermSeen, rec.entry.GetTerm())
		case recHardState:
			m.hs = rec.hs
			commit = max(commit, rec.hs.GetCommit())
			d.HardStateUncertain = false
			d.LostAfterHardState = 0
			d.MaxTermSeen = max(d.MaxTermSeen, rec.hs.GetTerm())
		case recSnapshot:
			md := rec.snap.GetMetadata()
			m.snap = rec.snap
			m.reset(entryID{md.GetIndex(), md.GetTerm()})
			pending = false
			commit = max(commit, md.GetIndex())
		case recKeep:
			m.snap = rec.snap
		case recCompact:
			m.compact(rec.id)
		case recBase:
			m.reset(rec.id)
			commit = max(commit, rec.id.index)
		case recFloor:
			m.floor = rec.id
		}
	}
	d.LastSeen = m.lastID()
	if pending {
		m.unsettle(pendingCommit, m.lastIndex())
		d.TailUnknown = true
	}
	d.Holes = m.holes()
	return m, d
}

// offer repairs the image from a peer's entries (contiguous, ascending) and
// the peer's commit index, and returns how many missing entries it filled.
// It takes from the peer only what raft's rules say equals our own lost
// entries or is committed:
//
//  1. Anchored fill: a hole run [a, b] followed by our intact entry at b+1
//     is filled from the peer if the peer holds [a, b+1] and its term at
//     b+1 equals ours (log matching: then the peer's entries up to b+1 are
//     ours).
//  2. Committed entries: entries at or below the peer's commit index are
//     committed, the same on every replica that holds them; they fill our
//     holes there, and an intact entry of ours there with another term was
//     never committed, so it and what follows it are dropped for the
//     peer's (truncated reports it, so the caller keeps a vote floor).
func (m *image) offer(peer []*pb.Entry, peerCommit uint64, tailUnknown bool) (filled int, truncated bool) {
	if len(peer) == 0 {
		return 0, false
	}
	plo := peer[0].GetIndex()
	phi := peer[len(peer)-1].GetIndex()
	pAt := func(i uint64) *pb.Entry {
		if i < plo || i > phi {
			return nil
		}
		return peer[i-plo]
	}
	// 1. Anchored fill.
	for _, h := range m.holes() {
		anchor := m.at(h.Hi + 1)
		if anchor == nil {
			continue
		}
		pa := pAt(h.Hi + 1)
		if pa == nil || pa.GetTerm() != anchor.GetTerm() || pAt(h.Lo) == nil {
			continue
		}
		for i := h.Lo; i <= h.Hi; i++ {
			m.ents[i-m.base.index-1] = pAt(i)
			filled++
		}
	}
	// 2. Committed entries. Every entry at or below the peer's commit
	// index is committed, and a committed entry is the same on every
	// replica that holds it: it fills a hole of ours at that index, and an
	// intact entry of ours there with another term was never committed
	// (it came from a branch a later leader replaced), so it and everything
	// after it are dropped and the peer's committed entries taken instead.
	// (Our own intact entries at or below our commit index are committed
	// too, so they always agree.)
	end := min(phi, peerCommit)
	if tailUnknown || len(m.holes()) > 0 {
		for i := max(plo, m.base.index+1); i <= end; i++ {
			p := pAt(i)
			ours := m.at(i)
			switch {
			case i > m.lastIndex():
				if !tailUnknown {
					return filled, truncated
				}
				m.ents = append(m.ents, p) // past our end: only with an unknown tail
				filled++
			case ours == nil:
				m.ents[i-m.base.index-1] = p
				filled++
			case ours.GetTerm() != p.GetTerm():
				truncated = truncated || i < m.lastIndex()
				m.truncate(i)
				m.ents = append(m.ents, p)
				filled++
			}
		}
	}
	return filled, truncated
}

// applyUpdate applies what one Save, Compact or CreateSnapshot call writes
// (the records of that call, in order).
func (m *image) applyRecords(recs []decoded) error {
	for _, r := range recs {
		switch r.kind {
		case recEntry:
			if r.entry.GetIndex() > m.lastIndex()+1 {
				return base.AssertionFailedf("raftlog: append at %d leaves a gap after last index %d", r.entry.GetIndex(), m.lastIndex())
			}
			m.put(r.entry)
		case recHardState:
			m.hs = r.hs
		case recSnapshot:
			md := r.snap.GetMetadata()
			m.snap = r.snap
			m.reset(entryID{md.GetIndex(), md.GetTerm()})
		case recKeep:
			m.snap = r.snap
		case recCompact:
			m.compact(r.id)
		case recBase:
			m.reset(r.id)
		case recFloor:
			m.floor = r.id
		}
	}
	return nil
}

// stateRecords are the records that write the whole image as a new
// generation: base, local snapshot, hard state, vote floor, entries.
func (m *image) stateRecords() []decoded {
	recs := []decoded{{kind: recBase, id: m.base}}
	if m.snap.GetMetadata().GetIndex() > 0 {
		recs = append(recs, decoded{kind: recKeep, snap: m.snap})
	}
	recs = append(recs, decoded{kind: recHardState, hs: m.hs})
	if m.floor != (entryID{}) {
		recs = append(recs, decoded{kind: recFloor, id: m.floor})
	}
	for _, e := range m.ents {
		recs = append(recs, decoded{kind: recEntry, entry: e})
	}
	return recs
}

func (r decoded) encode() ([]byte, error) {
	switch r.kind {
	case recEntry:
		return encodeMsg(r.kind, r.entry)
	case recHardState:
		return encodeMsg(r.kind, r.hs)
	case recSnapshot, recKeep:
		return encodeMsg(r.kind, r.snap)
	case recCompact, recBase, recFloor:
		return encodeIDRecord(r.kind, r.id), nil
	}
	return nil, base.AssertionFailedf("raftlog: encode of record kind %d", r.kind)
}

// ---- raft.Storage views (sealed images: no holes) ----------------------------

func (m *image) term(i uint64) (uint64, error) {
	if i < m.base.index {
		return 0, raft.ErrCompacted
	}
	if i > m.lastIndex() {
		return 0, raft.ErrUnavailable
	}
	t, ok := m.termAt(i)
	if !ok {
		return 0, base.AssertionFailedf("raftlog: term of missing entry %d", i)
	}
	return t, nil
}

func (m *image) entries(lo, hi, maxSizeBytes uint64) ([]*pb.Entry, error) {
	if lo <= m.base.index {
		return nil, raft.ErrCompacted
	}
	if hi > m.lastIndex()+1 || lo > hi {
		return nil, base.AssertionFailedf("raftlog: entries [%d,%d) out of bounds (last %d)", lo, hi, m.lastIndex())
	}
	if len(m.ents) == 0 {
		return nil, raft.ErrUnavailable
	}
	out := make([]*pb.Entry, 0, hi-lo)
	var size uint64
	for i := lo; i < hi; i++ {
		e := m.at(i)
		if e == nil {
			return nil, base.AssertionFailedf("raftlog: entry %d missing in a sealed log", i)
		}
		size += uint64(proto.Size(e))
		if len(out) > 0 && size > maxSizeBytes {
			break
		}
		out = append(out, e)
	}
	return out, nil
}

// intact returns the contiguous intact entries from lo to at most hi,
// stopping at a hole or after maxBytes.
func (m *image) intact(lo, hi, maxBytes uint64) []*pb.Entry {
	var out []*pb.Entry
	var size uint64
	for i := max(lo, m.firstIndex()); i <= min(hi, m.lastIndex()); i++ {
		e := m.at(i)
		if e == nil {
			break
		}
		size += uint64(proto.Size(e))
		if len(out) > 0 && size > maxBytes {
			break
		}
		out = append(out, e)
	}
	return out
}

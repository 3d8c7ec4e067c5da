package raftlog

import (
	"go.etcd.io/raft/v3"
	pb "go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"

	"github.com/flashmend/flashmend/internal/base"
)

// state is the pure in-memory image of the log: what replaying the records
// produces. It does no I/O.
type state struct {
	hs   *pb.HardState
	snap *pb.Snapshot
	// ents[0] is the log base: a dummy entry at firstIndex-1 that carries the
	// term of the compacted prefix. Invariant: ents[i].Index == ents[0].Index+i.
	ents []*pb.Entry
}

func newState() *state {
	return &state{
		hs:   &pb.HardState{},
		snap: &pb.Snapshot{Metadata: &pb.SnapshotMetadata{ConfState: &pb.ConfState{}}},
		ents: []*pb.Entry{{Index: proto.Uint64(0), Term: proto.Uint64(0)}},
	}
}

func (s *state) offset() uint64    { return s.ents[0].GetIndex() }
func (s *state) lastIndex() uint64 { return s.offset() + uint64(len(s.ents)) - 1 }

// apply replays one record's update.
func (s *state) apply(u *update) error {
	if u.snap != nil {
		md := u.snap.GetMetadata()
		s.snap = u.snap
		s.ents = []*pb.Entry{{Index: proto.Uint64(md.GetIndex()), Term: proto.Uint64(md.GetTerm())}}
	}
	if u.keep != nil {
		s.snap = u.keep
	}
	if u.base != nil {
		s.ents = []*pb.Entry{u.base}
	}
	if u.compact != 0 {
		if err := s.compactTo(u.compact); err != nil {
			return err
		}
	}
	if err := s.append(u.entries); err != nil {
		return err
	}
	if u.hs != nil {
		s.hs = u.hs
	}
	return nil
}

func (s *state) compactTo(i uint64) error {
	off := s.offset()
	if i <= off {
		return nil
	}
	if i > s.lastIndex() {
		return base.AssertionFailedf("raftlog: compact %d beyond last index %d", i, s.lastIndex())
	}
	rest := make([]*pb.Entry, 0, 1+s.lastIndex()-i)
	base := s.ents[i-off]
	rest = append(rest, &pb.Entry{Index: proto.Uint64(base.GetIndex()), Term: proto.Uint64(base.GetTerm())})
	rest = append(rest, s.ents[i-off+1:]...)
	s.ents = rest
	return nil
}

// append adds entries, truncating any conflicting suffix first, like
// raft.MemoryStorage.Append.
func (s *state) append(ents []*pb.Entry) error {
	if len(ents) == 0 {
		return nil
	}
	first := s.offset() + 1
	last := ents[len(ents)-1].GetIndex()
	if last < first {
		return nil // all compacted already
	}
	if first > ents[0].GetIndex() {
		ents = ents[first-ents[0].GetIndex():]
	}
	at := ents[0].GetIndex() - s.offset()
	if at > uint64(len(s.ents)) {
		return base.AssertionFailedf("raftlog: append at %d leaves a gap after last index %d", ents[0].GetIndex(), s.lastIndex())
	}
	s.ents = append(s.ents[:at:at], ents...)
	return nil
}

// term implements raft.Storage.Term.
func (s *state) term(i uint64) (uint64, error) {
	off := s.offset()
	if i < off {
		return 0, raft.ErrCompacted
	}
	if i > s.lastIndex() {
		return 0, raft.ErrUnavailable
	}
	return s.ents[i-off].GetTerm(), nil
}

// entries implements raft.Storage.Entries.
func (s *state) entries(lo, hi, maxSizeBytes uint64) ([]*pb.Entry, error) {
	off := s.offset()
	if lo <= off {
		return nil, raft.ErrCompacted
	}
	if hi > s.lastIndex()+1 || lo > hi {
		return nil, base.AssertionFailedf("raftlog: entries [%d,%d) out of bounds (last %d)", lo, hi, s.lastIndex())
	}
	if len(s.ents) == 1 {
		return nil, raft.ErrUnavailable
	}
	out := make([]*pb.Entry, 0, hi-lo)
	var size uint64
	for _, e := range s.ents[lo-off : hi-off] {
		size += uint64(proto.Size(e))
		if len(out) > 0 && size > maxSizeBytes {
			break
		}
		out = append(out, e)
	}
	return out, nil
}

// fullUpdate is the state record that starts a new generation.
func (s *state) fullUpdate() *update {
	return &update{
		snap:    s.snap,
		base:    &pb.Entry{Index: proto.Uint64(s.offset()), Term: proto.Uint64(s.ents[0].GetTerm())},
		entries: s.ents[1:],
		hs:      s.hs,
	}
}

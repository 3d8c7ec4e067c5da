package raftlog

import (
	"encoding/binary"

	pb "go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"

	"github.com/flashmend/flashmend/internal/base"
)

// update is the decoded payload of a record. Replay applies its parts in
// field order: snapshot, base, compact, entries, hard state.
type update struct {
	snap    *pb.Snapshot  // a new snapshot: resets the log to its index
	keep    *pb.Snapshot  // a snapshot created locally: kept, the log is not reset
	base    *pb.Entry     // a new log base (dummy entry): resets the log
	compact uint64        // discard entries up to and including this index
	entries []*pb.Entry   // appended; an entry with an existing index truncates the suffix
	hs      *pb.HardState // the new hard state
}

const (
	flagSnap byte = 1 << iota
	flagBase
	flagCompact
	flagHardState
	flagKeep
)

func (u *update) encode() ([]byte, error) {
	var flags byte
	buf := []byte{0}
	appendMsg := func(m proto.Message) error {
		b, err := proto.Marshal(m)
		if err != nil {
			return err
		}
		buf = binary.AppendUvarint(buf, uint64(len(b)))
		buf = append(buf, b...)
		return nil
	}
	if u.snap != nil {
		flags |= flagSnap
		if err := appendMsg(u.snap); err != nil {
			return nil, err
		}
	}
	if u.keep != nil {
		flags |= flagKeep
		if err := appendMsg(u.keep); err != nil {
			return nil, err
		}
	}
	if u.base != nil {
		flags |= flagBase
		buf = binary.AppendUvarint(buf, u.base.GetIndex())
		buf = binary.AppendUvarint(buf, u.base.GetTerm())
	}
	if u.compact != 0 {
		flags |= flagCompact
		buf = binary.AppendUvarint(buf, u.compact)
	}
	if u.hs != nil {
		flags |= flagHardState
		if err := appendMsg(u.hs); err != nil {
			return nil, err
		}
	}
	buf = binary.AppendUvarint(buf, uint64(len(u.entries)))
	for _, e := range u.entries {
		if err := appendMsg(e); err != nil {
			return nil, err
		}
	}
	buf[0] = flags
	return buf, nil
}

// decodeUpdate parses a payload whose checksum already verified; a parse
// failure is therefore a bug or a checksum collision, reported as corruption.
func decodeUpdate(p []byte) (*update, error) {
	if len(p) == 0 {
		return nil, base.CorruptionErrorf("raftlog: empty payload")
	}
	flags := p[0]
	p = p[1:]
	u := &update{}
	uvarint := func() (uint64, error) {
		v, n := binary.Uvarint(p)
		if n <= 0 {
			return 0, base.CorruptionErrorf("raftlog: bad varint in payload")
		}
		p = p[n:]
		return v, nil
	}
	msg := func(m proto.Message) error {
		n, err := uvarint()
		if err != nil {
			return err
		}
		if n > uint64(len(p)) {
			return base.CorruptionErrorf("raftlog: message length %d exceeds payload", n)
		}
		if err := proto.Unmarshal(p[:n], m); err != nil {
			return base.CorruptionErrorf("raftlog: %w", err)
		}
		p = p[n:]
		return nil
	}
	if flags&flagSnap != 0 {
		u.snap = &pb.Snapshot{}
		if err := msg(u.snap); err != nil {
			return nil, err
		}
	}
	if flags&flagKeep != 0 {
		u.keep = &pb.Snapshot{}
		if err := msg(u.keep); err != nil {
			return nil, err
		}
	}
	if flags&flagBase != 0 {
		idx, err := uvarint()
		if err != nil {
			return nil, err
		}
		term, err := uvarint()
		if err != nil {
			return nil, err
		}
		u.base = &pb.Entry{Index: proto.Uint64(idx), Term: proto.Uint64(term)}
	}
	if flags&flagCompact != 0 {
		c, err := uvarint()
		if err != nil {
			return nil, err
		}
		u.compact = c
	}
	if flags&flagHardState != 0 {
		u.hs = &pb.HardState{}
		if err := msg(u.hs); err != nil {
			return nil, err
		}
	}
	n, err := uvarint()
	if err != nil {
		return nil, err
	}
	if n > uint64(len(p)) {
		return nil, base.CorruptionErrorf("raftlog: entry count %d exceeds payload", n)
	}
	u.entries = make([]*pb.Entry, 0, n)
	for i := uint64(0); i < n; i++ {
		e := &pb.Entry{}
		if err := msg(e); err != nil {
			return nil, err
		}
		u.entries = append(u.entries, e)
	}
	if len(p) != 0 {
		return nil, base.CorruptionErrorf("raftlog: %d trailing payload bytes", len(p))
	}
	return u, nil
}

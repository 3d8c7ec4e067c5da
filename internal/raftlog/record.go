package raftlog

import (
	"encoding/binary"
	"fmt"

	pb "go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"

	"github.com/flashmend/flashmend/internal/base"
)

// Record kinds. A record is its kind byte followed by its payload; every
// record is small (one entry, one hard state, one snapshot's metadata), so
// one flip loses one record, never the log's whole state.
const (
	// recEntry is one raft entry (pb.Entry). An entry whose index is at or
	// below the last index replaces the suffix from there (raft's conflict
	// truncation).
	recEntry byte = 1
	// recHardState is the raft hard state (pb.HardState).
	recHardState byte = 2
	// recSnapshot is a snapshot received from the leader (pb.Snapshot): the
	// log restarts after its index.
	recSnapshot byte = 3
	// recKeep is a snapshot point created locally (pb.Snapshot): kept for
	// followers, the log is not reset.
	recKeep byte = 4
	// recCompact drops the entries up to and including an index (uvarint
	// index, uvarint term of that index).
	recCompact byte = 5
	// recBase restarts the log after an index (uvarint index, uvarint
	// term): a generation's first record, and the base after a repair.
	recBase byte = 6
	// recFloor is the vote floor (uvarint term, uvarint index; zero clears
	// it): while the log is behind it, the replica neither votes for a log
	// behind it nor campaigns (see Log.VoteFloor).
	recFloor byte = 7
)

// entryID names an entry by index and term.
type entryID struct{ index, term uint64 }

func (e entryID) String() string { return fmt.Sprintf("%d.%d", e.index, e.term) }

// less orders logs by raft's up-to-date rule: a higher last term, or the
// same last term and a higher last index, is more up to date.
func (e entryID) less(o entryID) bool {
	return e.term < o.term || (e.term == o.term && e.index < o.index)
}

func encodeMsg(kind byte, m proto.Message) ([]byte, error) {
	b, err := proto.Marshal(m)
	if err != nil {
		return nil, err
	}
	return append([]byte{kind}, b...), nil
}

func encodeIDRecord(kind byte, id entryID) []byte {
	buf := []byte{kind}
	buf = binary.AppendUvarint(buf, id.index)
	return binary.AppendUvarint(buf, id.term)
}

// decoded is one record's content; exactly one field is set, as kind says.
type decoded struct {
	kind  byte
	entry *pb.Entry
	hs    *pb.HardState
	snap  *pb.Snapshot
	id    entryID // recCompact, recBase, recFloor
}

// decodeRecord parses a record whose fragments verified. A parse failure is
// a bug or a checksum collision; the caller treats it as a lost record.
func decodeRecord(rec []byte) (decoded, error) {
	if len(rec) == 0 {
		return decoded{}, base.CorruptionErrorf("raftlog: empty record")
	}
	d := decoded{kind: rec[0]}
	p := rec[1:]
	var m proto.Message
	switch d.kind {
	case recEntry:
		d.entry = &pb.Entry{}
		m = d.entry
	case recHardState:
		d.hs = &pb.HardState{}
		m = d.hs
	case recSnapshot, recKeep:
		d.snap = &pb.Snapshot{}
		m = d.snap
	case recCompact, recBase, recFloor:
		idx, n := binary.Uvarint(p)
		if n <= 0 {
			return decoded{}, base.CorruptionErrorf("raftlog: bad index in record kind %d", d.kind)
		}
		term, m2 := binary.Uvarint(p[n:])
		if m2 <= 0 || n+m2 != len(p) {
			return decoded{}, base.CorruptionErrorf("raftlog: bad term in record kind %d", d.kind)
		}
		d.id = entryID{index: idx, term: term}
		return d, nil
	default:
		return decoded{}, base.CorruptionErrorf("raftlog: unknown record kind %d", d.kind)
	}
	if err := proto.Unmarshal(p, m); err != nil {
		return decoded{}, base.CorruptionErrorf("raftlog: record kind %d: %w", d.kind, err)
	}
	if d.kind == recEntry && d.entry.GetIndex() == 0 {
		// Raft's entries start at index 1: an entry at 0 is damage (an
		// empty message parses), and replay's index-1 would wrap
		// (FuzzParseCopies/69c87af7f63465f0: the log grew to 24 GB).
		return decoded{}, base.CorruptionErrorf("raftlog: entry record with index 0")
	}
	return d, nil
}

package wear

import (
	"encoding/binary"

	"github.com/flashmend/flashmend/internal/base"
)

// Table is the mapping table's epoch log (paper 004 section III-C, Figure
// 3): every change of an object's row is appended as a record with the
// epoch it happened in, so a coordinator can persist and replay what the
// balancer did; Compact folds the log into one row per object, the latest,
// and drops rows that say nothing beyond the default placement.
//
// Invariant: after Compact, the log is empty and Rows holds at most one row
// per object, none of them a default row.
type Table struct {
	rows map[ObjectID]Entry // compacted: the latest non-default row per object
	log  []LogRecord        // changes since the last compaction, in order
}

// LogRecord is one change in the epoch log.
type LogRecord struct {
	Entry   Entry
	Deleted bool // the object was removed
}

func (t *Table) append(e Entry, deleted bool) {
	t.log = append(t.log, LogRecord{Entry: e, Deleted: deleted})
}

// Log returns the records appended since the last compaction.
func (t *Table) Log() []LogRecord { return t.log }

// History returns the records of one object since the last compaction, in
// order (its epoch log).
func (t *Table) History(id ObjectID) []LogRecord {
	var out []LogRecord
	for _, r := range t.log {
		if r.Entry.Object == id {
			out = append(out, r)
		}
	}
	return out
}

// Compact folds the log into the rows: each object keeps only its latest
// record, a removed object or one whose latest row isDefault reports as
// the default has no row. It returns the number of log records folded.
func (t *Table) Compact(isDefault func(Entry) bool) int {
	if t.rows == nil {
		t.rows = map[ObjectID]Entry{}
	}
	n := len(t.log)
	for _, r := range t.log {
		if r.Deleted || isDefault(r.Entry) {
			delete(t.rows, r.Entry.Object)
			continue
		}
		t.rows[r.Entry.Object] = r.Entry
	}
	t.log = t.log[:0]
	return n
}

// Row returns an object's compacted row.
func (t *Table) Row(id ObjectID) (Entry, bool) {
	e, ok := t.rows[id]
	return e, ok
}

// Rows is the number of compacted rows.
func (t *Table) Rows() int { return len(t.rows) }

// IsDefault reports whether e is the row of an object nothing has moved: in
// the mode's initial redundancy state on its default placement.
func (b *Balancer) IsDefault(e Entry) bool {
	if e.State != Stable(b.defaultRedundancy()) {
		return false
	}
	var i int
	same := true
	b.placer.Walk(e.Object, func(n base.NodeID) bool {
		if e.Dst.Node(i) != n {
			same = false
			return false
		}
		i++
		return i < e.Dst.Width()
	})
	return same && i == e.Dst.Width()
}

// Compact folds the balancer's epoch log (Table.Compact with IsDefault).
func (b *Balancer) Compact() int { return b.table.Compact(b.IsDefault) }

// Entry encoding, the value of a persisted mapping-table row:
//
//	uvarint object | state (1 B) | uvarint epoch | dst layout | src layout (intermediate states only) | CRC32C (4 B, little endian) over all before it
//
// and a layout is its redundancy (1 B) followed by one uvarint node ID per
// part. With node IDs below 16,384 (two uvarint bytes) a row of a
// redundancy state is at most 10+1+5+1+12+4 = 33 bytes and one of an
// intermediate state at most 46 (EntryMaxBytes16K).
const EntryMaxBytes16K = 10 + 1 + 5 + 2*(1+MaxWidth*2) + 4

func appendLayout(b []byte, l Layout) []byte {
	b = append(b, byte(l.Redundancy))
	for i := 0; i < l.Width(); i++ {
		b = binary.AppendUvarint(b, uint64(l.Node(i)))
	}
	return b
}

// AppendBinary appends e's encoding to b.
func (e Entry) AppendBinary(b []byte) []byte {
	start := len(b)
	b = binary.AppendUvarint(b, uint64(e.Object))
	b = append(b, byte(e.State))
	b = binary.AppendUvarint(b, uint64(e.Epoch))
	b = appendLayout(b, e.Dst)
	if e.State.Intermediate() {
		b = appendLayout(b, e.Src)
	}
	return binary.LittleEndian.AppendUint32(b, base.CRC32C(b[start:]))
}

// DecodeEntry reads an encoded row. A row that fails its CRC32C or does not
// parse is a corruption error; a row that parses but breaks an entry's
// invariants is one too.
func DecodeEntry(b []byte) (Entry, error) {
	if len(b) < 4 {
		return Entry{}, base.CorruptionErrorf("wear: mapping row of %d bytes", len(b))
	}
	body, sum := b[:len(b)-4], binary.LittleEndian.Uint32(b[len(b)-4:])
	if base.CRC32C(body) != sum {
		return Entry{}, base.CorruptionErrorf("wear: mapping row fails its CRC32C")
	}
	var e Entry
	r := body
	next := func() (uint64, bool) {
		v, n := binary.Uvarint(r)
		if n <= 0 {
			return 0, false
		}
		r = r[n:]
		return v, true
	}
	layout := func() (Layout, bool) {
		if len(r) < 1 {
			return Layout{}, false
		}
		l := Layout{Redundancy: Redundancy(r[0])}
		r = r[1:]
		if l.Width() == 0 {
			return Layout{}, false
		}
		for i := 0; i < l.Width(); i++ {
			v, ok := next()
			if !ok {
				return Layout{}, false
			}
			l.nodes[i] = base.NodeID(v)
		}
		return l, true
	}
	obj, ok := next()
	if !ok || len(r) < 1 {
		return Entry{}, base.CorruptionErrorf("wear: mapping row truncated")
	}
	e.Object, e.State = ObjectID(obj), State(r[0])
	r = r[1:]
	epoch, ok := next()
	if !ok || epoch > 1<<32-1 {
		return Entry{}, base.CorruptionErrorf("wear: mapping row of %v has a bad epoch", e.Object)
	}
	e.Epoch = uint32(epoch)
	if e.Dst, ok = layout(); !ok {
		return Entry{}, base.CorruptionErrorf("wear: mapping row of %v has a bad destination", e.Object)
	}
	if e.State.Intermediate() {
		if e.Src, ok = layout(); !ok {
			return Entry{}, base.CorruptionErrorf("wear: mapping row of %v has a bad source", e.Object)
		}
	}
	if len(r) != 0 {
		return Entry{}, base.CorruptionErrorf("wear: mapping row of %v has %d trailing bytes", e.Object, len(r))
	}
	if err := e.Check(); err != nil {
		return Entry{}, base.CorruptionErrorf("wear: mapping row of %v: %v", e.Object, err)
	}
	return e, nil
}

package engine

import (
	"bytes"
	"crypto/rand"
	"encoding/binary"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/sstable"
)

// Every sstable a replica writes carries a random 64-bit table id as a
// block property (tableIDCollector). It lets a repair read the engine with
// one damaged table left out (excludeTable), which is correct for the keys
// that table provably does not hold: see AbsentPoint.
//
// Why it is needed: a damaged run of data blocks is repaired over a span
// that starts at the index separator before it, inclusive (Pebble finds an
// excised table's remainders by seeking, and a seek just past the
// separator would land in the damaged block). Pebble shortens separators
// ("key00499" | "key00500" -> "key005"), so the separator is usually not a
// key at all, yet every read of it through the engine seeks into the
// damaged block and fails. Two replicas whose damaged runs meet at the same
// separator from either side (one run ends at it, the other starts after
// it) each counted the separator as lost, asked the other for it, and
// neither could read it: the ranges stayed under repair forever (seen in
// uber-restart-kv at UBER 1e-6). Reading the separator with the damaged
// table left out answers it exactly.

const tableIDProperty = "flashmend.table-id"

// tableIDCollector records one random id for the whole table (and for each
// data and index block, so block-level filtering sees the same id).
type tableIDCollector struct{ id [8]byte }

func newTableIDCollector() pebble.BlockPropertyCollector {
	c := &tableIDCollector{}
	if _, err := rand.Read(c.id[:]); err != nil {
		// crypto/rand does not fail on supported platforms; an all-zero id
		// only means the table cannot be left out of a read (id 0 is never
		// excluded).
		c.id = [8]byte{}
	}
	return c
}

func (c *tableIDCollector) Name() string                                 { return tableIDProperty }
func (c *tableIDCollector) AddPointKey(pebble.InternalKey, []byte) error { return nil }
func (c *tableIDCollector) AddRangeKeys(sstable.Span) error              { return nil }
func (c *tableIDCollector) AddCollectedWithSuffixReplacement([]byte, []byte, []byte) error {
	return nil
}
func (c *tableIDCollector) SupportsSuffixReplacement() bool { return true }
func (c *tableIDCollector) FinishDataBlock(buf []byte) ([]byte, error) {
	return append(buf, c.id[:]...), nil
}
func (c *tableIDCollector) AddPrevDataBlockToIndexBlock() {}
func (c *tableIDCollector) FinishIndexBlock(buf []byte) ([]byte, error) {
	return append(buf, c.id[:]...), nil
}
func (c *tableIDCollector) FinishTable(buf []byte) ([]byte, error) {
	return append(buf, c.id[:]...), nil
}

// tableIDOf returns the id of the table r reads (0 if it has none: a table
// written before ids existed, or whose property does not decode).
func tableIDOf(r *sstable.Reader) uint64 {
	v, ok := r.UserProperties[tableIDProperty]
	// Pebble prefixes a collector's property with its one-byte short id.
	if !ok || len(v) != 9 {
		return 0
	}
	return binary.BigEndian.Uint64([]byte(v[1:]))
}

// excludeTable is a point-key filter that leaves one table out of a read.
type excludeTable struct{ id [8]byte }

func excludeTableFilter(id uint64) *excludeTable {
	f := &excludeTable{}
	binary.BigEndian.PutUint64(f.id[:], id)
	return f
}

func (f *excludeTable) Name() string { return tableIDProperty }
func (f *excludeTable) Intersects(prop []byte) (bool, error) {
	return !bytes.Equal(prop, f.id[:]), nil
}
func (f *excludeTable) SyntheticSuffixIntersects(prop []byte, _ []byte) (bool, error) {
	return f.Intersects(prop)
}

// AbsentPoint is a Pebble key that a damaged table provably does not hold
// (a shortened separator next to its damaged run: see sepAbsent), with the
// table's id. Reading the key with that table left out gives the engine's
// true answer for it.
type AbsentPoint struct {
	Key   []byte // user key
	Table uint64
}

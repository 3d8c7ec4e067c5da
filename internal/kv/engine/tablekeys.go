package engine

import (
	"bytes"
	"encoding/binary"
	"slices"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/sstable"
)

// Every sstable of at most maxTableKeys distinct user keys carries the
// list of those keys as a table property (tableKeysCollector), so that a
// damaged block of a small table isolates to the keys it can hold rather
// than to a key range.
//
// Why it is needed: every memtable flush holds both copies of the applied
// record ("\x00applied" and "~applied"), so every flushed table's bounds are
// the whole key space, and each patch flushes (its applied record must be
// durable with it), making many L0 tables of one or a few data blocks. A
// damaged first or last data block isolates from the table's bound to the
// next separator, and a table's only block isolates to the whole shard
// (DIRECT 000 section 4.1.3 isolates by the index; the index cannot say
// more). When every replica held such a refusal, each refused every key
// the others asked for and the shard stopped (kv-recovery-latency's
// persistent series, 0 ops/s for seconds). With the table's keys known,
// what the replica lost is exactly the keys of the table in the damaged run
// (refused and patched from the peers), and every other key is read with
// the table left out (ReadAround), which is exact because the table holds
// no version of it.
//
// The property is metadata in the table's properties block, which Pebble
// checksums and reads when it opens the table: a table whose properties do
// not read back does not open at all, and IsolateBlocks falls back to the
// whole file.

const tableKeysProperty = "flashmend.table-keys"

// maxTableKeys and maxTableKeyBytes bound the list: a larger table has many
// data blocks, each isolated by its index separators, and its list would
// cost table-cache memory for nothing.
const (
	maxTableKeys     = 128
	maxTableKeyBytes = 8 << 10
)

// tableKeysVersion is the encoding's first byte: the list follows as a
// uvarint count and then each key as a uvarint length and its bytes, in
// ascending order.
const tableKeysVersion = 1

// tableKeysCollector lists the distinct user-space Pebble keys of a table
// (the applied record's copies, outside the user key space, are left out:
// a patch writes them again).
type tableKeysCollector struct {
	keys  [][]byte
	bytes int
	over  bool
}

func newTableKeysCollector() pebble.BlockPropertyCollector { return &tableKeysCollector{} }

func (c *tableKeysCollector) Name() string { return tableKeysProperty }

func (c *tableKeysCollector) AddPointKey(k pebble.InternalKey, _ []byte) error {
	uk := k.UserKey
	if c.over || !bytes.HasPrefix(uk, UserPrefix) {
		return nil
	}
	// Keys arrive in order (all versions of a key together).
	if n := len(c.keys); n > 0 && bytes.Equal(c.keys[n-1], uk) {
		return nil
	}
	c.keys = append(c.keys, bytes.Clone(uk))
	c.bytes += len(uk) + binary.MaxVarintLen32
	if len(c.keys) > maxTableKeys || c.bytes > maxTableKeyBytes {
		c.over, c.keys = true, nil
	}
	return nil
}

func (c *tableKeysCollector) AddRangeKeys(sstable.Span) error { return nil }
func (c *tableKeysCollector) AddCollectedWithSuffixReplacement([]byte, []byte, []byte) error {
	return nil
}
func (c *tableKeysCollector) SupportsSuffixReplacement() bool             { return false }
func (c *tableKeysCollector) FinishDataBlock(buf []byte) ([]byte, error)  { return buf, nil }
func (c *tableKeysCollector) AddPrevDataBlockToIndexBlock()               {}
func (c *tableKeysCollector) FinishIndexBlock(buf []byte) ([]byte, error) { return buf, nil }

// FinishTable writes the list, or nothing (unknown) past the bounds.
func (c *tableKeysCollector) FinishTable(buf []byte) ([]byte, error) {
	if c.over {
		return buf, nil
	}
	buf = append(buf, tableKeysVersion)
	buf = binary.AppendUvarint(buf, uint64(len(c.keys)))
	for _, k := range c.keys {
		buf = binary.AppendUvarint(buf, uint64(len(k)))
		buf = append(buf, k...)
	}
	return buf, nil
}

// decodeTableKeys decodes a tableKeysCollector property (without Pebble's
// short-id prefix): the table's user-space Pebble keys, ascending; ok is
// false if the table has no list or it does not decode.
func decodeTableKeys(v []byte) (keys [][]byte, ok bool) {
	if len(v) == 0 || v[0] != tableKeysVersion {
		return nil, false
	}
	v = v[1:]
	n, m := binary.Uvarint(v)
	if m <= 0 || n > maxTableKeys {
		return nil, false
	}
	v = v[m:]
	keys = make([][]byte, 0, n)
	for i := uint64(0); i < n; i++ {
		l, m := binary.Uvarint(v)
		if m <= 0 || l > uint64(len(v)-m) {
			return nil, false
		}
		k := v[m : m+int(l)]
		if len(keys) > 0 && bytes.Compare(keys[len(keys)-1], k) >= 0 {
			return nil, false
		}
		keys = append(keys, bytes.Clone(k))
		v = v[m+int(l):]
	}
	if len(v) != 0 {
		return nil, false
	}
	return keys, true
}

// tableKeysOf returns the user-space Pebble keys of the table r reads, if
// it lists them.
func tableKeysOf(r *sstable.Reader) ([][]byte, bool) {
	v, ok := r.UserProperties[tableKeysProperty]
	// Pebble prefixes a collector's property with its one-byte short id.
	if !ok || len(v) < 2 {
		return nil, false
	}
	return decodeTableKeys([]byte(v[1:]))
}

// keysIn returns the keys of sorted within [start, end) (end nil:
// unbounded).
func keysIn(sorted [][]byte, start, end []byte) [][]byte {
	lo, _ := slices.BinarySearchFunc(sorted, start, bytes.Compare)
	hi := len(sorted)
	if end != nil {
		hi, _ = slices.BinarySearchFunc(sorted, end, bytes.Compare)
	}
	if lo >= hi {
		return nil
	}
	return sorted[lo:hi]
}

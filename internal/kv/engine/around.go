package engine

import (
	"bytes"
	"context"
	"io"
	"slices"

	"github.com/cockroachdb/pebble/v2"

	"github.com/flashmend/flashmend/internal/gen/kvpb"
)

// Around is what a replica knows of its damaged tables that lets it read
// past their damaged blocks: keys a table provably does not hold. A read of
// such a key with the table left out (its blocks filtered away by table id,
// tableid.go) is the engine's exact answer, because the table holds no
// version of the key; a read of any other key goes through the table as
// usual, and fails if it needs a damaged block (the caller refuses those
// keys anyway: they are under repair).
type Around struct {
	// Points are separators a damaged table does not hold (sepAbsent).
	Points []AbsentPoint
	// Tables are damaged tables whose every user key is known
	// (tablekeys.go): each holds no key outside its list.
	Tables []TableKeys
}

// TableKeys is a table (by id) and every user key it holds, ascending.
type TableKeys struct {
	Table uint64
	Keys  [][]byte
}

// Holds reports whether user key k is in the list.
func (t TableKeys) Holds(k []byte) bool {
	_, found := slices.BinarySearchFunc(t.Keys, k, bytes.Compare)
	return found
}

// Empty reports whether a knows nothing (every read is a plain one).
func (a Around) Empty() bool { return len(a.Points) == 0 && len(a.Tables) == 0 }

// notHolding returns the tables that provably do not hold user key k.
func (a Around) notHolding(k []byte) []uint64 {
	var out []uint64
	for _, p := range a.Points {
		if bytes.Equal(p.Key, k) {
			out = append(out, p.Table)
		}
	}
	for _, t := range a.Tables {
		if !t.Holds(k) {
			out = append(out, t.Table)
		}
	}
	return out
}

// listed returns the tables whose keys are listed (left out of every read
// of a stretch that holds none of their keys).
func (a Around) listed() []uint64 {
	out := make([]uint64, 0, len(a.Tables))
	for _, t := range a.Tables {
		out = append(out, t.Table)
	}
	return out
}

// cuts returns, ascending and once each, the keys of rg that a read must
// take one at a time: the absent points and the listed tables' keys in rg.
// Between two cuts no listed table holds a key.
func (a Around) cuts(rg Range) [][]byte {
	var out [][]byte
	for _, p := range a.Points {
		if rg.Contains(p.Key) {
			out = append(out, p.Key)
		}
	}
	for _, t := range a.Tables {
		lo, _ := slices.BinarySearchFunc(t.Keys, rg.Start, bytes.Compare)
		for _, k := range t.Keys[lo:] {
			if !rg.Contains(k) {
				break
			}
			out = append(out, k)
		}
	}
	slices.SortFunc(out, bytes.Compare)
	return slices.CompactFunc(out, bytes.Equal)
}

// excluding returns r with the tables left out of every read (r itself if
// there are none). A table id 0 (a table without one) is never left out.
func excluding(r pebble.Reader, tables []uint64) pebble.Reader {
	var filters []pebble.BlockPropertyFilter
	for _, t := range tables {
		if t != 0 {
			filters = append(filters, excludeTableFilter(t))
		}
	}
	if len(filters) == 0 {
		return r
	}
	return &excludingReader{Reader: r, filters: filters}
}

// excludingReader is a pebble.Reader whose iterators (and Gets, made with
// an iterator) skip the blocks of some tables.
type excludingReader struct {
	pebble.Reader
	filters []pebble.BlockPropertyFilter
}

func (e *excludingReader) NewIter(o *pebble.IterOptions) (*pebble.Iterator, error) {
	return e.NewIterWithContext(context.Background(), o)
}

func (e *excludingReader) NewIterWithContext(ctx context.Context, o *pebble.IterOptions) (*pebble.Iterator, error) {
	var opts pebble.IterOptions
	if o != nil {
		opts = *o
	}
	opts.PointKeyFilters = append(slices.Clip(opts.PointKeyFilters), e.filters...)
	return e.Reader.NewIterWithContext(ctx, &opts)
}

// Get reads Pebble key k through a filtered iterator (pebble.Reader.Get
// takes no filters). The seek is a prefix seek (the whole key is the
// prefix), so tables' bloom filters skip the tables that do not hold k, as
// a plain Get does.
func (e *excludingReader) Get(k []byte) ([]byte, io.Closer, error) {
	it, err := e.NewIter(&pebble.IterOptions{LowerBound: k, UpperBound: append(bytes.Clone(k), 0)})
	if err != nil {
		return nil, nil, err
	}
	if !it.SeekPrefixGE(k) { // the bounds hold k alone
		err := it.Error()
		if cerr := it.Close(); err == nil {
			err = cerr
		}
		if err == nil {
			err = pebble.ErrNotFound
		}
		return nil, nil, err
	}
	v, err := it.ValueAndErr()
	if err != nil {
		_ = it.Close()
		return nil, nil, err
	}
	return v, it, nil
}

// GetWith reads user key k like Get, with every table a says does not hold
// k left out.
func GetWith(r pebble.Reader, k []byte, a Around) ([]byte, bool, error) {
	if a.Empty() {
		return Get(r, k)
	}
	return Get(excluding(r, a.notHolding(k)), k)
}

// ScanAround reads the user rows of rg for a repair (a patch this replica
// sends, or its own rows around a range it patches) past the damaged tables
// a knows: see ScanBoundedWith. An error (a damaged block it could not
// read past) answers nothing.
func ScanAround(db pebble.Reader, rg Range, a Around) ([]*kvpb.KeyValue, error) {
	rows, _, err := ScanBoundedWith(db, rg.Start, rg.End, 0, 0, a)
	if err != nil {
		return nil, err
	}
	return rows, nil
}

// ScanBoundedWith is ScanBounded past the damaged tables a knows: the
// stretches between cuts (a.cuts) are read with every listed table left
// out (none holds a key there), and each cut key on its own with the
// tables that do not hold it left out (GetWith). limit, maxBytes and more
// are ScanBounded's.
func ScanBoundedWith(db pebble.Reader, start, end []byte, limit, maxBytes int, a Around) (rows []*kvpb.KeyValue, more bool, err error) {
	if a.Empty() {
		return ScanBounded(db, start, end, limit, maxBytes)
	}
	rg := Range{Start: start, End: end}
	cuts := a.cuts(rg)
	stretch := excluding(db, a.listed())
	used := 0
	full := func() bool {
		return (limit > 0 && len(rows) >= limit) || (maxBytes > 0 && used >= maxBytes && len(rows) > 0)
	}
	from := start
	for i := 0; i <= len(cuts); i++ {
		last := i == len(cuts)
		to := end
		if !last {
			to = cuts[i]
		}
		// (A cut may be the empty key: only the last stretch's empty end
		// is unbounded.)
		if (last && len(to) == 0) || bytes.Compare(from, to) < 0 {
			if full() {
				next, _, err := ScanBounded(stretch, from, to, 1, 0)
				if err != nil {
					return nil, false, err
				}
				if len(next) > 0 {
					return rows, true, nil
				}
			} else {
				want, budget := 0, 0
				if limit > 0 {
					want = limit - len(rows)
				}
				if maxBytes > 0 {
					budget = maxBytes - used
				}
				part, m, err := ScanBounded(stretch, from, to, want, budget)
				if err != nil {
					return nil, false, err
				}
				for _, kv := range part {
					used += RowBytes(kv)
				}
				rows = append(rows, part...)
				if m {
					return rows, true, nil
				}
			}
		}
		if last {
			break
		}
		k := cuts[i]
		v, found, err := GetWith(db, k, a)
		if err != nil {
			return nil, false, err
		}
		if found {
			if full() {
				return rows, true, nil
			}
			kv := &kvpb.KeyValue{Key: bytes.Clone(k), Value: v}
			used += RowBytes(kv)
			rows = append(rows, kv)
		}
		from = append(bytes.Clone(k), 0)
	}
	return rows, false, nil
}

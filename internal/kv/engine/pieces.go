package engine

import (
	"bytes"
	"slices"

	"github.com/cockroachdb/pebble/v2"
	"github.com/flashmend/flashmend/internal/base"
	"github.com/flashmend/flashmend/internal/gen/kvpb"
)

// ScanPieces reads rg for a patch a peer asked for, like ScanAround (past
// the damaged tables a knows), and when rg does not read back whole because
// this replica is damaged there too (a block that fails its checksum on
// every attempt), it still answers with what it can vouch for: the prefix
// of rg read forward up to the first failure and the suffix read backward
// down to the last one, each a piece [lo, hi) with every row of rg in it.
// The damaged replica assembles a range from the pieces of all its peers
// (helix recovery), so two peers each damaged once in a range still cover
// it between them, where a peer that answered all or nothing left the range
// unrepaired until the next patch entry and a scan that reads megabytes
// again.
//
// A piece is exact: a forward iterator returns every key below the one it
// fails on, in order, so [rg.Start, last+"\x00") holds every row up to the
// last key read; backward likewise [first, rg.End). The pieces are read
// plainly, or with the listed tables left out when rg holds none of their
// keys (both exact). An error other than corruption answers nothing.
func ScanPieces(db pebble.Reader, rg Range, a Around) ([]Range, []*kvpb.KeyValue) {
	if !a.Empty() {
		rows, err := ScanAround(db, rg, a)
		if err == nil {
			return []Range{rg}, rows
		}
		if !base.IsCorruption(err) {
			return nil, nil
		}
		if len(a.cuts(rg)) == 0 {
			db = excluding(db, a.listed())
		}
	}
	pre, _, err := scanPartial(db, rg.Start, rg.End, 0, 0)
	if err == nil {
		return []Range{rg}, pre
	}
	if !base.IsCorruption(err) {
		return nil, nil
	}
	var pieces []Range
	from := rg.Start
	if len(pre) > 0 {
		from = append(bytes.Clone(pre[len(pre)-1].Key), 0)
		pieces = append(pieces, Range{Start: rg.Start, End: from})
	}
	suf, err := scanSuffix(db, from, rg.End)
	switch {
	case err == nil:
		pieces = append(pieces, Range{Start: from, End: rg.End})
	case !base.IsCorruption(err) || len(suf) == 0:
		return pieces, pre
	default:
		pieces = append(pieces, Range{Start: bytes.Clone(suf[0].Key), End: rg.End})
	}
	return pieces, append(pre, suf...)
}

// scanSuffix reads [start, end) backward from end and returns, in key
// order, the rows of the suffix it read before a failure it could not get
// past (a corruption that fails ReadAttempts fresh iterators in a row, each
// starting just below the smallest key read so far), with that error; with
// no error, every row of the range.
func scanSuffix(r pebble.Reader, start, end []byte) ([]*kvpb.KeyValue, error) {
	var rows []*kvpb.KeyValue // descending
	for failures := 0; ; {
		lo, hi := PebbleSpan(start, end)
		if len(rows) > 0 {
			hi = UserKey(rows[len(rows)-1].Key) // exclusive: below the smallest read
		}
		it, err := r.NewIter(&pebble.IterOptions{LowerBound: lo, UpperBound: hi})
		if err != nil {
			return reversed(rows), Classify(err)
		}
		progress := false
		for valid := it.Last(); valid; valid = it.Prev() {
			k, _ := FromUserKey(it.Key())
			v, verr := it.ValueAndErr()
			if verr != nil {
				err = verr
				break
			}
			rows = append(rows, &kvpb.KeyValue{Key: bytes.Clone(k), Value: bytes.Clone(v)})
			progress = true
		}
		if cerr := it.Close(); err == nil {
			err = cerr
		}
		if err == nil {
			return reversed(rows), nil
		}
		err = Classify(err)
		if !base.IsCorruption(err) {
			return reversed(rows), err
		}
		if progress {
			failures = 0
		}
		if failures++; failures >= ReadAttempts {
			return reversed(rows), err
		}
	}
}

func reversed(rows []*kvpb.KeyValue) []*kvpb.KeyValue {
	out := slices.Clone(rows)
	slices.Reverse(out)
	return out
}

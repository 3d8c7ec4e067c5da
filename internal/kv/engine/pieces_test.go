package engine

import (
	"bytes"
	"context"
	"fmt"
	"testing"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/flashmend/flashmend/internal/gen/kvpb"
)

// TestScanPiecesAroundDamage: a peer damaged inside the range a patch asks
// for answers with the piece before its damage and the piece after it, each
// holding exactly the true rows of its span, and nothing of the damaged
// block; with two damaged blocks the pieces are the outer parts; an
// undamaged range is one piece.
func TestScanPiecesAroundDamage(t *testing.T) {
	open := func(t *testing.T) *StateMachine {
		sm, err := Open(vfs.NewMem(), "sm", 0, 4<<20, func(pebble.DataCorruptionInfo) {}, nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { sm.Close() })
		fillSM(t, sm, 2000)
		if err := sm.db.Compact(context.Background(), []byte("u"), []byte("v"), false); err != nil {
			t.Fatal(err)
		}
		return sm
	}
	value := func(i int) []byte { return []byte(fmt.Sprintf("value-%05d-%0100d", i, i)) }
	key := func(i int) []byte { return []byte(fmt.Sprintf("key-%05d", i)) }
	// check: every piece's rows are exactly the true rows of the piece.
	check := func(t *testing.T, rg Range, pieces []Range, rows map[string][]byte) int {
		t.Helper()
		n := 0
		for i := 0; i < 2000; i++ {
			in := false
			for _, p := range pieces {
				if !rangeCoversRange(rg, p) {
					t.Fatalf("piece %v outside %v", p, rg)
				}
				in = in || p.Contains(key(i))
			}
			v, got := rows[string(key(i))]
			switch {
			case in && (!got || !bytes.Equal(v, value(i))):
				t.Fatalf("piece holds %s but its row is %q (present %v)", key(i), v, got)
			case !in && got:
				t.Fatalf("row %s outside every piece", key(i))
			case in:
				n++
			}
		}
		return n
	}
	rg := Range{Start: key(500), End: key(1500)}

	t.Run("undamaged", func(t *testing.T) {
		sm := open(t)
		pieces, rows := ScanPieces(sm.db, rg, Around{})
		if len(pieces) != 1 || check(t, rg, pieces, rowMap(rows)) != 1000 {
			t.Fatalf("pieces %v", pieces)
		}
	})
	t.Run("one block", func(t *testing.T) {
		sm := open(t)
		if _, _, err := sm.CorruptBlock(key(1000)); err != nil {
			t.Fatal(err)
		}
		pieces, rows := ScanPieces(sm.db, rg, Around{})
		n := check(t, rg, pieces, rowMap(rows))
		t.Logf("pieces %v: %d of 1000 rows", pieces, n)
		if len(pieces) != 2 || n < 900 || n >= 1000 {
			t.Fatalf("pieces %v hold %d rows, want two around one block", pieces, n)
		}
		for _, p := range pieces {
			if p.Contains(key(1000)) {
				t.Fatalf("piece %v holds the damaged key", p)
			}
		}
	})
	t.Run("two blocks", func(t *testing.T) {
		sm := open(t)
		for _, k := range []int{700, 1300} {
			if _, _, err := sm.CorruptBlock(key(k)); err != nil {
				t.Fatal(err)
			}
		}
		pieces, rows := ScanPieces(sm.db, rg, Around{})
		n := check(t, rg, pieces, rowMap(rows))
		t.Logf("pieces %v: %d of 1000 rows", pieces, n)
		if len(pieces) != 2 || n < 300 || n > 500 {
			t.Fatalf("pieces %v hold %d rows, want the parts outside both blocks", pieces, n)
		}
	})
	t.Run("damage at both ends", func(t *testing.T) {
		sm := open(t)
		for _, k := range []int{500, 1499} {
			if _, _, err := sm.CorruptBlock(key(k)); err != nil {
				t.Fatal(err)
			}
		}
		pieces, rows := ScanPieces(sm.db, rg, Around{})
		check(t, rg, pieces, rowMap(rows))
		for _, p := range pieces {
			if p.Contains(key(500)) || p.Contains(key(1499)) {
				t.Fatalf("piece %v holds a damaged key", p)
			}
		}
	})
}

func rowMap(rows []*kvpb.KeyValue) map[string][]byte {
	m := map[string][]byte{}
	for _, kv := range rows {
		m[string(kv.Key)] = kv.Value
	}
	return m
}

func rangeCoversRange(outer, inner Range) bool {
	if bytes.Compare(inner.Start, outer.Start) < 0 {
		return false
	}
	if len(outer.End) == 0 {
		return true
	}
	return len(inner.End) != 0 && bytes.Compare(inner.End, outer.End) <= 0
}

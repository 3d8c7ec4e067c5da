package engine

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/flashmend/flashmend/internal/gen/kvpb"
)

// openFilled opens an engine on fs with n rows (fillSM), closed when the
// test ends.
func openFilled(t *testing.T, fs vfs.FS, n int) *StateMachine {
	t.Helper()
	sm, err := Open(fs, "sm", 0, 4<<20, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sm.Close() })
	fillSM(t, sm, n)
	return sm
}

// TestExciseLossIsReportedNotFatal: a patch's excise cuts a table of
// another level that is damaged right where Pebble seeks for the bound of
// its remainder; the remainder is lost. IngestRanges installs the patch and
// returns an ExciseLossError naming the rows around it to patch again, not
// an error that makes the replica rebuild.
func TestExciseLossIsReportedNotFatal(t *testing.T) {
	fs := vfs.NewMem()
	sm := openFilled(t, fs, 2000)
	if err := sm.db.Compact(context.Background(), []byte{0}, UserEnd, false); err != nil {
		t.Fatal(err)
	}
	key := func(i int) []byte { return []byte(fmt.Sprintf("key-%05d", i)) }
	for i := 1000; i < 1300; i++ {
		if err := sm.db.Set(UserKey(key(i)), []byte(fmt.Sprintf("new-%05d-%0300d", i, i)), pebble.NoSync); err != nil {
			t.Fatal(err)
		}
	}
	if err := sm.db.Flush(); err != nil {
		t.Fatal(err)
	}
	levels, err := sm.db.SSTables()
	if err != nil {
		t.Fatal(err)
	}
	var path string
	for _, tbl := range levels[0] {
		path = fs.PathJoin("sm", fmt.Sprintf("%06d.sst", uint64(tbl.BackingSSTNum)))
	}
	if path == "" {
		t.Fatalf("no L0 table: %v", levels)
	}
	if _, err := sm.corruptBlockInFile(path, UserKey(key(1150)), 0.5); err != nil {
		t.Fatal(err)
	}
	var rows []*kvpb.KeyValue
	for i := 1150; i < 1160; i++ {
		rows = append(rows, &kvpb.KeyValue{Key: key(i), Value: []byte(fmt.Sprintf("new-%05d-%0300d", i, i))})
	}
	err = sm.IngestRanges([]Range{{Start: key(1150), End: key(1160)}}, rows, 10, 1, nil)
	t.Logf("ingest: %v", err)
	var el *ExciseLossError
	if !errors.As(err, &el) {
		t.Fatalf("want an ExciseLossError (the damaged table lost a remainder), got %v", err)
	}
	if len(el.Lost) == 0 {
		t.Fatalf("a loss with no ranges: %v", el)
	}
	// The patched range reads back; every lost range lies outside it.
	got, _, err := Scan(sm.db, key(1150), key(1160), 0)
	if err != nil || len(got) != 10 {
		t.Fatalf("patched range: %d rows, %v", len(got), err)
	}
	for _, l := range el.Lost {
		if l.Overlaps(Range{Start: key(1150), End: key(1160)}) {
			t.Fatalf("lost range %v overlaps the patch", l)
		}
	}
	// Only the damaged table's cut-off part is named, not the whole span
	// the excise touched (the older table below it lost nothing).
	if want := (Range{Start: key(1000), End: key(1150)}); len(el.Lost) != 1 || el.Lost[0].String() != want.String() {
		t.Fatalf("lost %v, want %v", el.Lost, want)
	}
}

// TestPatchThatDoesNotReadBackIsPatchedAgain: the table a patch ingests is
// damaged before the patch is read back (a flip in the fresh table). The
// span is installed and the entry applied, and IngestRanges names the span
// as lost, to be patched again while still refused, instead of an error
// that makes the replica rebuild its whole state from a peer.
func TestPatchThatDoesNotReadBackIsPatchedAgain(t *testing.T) {
	fs := vfs.NewMem()
	sm := openFilled(t, fs, 2000)
	key := func(i int) []byte { return []byte(fmt.Sprintf("key-%05d", i)) }
	damaged := 0
	sm.beforeReadBack = func(lo, hi []byte) {
		levels, err := sm.db.SSTables()
		if err != nil {
			t.Fatal(err)
		}
		// The patch's table is the one inside the span.
		for _, lvl := range levels {
			for _, tbl := range lvl {
				if bytes.Compare(tbl.Smallest.UserKey, lo) < 0 || bytes.Compare(tbl.Largest.UserKey, hi) >= 0 {
					continue
				}
				if _, err := sm.corruptBlockInFile(fs.PathJoin("sm", fmt.Sprintf("%06d.sst", uint64(tbl.BackingSSTNum))), UserKey(key(1150)), 0.5); err != nil {
					t.Fatal(err)
				}
				damaged++
			}
		}
	}
	var rows []*kvpb.KeyValue
	for i := 1100; i < 1200; i++ {
		rows = append(rows, &kvpb.KeyValue{Key: key(i), Value: []byte(fmt.Sprintf("patched-%05d-%0300d", i, i))})
	}
	span := Range{Start: key(1100), End: key(1200)}
	err := sm.IngestRanges([]Range{span}, rows, 10, 1, nil)
	t.Logf("ingest: %v", err)
	if damaged != 1 {
		t.Fatalf("the read-back hook ran %d times", damaged)
	}
	var el *ExciseLossError
	if !errors.As(err, &el) {
		t.Fatalf("want an ExciseLossError naming the span, got %v", err)
	}
	found := false
	for _, l := range el.Lost {
		found = found || l.Includes(span)
	}
	if !found {
		t.Fatalf("lost %v does not name the patched span %v", el.Lost, span)
	}
	if st := sm.Applied(); st.Index != 10 {
		t.Fatalf("applied index %d, want the patch entry's 10", st.Index)
	}
	// The next patch of the span (as the replica proposes it) installs
	// and reads back.
	sm.beforeReadBack = nil
	if err := sm.IngestRanges([]Range{span}, rows, 11, 1, nil); err != nil {
		t.Fatalf("second patch: %v", err)
	}
	got, _, err := Scan(sm.db, span.Start, span.End, 0)
	if err != nil || len(got) != len(rows) {
		t.Fatalf("patched span: %d rows, %v", len(got), err)
	}
}

package engine

import (
	"context"
	"fmt"
	"testing"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/flashmend/flashmend/internal/base"
	"github.com/flashmend/flashmend/internal/gen/kvpb"
)

func put(k, v string) *kvpb.Op { return &kvpb.Op{Kind: kvpb.Op_PUT, Key: []byte(k), Value: []byte(v)} }

func fillSM(t *testing.T, sm *StateMachine, n int) {
	t.Helper()
	for i := 0; i < n; i += 50 {
		b := &kvpb.WriteBatch{}
		for j := i; j < i+50 && j < n; j++ {
			b.Ops = append(b.Ops, put(fmt.Sprintf("key-%05d", j), fmt.Sprintf("value-%05d-%0100d", j, j)))
		}
		if err := sm.ApplyWrite(uint64(i+2), 1, b); err != nil {
			t.Fatal(err)
		}
	}
}

func TestStateMachineCorruptBlockIsolateAndPatch(t *testing.T) {
	fs := vfs.NewMem()
	var reports []pebble.DataCorruptionInfo
	sm, err := Open(fs, "sm", 0, 4<<20, func(i pebble.DataCorruptionInfo) { reports = append(reports, i) }, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer sm.Close()
	fillSM(t, sm, 2000)
	want, n, err := sm.ContentCRC()
	if err != nil || n != 2000 {
		t.Fatalf("crc %v n %d", err, n)
	}
	if err := sm.db.Compact(context.Background(), []byte("u"), []byte("v"), false); err != nil {
		t.Fatal(err)
	}
	path, off, err := sm.CorruptBlock([]byte("key-01000"))
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("corrupted block at %d of %s", off, path)
	_, _, err = Get(sm.db, []byte("key-01000"))
	if !base.IsCorruption(err) {
		t.Fatalf("read of corrupt block: %v", err)
	}
	if len(reports) == 0 || reports[0].Path != path {
		t.Fatalf("reports %v", reports)
	}
	// Keys far away still read.
	if _, found, err := Get(sm.db, []byte("key-00001")); err != nil || !found {
		t.Fatalf("healthy key: %v %v", found, err)
	}
	iso, err := IsolateCorruption(fs, path, sm.opts.MakeReaderOptions(), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("isolated %v", iso)
	if iso.WholeFile || iso.Blocks < 10 {
		t.Fatalf("isolation %v", iso)
	}
	lo, _ := FromUserKey(iso.Start)
	hi, _ := FromUserKey(iso.End)
	r := Range{Start: lo, End: hi}
	// The patch: the range's true content, minus one key (implicit delete).
	var rows []*kvpb.KeyValue
	for i := 0; i < 2000; i++ {
		k := fmt.Sprintf("key-%05d", i)
		if r.Contains([]byte(k)) && k != "key-01000" {
			rows = append(rows, &kvpb.KeyValue{Key: []byte(k), Value: []byte(fmt.Sprintf("value-%05d-%0100d", i, i))})
		}
	}
	if len(rows) > 60 {
		t.Fatalf("range %v holds %d rows: more than a block", r, len(rows))
	}
	if err := sm.IngestRanges([]Range{r}, rows, 100, 1, nil); err != nil {
		t.Fatal(err)
	}
	if _, found, err := Get(sm.db, []byte("key-01000")); err != nil || found {
		t.Fatalf("implicit delete: found=%v err=%v", found, err)
	}
	got, n, err := sm.ContentCRC()
	if err != nil || n != 1999 || got == want {
		t.Fatalf("after patch n=%d err=%v", n, err)
	}
	if st := sm.Applied(); st.Index != 100 || st.Term != 1 {
		t.Fatalf("applied %d.%d", st.Index, st.Term)
	}
}

// contentCRC is the checksum of every user row, in order, and their count.
func (sm *StateMachine) ContentCRC() (uint32, int, error) {
	rows, _, err := Scan(sm.db, nil, nil, 0)
	if err != nil {
		return 0, 0, err
	}
	return RowsCRC(nil, rows), len(rows), nil
}

func TestCheckExcise(t *testing.T) {
	tb := func(backing uint64, lo, hi string) tableBounds {
		return tableBounds{backing: backing, smallest: []byte(lo), largest: []byte(hi)}
	}
	// User keys (prefix "u"): parts outside the user key space hold only
	// the applied record and are not checked.
	before := []tableBounds{tb(6, "ua", "uz"), tb(7, "um", "un"), tb(8, "ux", "uy")}
	lo, hi := []byte("uk"), []byte("up")
	good := []tableBounds{tb(6, "ua", "uj"), tb(6, "uq", "uz"), tb(8, "ux", "uy"), tb(9, "uk", "uo")}
	if err := checkExcise(before, good, lo, hi); err != nil {
		t.Fatalf("good excise: %v", err)
	}
	lostLeft := []tableBounds{tb(6, "uq", "uz"), tb(8, "ux", "uy")}
	if err := checkExcise(before, lostLeft, lo, hi); !base.IsCorruption(err) {
		t.Fatalf("lost left remainder: %v", err)
	}
	lostRight := []tableBounds{tb(6, "ua", "uj"), tb(8, "ux", "uy")}
	if err := checkExcise(before, lostRight, lo, hi); !base.IsCorruption(err) {
		t.Fatalf("lost right remainder: %v", err)
	}
}

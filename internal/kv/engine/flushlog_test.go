package engine

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/flashmend/flashmend/internal/flipfs"
	"github.com/flashmend/flashmend/internal/gen/kvpb"
)

func TestFlushLogSince(t *testing.T) {
	var l flushLog
	m0 := l.mark()
	if got, ok := l.since(m0); len(got) != 0 || !ok {
		t.Fatalf("no flush: %v %v", got, ok)
	}
	flush := func(n uint64) {
		var ti pebble.TableInfo
		setNum(&ti.FileNum, n)
		l.flushEnd(pebble.FlushInfo{Output: []pebble.TableInfo{ti}})
	}
	flush(7)
	m1 := l.mark()
	flush(8)
	flush(9)
	if got, ok := l.since(m1); len(got) != 2 || !ok || got[0].backing != 8 || got[1].backing != 9 {
		t.Fatalf("since %d: %v %v", m1, got, ok)
	}
	if got, ok := l.since(m0); len(got) != 3 || !ok {
		t.Fatalf("since %d: %v %v", m0, got, ok)
	}
	l.flushEnd(pebble.FlushInfo{Err: fmt.Errorf("failed"), Output: []pebble.TableInfo{{FileNum: 99}}})
	if got, _ := l.since(m0); len(got) != 3 {
		t.Fatalf("a failed flush was recorded: %v", got)
	}
	for i := 0; i < maxFlushLog; i++ {
		flush(uint64(100 + i))
	}
	if _, ok := l.since(m0); ok {
		t.Fatal("since a mark older than the flushes kept: want incomplete")
	}
	if got, ok := l.since(l.mark() - 1); len(got) != 1 || !ok {
		t.Fatalf("the last flush: %v %v", got, ok)
	}
}

// setNum sets a Pebble file number (a type of Pebble's internal package).
func setNum[T ~uint64](p *T, n uint64) { *p = T(n) }

// TestQuietPatchReadsNoRowsAround: a patch excised while no compaction runs
// checks what the excise kept from the tables before and after it (and the
// table the flush it forced wrote), not by reading every row of the tables
// it cuts (often the whole shard, and under persistent flips every read
// makes new damage). The memtable holds a key of the span, so Pebble flushes
// it first and the excise cuts the flushed table too: its remainders are
// there, every row around the span reads back.
func TestQuietPatchReadsNoRowsAround(t *testing.T) {
	ffs, err := flipfs.New(vfs.NewMem(), flipfs.Options{})
	if err != nil {
		t.Fatal(err)
	}
	sm, err := Open(ffs, "sm", 0, 4<<20, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sm.Close() })
	rng := rand.New(rand.NewPCG(1, 2)) // incompressible values: tables as large as their rows
	for i := 0; i < 3000; i += 100 {
		b := &kvpb.WriteBatch{}
		for j := i; j < i+100; j++ {
			v := make([]byte, 300)
			for k := range v {
				v[k] = byte(rng.Uint32())
			}
			b.Ops = append(b.Ops, put(fmt.Sprintf("key-%05d", j), string(v)))
		}
		if err := sm.ApplyWrite(uint64(i+2), 1, b); err != nil {
			t.Fatal(err)
		}
	}
	if err := sm.db.Compact(context.Background(), []byte{0}, UserEnd, false); err != nil {
		t.Fatal(err)
	}
	for _, i := range []int{10, 1505, 2990} { // one in the span, two around it
		if err := sm.db.Set(UserKey(key(i)), []byte("memtable"), pebble.NoSync); err != nil {
			t.Fatal(err)
		}
	}
	var rows []*kvpb.KeyValue
	for i := 1500; i < 1510; i++ {
		rows = append(rows, &kvpb.KeyValue{Key: key(i), Value: []byte(fmt.Sprintf("patched-%05d", i))})
	}
	var tableBytes int64
	levels, err := sm.db.SSTables()
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range levels {
		for _, tbl := range l {
			tableBytes += int64(tbl.Size)
		}
	}
	mark := sm.flushes.mark()
	ffs.Enable(true)
	err = sm.IngestRanges([]Range{{Start: key(1500), End: key(1510)}}, rows, 100, 1, nil)
	ffs.Enable(false)
	if err != nil {
		t.Fatal(err)
	}
	read := ffs.Stats().SSTBitsRead / 8
	t.Logf("the patch read %d bytes of sstables (%d in the tables it cut)", read, tableBytes)
	// Reading the rows around the span before and after the excise reads
	// the tables it cuts twice (2.4 times their bytes here); the patch's
	// own reads (seeks at the span's edges, the read back of the span, the
	// tables' metadata, Pebble's background table stats) are 4-24%.
	if read > tableBytes {
		t.Fatalf("the patch read %d bytes of %d: the rows around the span were read", read, tableBytes)
	}
	if got, ok := sm.flushes.since(mark); len(got) == 0 || !ok {
		t.Fatalf("the flush the ingest forced is not recorded: %v %v", got, ok)
	}
	got, _, err := Scan(sm.db, key(0), key(3000), 0)
	if err != nil || len(got) != 3000 {
		t.Fatalf("rows: %d, %v", len(got), err)
	}
	for _, kv := range got {
		var want string
		switch k := string(kv.Key); {
		case k == string(key(10)) || k == string(key(2990)):
			want = "memtable"
		case k >= string(key(1500)) && k < string(key(1510)):
			want = "patched-" + k[len("key-"):]
		default:
			continue
		}
		if string(kv.Value) != want {
			t.Fatalf("%s = %q, want %q", kv.Key, kv.Value, want)
		}
	}
}

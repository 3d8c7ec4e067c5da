package engine

import (
	"bytes"
	"context"
	"fmt"
	"math/rand"
	"testing"

	"github.com/cockroachdb/pebble/v2/sstable"
	"github.com/cockroachdb/pebble/v2/sstable/block"
	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/flashmend/flashmend/internal/testseed"
)

// TestIsolationMatchesBruteForce damages a random data block and checks the
// isolated range against a second computation: reading every key one by
// one. Every unreadable key must be inside the range, and the range may
// hold at most the two neighbouring readable keys besides.
func TestIsolationMatchesBruteForce(t *testing.T) {
	seed := testseed.Seed(t, "FLASHMEND_TEST_SEED")
	rng := rand.New(rand.NewSource(seed))
	for round := 0; round < 5; round++ {
		n := 1000 + rng.Intn(2000)
		fs, sm, path, layout := compactedTable(t, n)
		h := layout.Data[rng.Intn(len(layout.Data))]
		if err := FlipByteAt(fs, path, int64(h.Offset)+rng.Int63n(int64(h.Length))); err != nil {
			t.Fatal(err)
		}
		iso, err := IsolateCorruption(fs, path, sm.opts.MakeReaderOptions(), nil, nil)
		if err != nil || iso.WholeFile {
			t.Fatalf("seed %d: Isolation %v, %v", seed, iso, err)
		}
		lo, _ := FromUserKey(iso.Start)
		hi, _ := FromUserKey(iso.End)
		rg := Range{Start: lo, End: hi}
		bad, extra := 0, 0
		for i := 0; i < n; i++ {
			k := []byte(fmt.Sprintf("key-%05d", i))
			_, _, err := Get(sm.db, k)
			switch {
			case err != nil && !rg.Contains(k):
				t.Fatalf("seed %d: unreadable key %s outside isolated range %v", seed, k, rg)
			case err != nil:
				bad++
			case rg.Contains(k):
				extra++
			}
		}
		if bad == 0 || extra > 2 {
			t.Fatalf("seed %d: range %v holds %d unreadable and %d readable keys", seed, rg, bad, extra)
		}
		sm.Close()
	}
}

// compactedTable is a state machine in memory holding n keys (fillSM)
// compacted into tables, and the path and layout of the last one listed.
func compactedTable(t *testing.T, n int) (vfs.FS, *StateMachine, string, *sstable.Layout) {
	t.Helper()
	fs := vfs.NewMem()
	sm, err := Open(fs, "sm", 0, 4<<20, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	fillSM(t, sm, n)
	if err := sm.db.Compact(context.Background(), UserPrefix, UserEnd, false); err != nil {
		t.Fatal(err)
	}
	levels, _ := sm.db.SSTables()
	var path string
	for _, l := range levels {
		for _, tbl := range l {
			path = fs.PathJoin("sm", fmt.Sprintf("%06d.sst", uint64(tbl.BackingSSTNum)))
		}
	}
	return fs, sm, path, sstLayout(t, fs, path, sm.opts.MakeReaderOptions())
}

func sstLayout(t *testing.T, fs vfs.FS, path string, ro sstable.ReaderOptions) *sstable.Layout {
	t.Helper()
	l, err := TableLayout(fs, path, ro)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// TestIsolateBlocksMatchesBruteForce damages several random data blocks of
// a table and checks IsolateBlocks against reading every key: every
// unreadable key lies in some span, each span holds only damaged blocks'
// keys plus the separators around them, and runs of adjacent damaged
// blocks come back as one span each.
func TestIsolateBlocksMatchesBruteForce(t *testing.T) {
	seed := testseed.Seed(t, "FLASHMEND_TEST_SEED")
	rng := rand.New(rand.NewSource(seed))
	for round := 0; round < 5; round++ {
		n := 2000 + rng.Intn(2000)
		fs, sm, path, layout := compactedTable(t, n)
		hit := map[int]bool{}
		for k := 0; k < 1+rng.Intn(4); k++ {
			i := rng.Intn(len(layout.Data))
			hit[i] = true
			h := layout.Data[i]
			if err := FlipByteAt(fs, path, int64(h.Offset)+rng.Int63n(int64(h.Length))); err != nil {
				t.Fatal(err)
			}
		}
		runs := 0
		for i := range layout.Data {
			if hit[i] && !hit[i-1] {
				runs++
			}
		}
		spans, total, err := IsolateBlocks(fs, path, sm.opts.MakeReaderOptions(), nil, nil)
		if err != nil || total != len(layout.Data) || len(spans) != runs {
			t.Fatalf("seed %d: %d spans of %d blocks (%v), want %d runs of %d blocks", seed, len(spans), total, err, runs, len(layout.Data))
		}
		// Spans in the user keys' range; a span past them (the table's
		// last block holds the state machine's own keys) holds no user
		// key, and a span that ends past them is unbounded.
		var rgs []Range
		userSpans := 0
		for _, sp := range spans {
			lo, ok := FromUserKey(sp.Start)
			if !ok && bytes.Compare(sp.Start, UserPrefix) > 0 {
				continue
			}
			hi, _ := FromUserKey(sp.End)
			rgs = append(rgs, Range{Start: lo, End: hi})
			userSpans++
		}
		inSpan := func(k []byte) bool {
			for _, rg := range rgs {
				if rg.Contains(k) {
					return true
				}
			}
			return false
		}
		bad, covered := 0, 0
		for i := 0; i < n; i++ {
			k := []byte(fmt.Sprintf("key-%05d", i))
			_, _, err := Get(sm.db, k)
			if err != nil {
				bad++
				if !inSpan(k) {
					t.Fatalf("seed %d: unreadable key %s outside every span %v", seed, k, rgs)
				}
			}
			if inSpan(k) {
				covered++
			}
		}
		// Each span holds its blocks' keys and at most the separator keys
		// at its two ends besides.
		if (bad == 0 && userSpans > 0) || covered > bad+2*userSpans {
			t.Fatalf("seed %d: %d unreadable keys, %d keys in %d spans of user keys", seed, bad, covered, userSpans)
		}
		sm.Close()
	}
}

// TestVerifySSTableSkipping: with two damaged data blocks, the scrub's
// check names the first; told the first is repaired (a patch cut its keys
// out of the live data, the backing file keeps it), it names the second;
// told both are, it finds nothing. Regression: the scrubber named the
// repaired block on every pass and never reached later damage in the file.
func TestVerifySSTableSkipping(t *testing.T) {
	fs, sm, path, layout := compactedTable(t, 3000)
	ro := sm.opts.MakeReaderOptions()
	if len(layout.Data) < 4 {
		t.Fatalf("%d data blocks: the test needs four", len(layout.Data))
	}
	a, b := layout.Data[1].Handle, layout.Data[len(layout.Data)-2].Handle
	for _, h := range []block.Handle{a, b} {
		if err := FlipByteAt(fs, path, int64(h.Offset+h.Length/2)); err != nil {
			t.Fatal(err)
		}
	}
	named := func(skip func(uint64) bool) (uint64, bool) {
		t.Helper()
		err := VerifySSTableSkipping(fs, path, ro, skip)
		if err == nil {
			return 0, false
		}
		h, ok := CorruptBlockHandle(err)
		if !ok {
			t.Fatalf("an error that names no block: %v", err)
		}
		return h.Offset, true
	}
	if off, ok := named(nil); !ok || off != a.Offset {
		t.Fatalf("no skip: names block %d (%v), want %d", off, ok, a.Offset)
	}
	if off, ok := named(func(o uint64) bool { return o == a.Offset }); !ok || off != b.Offset {
		t.Fatalf("first repaired: names block %d (%v), want %d", off, ok, b.Offset)
	}
	if off, ok := named(func(o uint64) bool { return o == a.Offset || o == b.Offset }); ok {
		t.Fatalf("both repaired: names block %d", off)
	}
}

package sdfvfs

import (
	"bytes"
	"math/rand"
	"testing"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/bloom"
	"github.com/cockroachdb/pebble/v2/sstable"
	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/flashmend/flashmend/internal/base"
	"github.com/flashmend/flashmend/internal/flash"
)

func TestNormalizeRanges(t *testing.T) {
	got, err := normalizeRanges([]Range{{Off: 50, Len: 10}, {Off: 0, Len: 10}, {Off: 5, Len: 10}, {Off: 60, Len: 5}, {Off: 100, Len: 0}, {Off: 80, Len: 1}}, 100)
	if err != nil {
		t.Fatal(err)
	}
	want := []Range{{Off: 0, Len: 15}, {Off: 50, Len: 15}, {Off: 80, Len: 1}}
	if len(got) != len(want) {
		t.Fatalf("got %v want %v", got, want)
	}
	for i := range got {
		if got[i] != want[i] {
			t.Fatalf("got %v want %v", got, want)
		}
	}
	for _, bad := range []Range{{Off: -1, Len: 2}, {Off: 0, Len: -1}, {Off: 90, Len: 11}} {
		if _, err := normalizeRanges([]Range{bad}, 100); !base.IsInvalidArgument(err) {
			t.Fatalf("%s: err %v", bad, err)
		}
	}
}

// TestDuplicateRanges: a damaged page inside a duplicated range is served
// from the range copy (and repaired); bytes of a damaged page outside every
// range are a corruption error.
func TestDuplicateRanges(t *testing.T) {
	const seed = 21
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewSource(seed))
	dev := memDevice(t, flash.Options{Seed: seed})
	fs := mount(t, dev, false, Options{})
	if err := fs.MkdirAll("d", 0o755); err != nil {
		t.Fatal(err)
	}
	content := make([]byte, 50_000)
	rng.Read(content)
	f, err := fs.Create("d/data", vfs.WriteCategoryUnspecified)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write(content); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	ps := dev.Geometry().PageSize
	// Page 2 is wholly covered, page 0 only partly.
	ranges := []Range{{Off: 100, Len: 3000}, {Off: int64(2 * ps), Len: int64(ps)}, {Off: int64(2*ps) + 10, Len: 5}}
	if err := fs.DuplicateRanges("d/data", ranges); err != nil {
		t.Fatal(err)
	}
	got, err := fs.DuplicatedRanges("d/data")
	if err != nil || len(got) != 2 || got[0] != (Range{Off: 100, Len: 3000}) || got[1] != (Range{Off: int64(2 * ps), Len: int64(ps)}) {
		t.Fatalf("duplicated ranges %v, %v", got, err)
	}
	pages := filePages(t, dev, fs, "d/data")
	flipPages(dev, rng, map[int][]flash.PageAddr{0: pages[0], 2: pages[2]})

	r, err := fs.Open("d/data")
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	// Inside the copied ranges: served from the copy.
	for _, rg := range []Range{{Off: 100, Len: 3000}, {Off: 500, Len: 10}, {Off: int64(2 * ps), Len: int64(ps)}} {
		buf := make([]byte, rg.Len)
		if n, err := r.ReadAt(buf, rg.Off); err != nil || n != len(buf) {
			t.Fatalf("read %s: n=%d err=%v", rg, n, err)
		}
		if !bytes.Equal(buf, content[rg.Off:rg.End()]) {
			t.Fatalf("read %s: wrong data", rg)
		}
	}
	st := fs.Stats()
	if st.CopyReads == 0 || st.Repairs != 1 {
		// Page 2 is repaired (fully copied); page 0 cannot be (bytes 0-99
		// and 3100-4095 have no copy).
		t.Fatalf("stats: %s", st)
	}
	// Outside: the uncopied bytes of page 0 are a corruption.
	buf := make([]byte, 50)
	n, err := r.ReadAt(buf, 0)
	if !pebble.IsCorruptionError(err) || !base.IsCorruption(err) || n != 0 {
		t.Fatalf("read of uncopied damaged bytes: n=%d err=%v", n, err)
	}
	// A read spanning both: the copy cannot cover page 0's tail.
	buf = make([]byte, 3*ps)
	if _, err := r.ReadAt(buf, 0); !pebble.IsCorruptionError(err) {
		t.Fatalf("spanning read: %v", err)
	}
	// Page 2 was rewritten: a fresh mount reads it without the copy.
	fs = remount(t, nil, fs, dev, Options{})
	r2, err := fs.Open("d/data")
	if err != nil {
		t.Fatal(err)
	}
	buf = make([]byte, ps)
	if _, err := r2.ReadAt(buf, int64(2*ps)); err != nil || !bytes.Equal(buf, content[2*ps:3*ps]) {
		t.Fatalf("repaired page: %v", err)
	}
	if st := fs.Stats(); st.CopyReads != 0 {
		t.Fatalf("repaired page still read from the copy: %s", st)
	}
	r2.Close()
	// Bad ranges are refused.
	if err := fs.DuplicateRanges("d/data", []Range{{Off: 49_000, Len: 2000}}); !base.IsInvalidArgument(err) {
		t.Fatalf("range past the end: %v", err)
	}
	// Renaming carries the copy; removing drops it.
	if err := fs.Rename("d/data", "d/data2"); err != nil {
		t.Fatal(err)
	}
	if got, _ := fs.DuplicatedRanges("d/data2"); len(got) != 2 {
		t.Fatalf("after rename: %v", got)
	}
	if err := fs.Remove("d/data2"); err != nil {
		t.Fatal(err)
	}
	for _, n := range fs.SDF().List() {
		if isReserved(n) {
			t.Fatalf("copy %q outlived its file", n)
		}
	}
}

// TestSSTMetadataRanges: with the sstable hook, every sstable keeps a copy
// of its index, filter, properties, meta-index and footer; damage to those
// pages is served from the copy and Pebble reads every key.
func TestSSTMetadataRanges(t *testing.T) {
	const seed, n = 22, 20_000
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewSource(seed))
	opts := Options{MetadataRanges: SSTMetadataRanges(sstable.ReaderOptions{})}
	dev := memDevice(t, flash.Options{Seed: seed})
	fs := mount(t, dev, false, opts)
	// A bloom filter makes every table's metadata span whole pages.
	po := func() *pebble.Options {
		o := pebbleOptions(t, fs)
		o.Levels[0].FilterPolicy = bloom.FilterPolicy(10)
		return o
	}
	fs, ssts := flushedTables(t, dev, fs, po(), n, opts)
	ps := int64(dev.Geometry().PageSize)
	flipped := 0
	for _, sst := range ssts {
		rs, err := fs.DuplicatedRanges(sst)
		if err != nil || len(rs) == 0 {
			t.Fatalf("%s has no metadata copy: %v", sst, err)
		}
		fi, err := fs.Stat(sst)
		if err != nil {
			t.Fatal(err)
		}
		pl, _ := fs.Placement(sst)
		t.Logf("%s: %d B, metadata %v; %s", sst, fi.Size(), rs, pl)
		// Damage every page that lies wholly inside the metadata.
		pages := filePages(t, dev, fs, sst)
		victims := map[int][]flash.PageAddr{}
		for i, as := range pages {
			lo, hi := int64(i)*ps, min(int64(i+1)*ps, fi.Size())
			for _, r := range rs {
				if r.Off <= lo && hi <= r.End() {
					victims[i] = as
				}
			}
		}
		flipped += flipPages(dev, rng, victims)
	}
	if flipped < 2*len(ssts) {
		t.Fatalf("only %d pages lie wholly inside the metadata of %d sstables", flipped, len(ssts))
	}
	t.Logf("flipped a bit in %d metadata pages", flipped)
	var cl corruptionListener
	o := cl.options(t, fs)
	o.Levels[0].FilterPolicy = bloom.FilterPolicy(10)
	db, err := pebble.Open("db", o)
	if err != nil {
		t.Fatal(err)
	}
	checkKeys(t, db, n, 1)
	if ok, corrupt := getAll(t, db, n, 7, 1); corrupt != 0 {
		t.Fatalf("%d corrupt gets (%d ok)", corrupt, ok)
	}
	st := fs.Stats()
	t.Logf("vfs: %s; corruption events %d", st, cl.dataCorruption.Load())
	if st.CopyReads == 0 || st.Repairs == 0 || cl.dataCorruption.Load() != 0 {
		t.Fatalf("want copy reads and repairs, no corruption: %s", st)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
}

package sdfvfs

import (
	"bytes"
	"context"
	"errors"
	"math/rand"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/flashmend/flashmend/internal/base"
	"github.com/flashmend/flashmend/internal/flash"
)

// filePages finds the flash pages holding the current content of the file
// at path by reading every page of the zones the file maps (and no zone of
// its copy) and matching page content, so the test needs no sdf internals.
// It returns, per file page, the matching physical pages.
func filePages(t testing.TB, dev flash.Device, fs *FS, path string) map[int][]flash.PageAddr {
	t.Helper()
	pl, err := fs.Placement(path)
	if err != nil {
		t.Fatal(err)
	}
	return pagesIn(t, dev, readAll(t, fs, path), pl.PrimaryZones, pl.CopyZones)
}

// copyPages is filePages for the shadow copy of the file at path.
func copyPages(t testing.TB, dev flash.Device, fs *FS, path string) map[int][]flash.PageAddr {
	t.Helper()
	pl, err := fs.Placement(path)
	if err != nil {
		t.Fatal(err)
	}
	return pagesIn(t, dev, readAll(t, fs, path), pl.CopyZones, pl.PrimaryZones)
}

// pagesIn finds the pages of zones (none of which may be in avoid) whose
// content is a page of content.
func pagesIn(t testing.TB, dev flash.Device, content []byte, zones, avoid []int) map[int][]flash.PageAddr {
	t.Helper()
	copyZone := map[int]bool{}
	for _, z := range avoid {
		copyZone[z] = true
	}
	g := dev.Geometry()
	ps := g.PageSize
	out := map[int][]flash.PageAddr{}
	data, oob := make([]byte, ps), make([]byte, g.OOBSize)
	for _, z := range zones {
		if copyZone[z] {
			t.Fatalf("file and copy share zone %d", z)
		}
		ch, blk := z%g.Channels, z/g.Channels
		for d := 0; d < g.DiesPerChannel; d++ {
			for pg := 0; pg < g.PagesPerBlock; pg++ {
				a := flash.PageAddr{Channel: ch, Die: d, Block: blk, Page: pg}
				if _, err := dev.Read(a, data, oob); err != nil {
					continue
				}
				for i := 0; i*ps < len(content); i++ {
					chunk := content[i*ps : min((i+1)*ps, len(content))]
					if bytes.Equal(data[:len(chunk)], chunk) && allZero(data[len(chunk):]) {
						out[i] = append(out[i], a)
					}
				}
			}
		}
	}
	if len(out) != (len(content)+ps-1)/ps {
		t.Fatalf("found pages for %d of the %d pages in zones %v", len(out), (len(content)+ps-1)/ps, zones)
	}
	return out
}

func allZero(b []byte) bool {
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}

// flipPages makes one persistent bit flip in every page of pages.
func flipPages(dev *flash.Emulator, rng *rand.Rand, pages map[int][]flash.PageAddr) int {
	n := 0
	for _, as := range pages {
		for _, a := range as {
			dev.Faults().FlipBit(a, rng.Intn(8*dev.Geometry().PageSize), true)
			n++
		}
	}
	return n
}

func listWithPrefix(t testing.TB, fs *FS, dir, prefix string) []string {
	t.Helper()
	names, err := fs.List(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, n := range names {
		if strings.HasPrefix(n, prefix) || strings.HasSuffix(n, prefix) {
			out = append(out, fs.PathJoin(dir, n))
		}
	}
	return out
}

// remount closes Pebble and sdf and mounts the same device again, so every
// later read comes from flash.
func remount(t testing.TB, db *pebble.DB, fs *FS, dev flash.Device, opts Options) *FS {
	t.Helper()
	if db != nil {
		if err := db.Close(); err != nil {
			t.Fatal(err)
		}
	}
	if err := fs.SDF().Close(); err != nil {
		t.Fatal(err)
	}
	return mount(t, dev, true, opts)
}

// TestManifestServedFromShadow flips a bit in every page of the MANIFEST:
// Pebble still opens, the damaged pages are read from the shadow copy and
// rewritten, and the next mount reads a clean MANIFEST. Without duplication
// (DIRECT's baseline) the same damage stops Pebble from opening.
func TestManifestServedFromShadow(t *testing.T) {
	for _, dup := range []bool{true, false} {
		t.Run(map[bool]string{true: "duplicated", false: "baseline"}[dup], func(t *testing.T) {
			const seed = 11
			t.Logf("seed %d", seed)
			rng := rand.New(rand.NewSource(seed))
			opts := Options{NoDuplication: !dup}
			dev := memDevice(t, flash.Options{Seed: seed})
			fs := mount(t, dev, false, opts)
			db, err := pebble.Open("db", pebbleOptions(t, fs))
			if err != nil {
				t.Fatal(err)
			}
			writeKeys(t, db, 20_000, 500, 1)
			if err := db.Flush(); err != nil {
				t.Fatal(err)
			}
			fs = remount(t, db, fs, dev, opts)
			manifests := listWithPrefix(t, fs, "db", "MANIFEST-")
			if len(manifests) != 1 {
				t.Fatalf("manifests: %v", manifests)
			}
			pl, err := fs.Placement(manifests[0])
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("placement: %s (apart=%t)", pl, pl.Apart())
			if dup && pl.CopyZones == nil {
				t.Fatalf("MANIFEST has no copy")
			}
			flips := flipPages(dev, rng, filePages(t, dev, fs, manifests[0]))
			t.Logf("flipped a bit in %d pages of %s", flips, manifests[0])

			db, err = pebble.Open("db", pebbleOptions(t, fs))
			if !dup {
				if err == nil || !pebble.IsCorruptionError(err) {
					t.Fatalf("baseline: open with a corrupt MANIFEST: err=%v, want corruption", err)
				}
				t.Logf("baseline: %v", err)
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			checkKeys(t, db, 20_000, 1)
			st := fs.Stats()
			t.Logf("vfs: %s", st)
			if st.CopyReads == 0 || st.Repairs == 0 || st.Corruptions != 0 {
				t.Fatalf("want copy reads and repairs and no corruption: %s", st)
			}
			// The repair rewrote the MANIFEST: a fresh mount reads it clean.
			fs = remount(t, db, fs, dev, opts)
			db, err = pebble.Open("db", pebbleOptions(t, fs))
			if err != nil {
				t.Fatal(err)
			}
			checkKeys(t, db, 20_000, 1)
			if st := fs.Stats(); st.CopyReads != 0 {
				t.Fatalf("after repair: %s", st)
			}
			if err := db.Close(); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// corruptionListener counts Pebble's corruption events.
type corruptionListener struct {
	dataCorruption, background atomic.Int64
}

func (c *corruptionListener) options(t testing.TB, fs *FS) *pebble.Options {
	o := pebbleOptions(t, fs)
	o.EventListener = &pebble.EventListener{
		DataCorruption: func(pebble.DataCorruptionInfo) { c.dataCorruption.Add(1) },
		BackgroundError: func(err error) {
			if pebble.IsCorruptionError(err) {
				c.background.Add(1)
			}
		},
	}
	return o
}

// getAll reads every stride-th key of [0, n) with Get and counts correct
// values and corruption errors; any wrong value or other error fails the
// test.
func getAll(t testing.TB, db *pebble.DB, n, stride, gen int) (ok, corrupt int) {
	t.Helper()
	for i := 0; i < n; i += stride {
		v, closer, err := db.Get(key(i))
		if err != nil {
			if !pebble.IsCorruptionError(err) || !base.IsCorruption(err) {
				t.Fatalf("get %s: %v (not a corruption)", key(i), err)
			}
			corrupt++
			continue
		}
		if !bytes.Equal(v, value(i, gen)) {
			t.Fatalf("get %s = %q: WRONG DATA (want %q)", key(i), v, value(i, gen))
		}
		closer.Close()
		ok++
	}
	return ok, corrupt
}

// TestSSTBitFlipsReportCorruption flips a bit in every flash page of one
// sstable: Pebble reports corruption (DataCorruption fires) and every read
// either fails with a corruption or returns the right value.
func TestSSTBitFlipsReportCorruption(t *testing.T) {
	const seed, n = 12, 20_000
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewSource(seed))
	dev := memDevice(t, flash.Options{Seed: seed})
	fs := mount(t, dev, false, Options{})
	fs, ssts := flushedTables(t, dev, fs, pebbleOptions(t, fs), n, Options{})
	victim := ssts[rng.Intn(len(ssts))]
	flips := flipPages(dev, rng, filePages(t, dev, fs, victim))
	t.Logf("flipped a bit in %d pages of %s (of %d sstables)", flips, victim, len(ssts))

	var cl corruptionListener
	db, err := pebble.Open("db", cl.options(t, fs))
	if err != nil {
		t.Fatal(err)
	}
	// Every 50th key: the damaged table fails to open on each Get.
	ok, corrupt := getAll(t, db, n, 50, 1)
	t.Logf("gets: %d correct, %d corruption errors; DataCorruption events %d; vfs %s; sdf checksum errors %d",
		ok, corrupt, cl.dataCorruption.Load(), fs.Stats(), fs.SDF().Stats().ChecksumErrors)
	if corrupt == 0 || cl.dataCorruption.Load() == 0 {
		t.Fatalf("corruption not reported: %d corrupt gets, %d events", corrupt, cl.dataCorruption.Load())
	}
	if ok == 0 {
		t.Fatalf("no key outside the damaged table was readable")
	}
	// A scan stops at the damage with a corruption error, after correct keys.
	it, err := db.NewIter(nil)
	if err != nil {
		t.Fatal(err)
	}
	i := 0
	for valid := it.First(); valid; valid = it.Next() {
		if !bytes.Equal(it.Key(), key(i)) || !bytes.Equal(it.Value(), value(i, 1)) {
			t.Fatalf("scan entry %d: WRONG DATA %q=%q", i, it.Key(), it.Value())
		}
		i++
	}
	if err := it.Close(); !pebble.IsCorruptionError(err) {
		t.Fatalf("scan ended after %d keys with %v, want corruption", i, err)
	}
	// A compaction that reads the damaged table fails as a corruption and
	// Pebble reports it as a background error.
	err = db.Compact(context.Background(), key(0), key(n), false)
	if !pebble.IsCorruptionError(err) || cl.background.Load() == 0 {
		t.Fatalf("compaction over the damage: %v; %d corruption background errors", err, cl.background.Load())
	}
	if err := db.Close(); err != nil && !errors.Is(err, base.ErrCorruption) {
		t.Logf("close: %v", err)
	}
}

// TestUBERReportsCorruption runs Pebble on a device that flips each bit read
// with probability UBER (DIRECT's UBER injection), transiently (1e-5; sdf's
// re-read often clears it) or persistently (2e-6, written into the cells):
// reads fail with corruption errors, never return wrong data.
func TestUBERReportsCorruption(t *testing.T) {
	for _, c := range []struct {
		name       string
		persistent bool
		uber       float64
		opts       Options
	}{
		{"transient", false, 1e-5, Options{}},
		// NB: with persistent flips every read may damage what it reads,
		// and Pebble re-reads a block that failed on every Get that needs
		// it, so the damage spreads to the pages such reads share with
		// the next blocks: most Gets fail. A layer above must repair or
		// stop reading a damaged range (DIRECT policy 1); never wrong data.
		{"persistent", true, 2e-6, Options{}},
	} {
		t.Run(c.name, func(t *testing.T) {
			const seed, n = 13, 20_000
			t.Logf("seed %d, UBER %g", seed, c.uber)
			dev := memDevice(t, flash.Options{Seed: seed, ErrorModel: flash.UBERModel{UBER: c.uber, Persistent: c.persistent}})
			fs := mount(t, dev, false, c.opts)
			var cl corruptionListener
			o := cl.options(t, fs)
			o.DisableAutomaticCompactions = true // reads only from the Gets below
			db, err := pebble.Open("db", o)
			if err != nil {
				t.Fatal(err)
			}
			writeKeys(t, db, n, 500, 1)
			if err := db.Flush(); err != nil {
				t.Fatal(err)
			}
			// Reopen Pebble (not sdf: its metadata is read only at mount)
			// so the block cache is cold and every block comes from flash.
			if err := db.Close(); err != nil {
				t.Fatal(err)
			}
			db, err = pebble.Open("db", o)
			if err != nil {
				t.Fatalf("open: %v (vfs %s)", err, fs.Stats())
			}
			ok, corrupt := getAll(t, db, n, 1, 1)
			s := fs.SDF().Stats()
			t.Logf("gets: %d correct, %d corruption errors; events %d; vfs %s; sdf checksum errors %d, corruptions %d",
				ok, corrupt, cl.dataCorruption.Load(), fs.Stats(), s.ChecksumErrors, s.Corruptions)
			if ok == 0 {
				t.Fatalf("no correct read")
			}
			if corrupt == 0 || cl.dataCorruption.Load() == 0 {
				t.Fatalf("corruption not reported: %d corrupt gets, %d events", corrupt, cl.dataCorruption.Load())
			}
			_ = db.Close()
		})
	}
}

// TestLogicalCorruptionCaughtByPebble: a byte flipped through WriteAt (a
// rewrite with valid page checksums, as KV's corruption tool plants it)
// is caught by Pebble's block checksum: corruption, never wrong data.
func TestLogicalCorruptionCaughtByPebble(t *testing.T) {
	const seed, n = 14, 10_000
	t.Logf("seed %d", seed)
	dev := memDevice(t, flash.Options{Seed: seed})
	fs := mount(t, dev, false, Options{})
	fs, ssts := flushedTables(t, dev, fs, pebbleOptions(t, fs), n, Options{})
	f, err := fs.OpenReadWrite(ssts[0], vfs.WriteCategoryUnspecified)
	if err != nil {
		t.Fatal(err)
	}
	b := make([]byte, 1)
	if _, err := f.ReadAt(b, 100); err != nil {
		t.Fatal(err)
	}
	b[0] ^= 0x5a
	if _, err := f.WriteAt(b, 100); err != nil { // inside the first data block
		t.Fatal(err)
	}
	f.Close()
	var cl corruptionListener
	db, err := pebble.Open("db", cl.options(t, fs))
	if err != nil {
		t.Fatal(err)
	}
	// Pebble's checksum catches it, not sdf's: the error is Pebble's
	// corruption only.
	ok, corrupt := 0, 0
	for i := 0; i < n; i++ {
		v, closer, err := db.Get(key(i))
		if err != nil {
			if !pebble.IsCorruptionError(err) {
				t.Fatalf("get %s: %v", key(i), err)
			}
			corrupt++
			continue
		}
		if !bytes.Equal(v, value(i, 1)) {
			t.Fatalf("get %s: WRONG DATA %q", key(i), v)
		}
		closer.Close()
		ok++
	}
	t.Logf("gets: %d correct, %d corruption errors; events %d", ok, corrupt, cl.dataCorruption.Load())
	if corrupt == 0 || cl.dataCorruption.Load() == 0 {
		t.Fatal("planted corruption not reported")
	}
	_ = db.Close()
}

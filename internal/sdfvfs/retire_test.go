package sdfvfs

import (
	"bytes"
	"fmt"
	"io"
	"strings"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/flashmend/flashmend/internal/flash"
	"github.com/flashmend/flashmend/internal/testseed"
)

// TestRetireCopiesOffFailedDie: duplicated files (MANIFEST, OPTIONS,
// markers), their shadows and range copies spread over every die; one die
// fails. RetireCopies rewrites what the die held of each from its other
// copy, so that afterwards the identifier finds nothing of them on the die,
// every file and every copy reads back whole from its own pages (no
// fallback), and the ranges of files without a copy are left and counted.
func TestRetireCopiesOffFailedDie(t *testing.T) {
	rng := testseed.Rand(t, "SDFVFS_SEED")
	dev := memDevice(t, flash.Options{Seed: rng.Int63()})
	// The sstables here are random bytes: the hook names two ranges of
	// each as its metadata, as SSTMetadataRanges would name the blocks.
	meta := []Range{{Off: 0, Len: 4096}, {Off: 20_000, Len: 9_000}}
	fs := mount(t, dev, false, Options{MetadataRanges: func(p string, _ io.ReaderAt, _ int64) ([]Range, bool, error) {
		return meta, strings.HasSuffix(p, ".sst"), nil
	}})
	if err := fs.MkdirAll("db", 0o755); err != nil {
		t.Fatal(err)
	}
	want := map[string][]byte{}
	write := func(name string, n int) {
		f, err := fs.Create(name, vfs.WriteCategoryUnspecified)
		if err != nil {
			t.Fatal(err)
		}
		data := make([]byte, n)
		rng.Read(data)
		if _, err := f.Write(data); err != nil {
			t.Fatal(err)
		}
		if err := f.Sync(); err != nil {
			t.Fatal(err)
		}
		if err := f.Close(); err != nil {
			t.Fatal(err)
		}
		want[name] = data
	}
	for i := 0; i < 6; i++ {
		write(fmt.Sprintf("db/MANIFEST-%06d", i), 40_000+rng.Intn(80_000))
		write(fmt.Sprintf("db/OPTIONS-%06d", i), 5_000+rng.Intn(10_000))
		write(fmt.Sprintf("db/marker.manifest.%06d.MANIFEST-%06d", i, i), 0)
		write(fmt.Sprintf("db/%06d.sst", i), 100_000+rng.Intn(100_000))
	}
	// The die that holds the most of the copies and copied files.
	sfs := fs.SDF()
	g := dev.Geometry()
	var die flash.DieAddr
	best := -1
	for c := 0; c < g.Channels; c++ {
		for d := 0; d < g.DiesPerChannel; d++ {
			lost, _, err := sfs.LostRanges(flash.DieAddr{Channel: c, Die: d})
			if err != nil {
				t.Fatal(err)
			}
			n := 0
			for _, r := range lost {
				if isReserved(r.Name) || strings.Contains(r.Name, "MANIFEST") || strings.Contains(r.Name, "OPTIONS") {
					n++
				}
			}
			if n > best {
				die, best = flash.DieAddr{Channel: c, Die: d}, n
			}
		}
	}
	if err := dev.FailDie(die); err != nil {
		t.Fatal(err)
	}
	if err := sfs.MarkDieFailed(die); err != nil {
		t.Fatal(err)
	}
	before, _, err := sfs.LostRanges(die)
	if err != nil {
		t.Fatal(err)
	}
	ret, err := fs.RetireCopies(die)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("die %s: %d ranges before; %s", die, len(before), ret)
	if ret.Ranges == 0 || ret.Unrepairable != 0 {
		t.Fatalf("retired %s", ret)
	}
	after, _, err := sfs.LostRanges(die)
	if err != nil {
		t.Fatal(err)
	}
	left := 0
	for _, r := range after {
		if isReserved(r.Name) || fs.opts.DuplicateFile(r.Name) {
			t.Fatalf("%v still on the failed die after %s", r, ret)
		}
		left++
	}
	if left != ret.Left {
		t.Fatalf("%d ranges left on the die, RetireCopies counted %d", left, ret.Left)
	}
	// Every duplicated file and its shadow read back whole from their own
	// pages, straight from sdf.
	for name, data := range want {
		if !fs.opts.DuplicateFile(name) {
			continue
		}
		for _, n := range []string{name, shadowName(name)} {
			f, err := sfs.OpenFile(n)
			if err != nil {
				t.Fatal(err)
			}
			got := make([]byte, len(data))
			k, err := f.ReadAt(got, 0)
			_ = f.Close()
			if k != len(data) || !bytes.Equal(got, data) {
				t.Fatalf("%s: read %d of %d bytes (%v), equal %v", n, k, len(data), err, bytes.Equal(got, data))
			}
		}
	}
	// The range copies verify again and hold the files' bytes.
	for i := 0; i < 6; i++ {
		name := fmt.Sprintf("db/%06d.sst", i)
		recs, err := fs.loadRanges(name)
		if err != nil || len(recs) != len(meta) {
			t.Fatalf("range copy of %s: %d records, %v", name, len(recs), err)
		}
		for _, rec := range recs {
			if !rec.ok || !bytes.Equal(rec.data, want[name][rec.Off:rec.Off+rec.Len]) {
				t.Fatalf("range copy of %s: %v does not verify or differs", name, rec.Range)
			}
		}
	}
}

// TestFillFromRangeCopy: the bytes of a window that the file's range copy
// holds are written into it from the copy, the rest are left as they were
// (objstore.RetireLost's zeros); a file without a range copy fills nothing.
func TestFillFromRangeCopy(t *testing.T) {
	rng := testseed.Rand(t, "SDFVFS_SEED")
	dev := memDevice(t, flash.Options{Seed: rng.Int63()})
	meta := []Range{{Off: 0, Len: 4096}, {Off: 20_000, Len: 9_000}}
	fs := mount(t, dev, false, Options{MetadataRanges: func(p string, _ io.ReaderAt, _ int64) ([]Range, bool, error) {
		return meta, strings.HasSuffix(p, ".sst"), nil
	}})
	data := make([]byte, 60_000)
	rng.Read(data)
	for _, name := range []string{"t.sst", "t.log"} {
		f, err := fs.Create(name, vfs.WriteCategoryUnspecified)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.Write(data); err != nil {
			t.Fatal(err)
		}
		if err := f.Close(); err != nil {
			t.Fatal(err)
		}
	}
	inMeta := func(off int64) bool {
		for _, r := range meta {
			if r.Off <= off && off < r.Off+r.Len {
				return true
			}
		}
		return false
	}
	for _, w := range []Range{{Off: 0, Len: 8192}, {Off: 16_384, Len: 16_384}, {Off: 40_960, Len: 4096}, {Off: 28_000, Len: 32_000}} {
		buf := make([]byte, w.Len)
		n := fs.FillFromRangeCopy("t.sst", w.Off, buf)
		want := 0
		for i := range buf {
			off := w.Off + int64(i)
			if inMeta(off) {
				want++
				if buf[i] != data[off] {
					t.Fatalf("window %v: byte %d not filled from the copy", w, off)
				}
			} else if buf[i] != 0 {
				t.Fatalf("window %v: byte %d outside the copy's ranges written", w, off)
			}
		}
		if n != want {
			t.Fatalf("window %v: filled %d bytes, want %d", w, n, want)
		}
		if k := fs.FillFromRangeCopy("t.log", w.Off, make([]byte, w.Len)); k != 0 {
			t.Fatalf("a file without a range copy filled %d bytes", k)
		}
	}
}

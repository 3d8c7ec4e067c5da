package sdfvfs

import (
	"testing"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/sstable"
	"github.com/flashmend/flashmend/internal/flash"
)

// checkCopiesApart requires every file in dir that has a copy to have it on
// channels the file does not use, and returns how many files have copies.
func checkCopiesApart(t *testing.T, fs *FS, dir string) int {
	t.Helper()
	names, err := fs.List(dir)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, name := range names {
		pl, err := fs.Placement(fs.PathJoin(dir, name))
		if err != nil || pl.CopyZones == nil {
			continue
		}
		n++
		if !pl.Apart() {
			t.Errorf("copy not apart: %s", pl)
		}
	}
	return n
}

const (
	testKeys  = 100_000
	testBatch = 1_000
)

// TestPebbleMemoryReopen writes 100,000 keys, closes Pebble and sdf, mounts
// the same memory device again and reads every key back.
func TestPebbleMemoryReopen(t *testing.T) {
	dev := memDevice(t, flash.Options{Seed: 1})
	fs := mount(t, dev, false, Options{})
	db, err := pebble.Open("db", pebbleOptions(t, fs))
	if err != nil {
		t.Fatal(err)
	}
	writeKeys(t, db, testKeys, testBatch, 1)
	checkKeys(t, db, testKeys, 1)
	if n := checkCopiesApart(t, fs, "db"); n < 2 {
		t.Fatalf("%d files with copies, want MANIFEST and OPTIONS at least", n)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	if err := fs.SDF().Close(); err != nil {
		t.Fatal(err)
	}
	t.Logf("sdf after load: %s", fs.SDF().Stats())

	fs = mount(t, dev, true, Options{})
	db, err = pebble.Open("db", pebbleOptions(t, fs))
	if err != nil {
		t.Fatal(err)
	}
	checkKeys(t, db, testKeys, 1)
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	if err := fs.SDF().Close(); err != nil {
		t.Fatal(err)
	}
}

// TestPebbleFileReopen is the same on the file backend, with new device,
// sdf and vfs objects over the same directory, and with range copies of
// every sstable's metadata.
func TestPebbleFileReopen(t *testing.T) {
	dir := t.TempDir()
	open := func() *flash.Emulator {
		dev, err := flash.OpenFile(dir, testGeometry(), flash.Options{Seed: 1})
		if err != nil {
			t.Fatal(err)
		}
		return dev
	}
	opts := Options{MetadataRanges: SSTMetadataRanges(sstable.ReaderOptions{})}
	dev := open()
	fs := mount(t, dev, false, opts)
	db, err := pebble.Open("/data/db", pebbleOptions(t, fs))
	if err != nil {
		t.Fatal(err)
	}
	writeKeys(t, db, testKeys, testBatch, 1)
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	if err := fs.SDF().Close(); err != nil {
		t.Fatal(err)
	}
	if err := dev.Close(); err != nil {
		t.Fatal(err)
	}

	dev = open()
	fs = mount(t, dev, true, opts)
	db, err = pebble.Open("/data/db", pebbleOptions(t, fs))
	if err != nil {
		t.Fatal(err)
	}
	checkKeys(t, db, testKeys, 1)
	ssts, copies := len(listWithPrefix(t, fs, "data/db", ".sst")), checkCopiesApart(t, fs, "data/db")
	if ssts == 0 || copies < ssts+2 {
		t.Fatalf("%d files with copies for %d sstables", copies, ssts)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	if err := fs.SDF().Close(); err != nil {
		t.Fatal(err)
	}
	if err := dev.Close(); err != nil {
		t.Fatal(err)
	}
}

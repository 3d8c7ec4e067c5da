package sdfvfs

import (
	"testing"

	"github.com/cockroachdb/pebble/v2"
	"github.com/flashmend/flashmend/internal/flash"
)

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
// sdf and vfs objects over the same directory.
func TestPebbleFileReopen(t *testing.T) {
	dir := t.TempDir()
	open := func() *flash.Emulator {
		dev, err := flash.OpenFile(dir, testGeometry(), flash.Options{Seed: 1})
		if err != nil {
			t.Fatal(err)
		}
		return dev
	}
	dev := open()
	fs := mount(t, dev, false, Options{})
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
	fs = mount(t, dev, true, Options{})
	db, err = pebble.Open("/data/db", pebbleOptions(t, fs))
	if err != nil {
		t.Fatal(err)
	}
	checkKeys(t, db, testKeys, 1)
	// Overwrite half and reopen once more: the second generation wins.
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

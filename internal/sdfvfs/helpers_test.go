package sdfvfs

import (
	"bytes"
	"fmt"
	"io"
	"testing"

	"github.com/cockroachdb/pebble/v2"
	"github.com/flashmend/flashmend/internal/flash"
	"github.com/flashmend/flashmend/internal/sdf"
)

// testGeometry is a 64 MiB device: 4 channels x 2 dies x 64 blocks x 32
// pages of 4 KiB (256 zones of 252 KiB data each).
func testGeometry() flash.Geometry {
	return flash.Geometry{Channels: 4, DiesPerChannel: 2, BlocksPerDie: 64, PagesPerBlock: 32, PageSize: 4096, OOBSize: 128}
}

// mount formats (or, with reopen, opens) sdf on dev and returns a vfs on it.
func mount(t testing.TB, dev flash.Device, reopen bool, opts Options) *FS {
	t.Helper()
	var sfs *sdf.FS
	var err error
	if reopen {
		sfs, err = sdf.Open(dev, sdf.Options{})
	} else {
		sfs, err = sdf.Format(dev, sdf.Options{})
	}
	if err != nil {
		t.Fatal(err)
	}
	fs, err := New(sfs, opts)
	if err != nil {
		t.Fatal(err)
	}
	return fs
}

func memDevice(t testing.TB, opts flash.Options) *flash.Emulator {
	t.Helper()
	dev, err := flash.NewMemory(testGeometry(), opts)
	if err != nil {
		t.Fatal(err)
	}
	return dev
}

// quietLogger drops Pebble's info logs (its fatal logs still fail the test).
type quietLogger struct{ t testing.TB }

func (quietLogger) Infof(string, ...any)           {}
func (quietLogger) Errorf(string, ...any)          {}
func (l quietLogger) Fatalf(f string, args ...any) { l.t.Fatalf(f, args...) }

func pebbleOptions(t testing.TB, fs *FS) *pebble.Options {
	o := &pebble.Options{FS: fs, MemTableSize: 1 << 20, Logger: quietLogger{t}}
	return o
}

func key(i int) []byte { return []byte(fmt.Sprintf("key%08d", i)) }

// value is a deterministic 24-byte value for key i in generation gen.
func value(i, gen int) []byte { return []byte(fmt.Sprintf("v%02d-%08d-%012d", gen, i, i*7919)) }

// writeKeys writes keys [0, n) in synced batches of batch keys.
func writeKeys(t testing.TB, db *pebble.DB, n, batch, gen int) {
	t.Helper()
	for lo := 0; lo < n; lo += batch {
		b := db.NewBatch()
		for i := lo; i < min(lo+batch, n); i++ {
			if err := b.Set(key(i), value(i, gen), nil); err != nil {
				t.Fatal(err)
			}
		}
		if err := b.Commit(pebble.Sync); err != nil {
			t.Fatal(err)
		}
	}
}

// checkKeys scans the DB and requires exactly keys [0, n) of generation gen.
func checkKeys(t testing.TB, db *pebble.DB, n, gen int) {
	t.Helper()
	it, err := db.NewIter(nil)
	if err != nil {
		t.Fatal(err)
	}
	i := 0
	for valid := it.First(); valid; valid = it.Next() {
		if i >= n || !bytes.Equal(it.Key(), key(i)) || !bytes.Equal(it.Value(), value(i, gen)) {
			t.Fatalf("entry %d: got %q=%q", i, it.Key(), it.Value())
		}
		i++
	}
	if err := it.Close(); err != nil {
		t.Fatal(err)
	}
	if i != n {
		t.Fatalf("scanned %d keys, want %d", i, n)
	}
	for _, j := range []int{0, n / 3, n / 2, n - 1} {
		v, closer, err := db.Get(key(j))
		if err != nil {
			t.Fatalf("get %s: %v", key(j), err)
		}
		if !bytes.Equal(v, value(j, gen)) {
			t.Fatalf("get %s = %q", key(j), v)
		}
		closer.Close()
	}
}

func readAll(t testing.TB, fs *FS, name string) []byte {
	t.Helper()
	f, err := fs.Open(name)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	b, err := io.ReadAll(f)
	if err != nil {
		t.Fatalf("read %s: %v", name, err)
	}
	return b
}

func isPebbleCorruption(err error) bool { return pebble.IsCorruptionError(err) }

// flushedTables writes n keys (generation 1) to a Pebble on fs opened with
// o, flushes them to sstables and remounts the device with opts, so every
// later read comes from flash. It returns the remounted FS and the tables.
func flushedTables(t testing.TB, dev flash.Device, fs *FS, o *pebble.Options, n int, opts Options) (*FS, []string) {
	t.Helper()
	db, err := pebble.Open("db", o)
	if err != nil {
		t.Fatal(err)
	}
	writeKeys(t, db, n, 500, 1)
	if err := db.Flush(); err != nil {
		t.Fatal(err)
	}
	fs = remount(t, db, fs, dev, opts)
	ssts := listWithPrefix(t, fs, "db", ".sst")
	if len(ssts) == 0 {
		t.Fatal("no sstables")
	}
	return fs, ssts
}

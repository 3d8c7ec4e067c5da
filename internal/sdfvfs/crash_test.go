package sdfvfs

import (
	"sync/atomic"
	"testing"

	"github.com/cockroachdb/pebble/v2"
	"github.com/flashmend/flashmend/internal/flash"
)

// crashDevice passes operations to a device until Crash; from then on every
// operation fails, as if power was cut: what was programmed stays, nothing
// more reaches the cells.
type crashDevice struct {
	flash.Device
	crashed atomic.Bool
}

func (d *crashDevice) Crash() { d.crashed.Store(true) }

func (d *crashDevice) Program(a flash.PageAddr, data, oob []byte) error {
	if d.crashed.Load() {
		return &flash.OpError{Op: "program", Addr: a, Err: flash.ErrClosed}
	}
	return d.Device.Program(a, data, oob)
}

func (d *crashDevice) Read(a flash.PageAddr, data, oob []byte) (flash.ReadStatus, error) {
	if d.crashed.Load() {
		return flash.ReadStatus{}, &flash.OpError{Op: "read", Addr: a, Err: flash.ErrClosed}
	}
	return d.Device.Read(a, data, oob)
}

func (d *crashDevice) Erase(a flash.BlockAddr) error {
	if d.crashed.Load() {
		return &flash.OpError{Op: "erase", Addr: flash.PageAddr{Channel: a.Channel, Die: a.Die, Block: a.Block}, Err: flash.ErrClosed}
	}
	return d.Device.Erase(a)
}

// TestPebbleCrashRecovery cuts power under an idle Pebble (no Close of
// Pebble, sdf or the device) after synced and unsynced batches, mounts the
// device again and opens Pebble: every synced batch is there (replayed
// from the WAL on sdf), with the MANIFEST and its shadow read back.
func TestPebbleCrashRecovery(t *testing.T) {
	const seed, n, batch = 31, 30_000, 1_000
	t.Logf("seed %d", seed)
	dev := memDevice(t, flash.Options{Seed: seed})
	cd := &crashDevice{Device: dev}
	fs := mount(t, cd, false, Options{})
	o := pebbleOptions(t, fs)
	// Keep Pebble idle at the crash: no flush or compaction in flight.
	o.MemTableSize = 64 << 20
	o.DisableAutomaticCompactions = true
	db, err := pebble.Open("db", o)
	if err != nil {
		t.Fatal(err)
	}
	writeKeys(t, db, n/2, batch, 1)
	if err := db.Flush(); err != nil { // the first half in an sstable
		t.Fatal(err)
	}
	writeKeys(t, db, n, batch, 1) // all keys again, synced, in the WAL only
	b := db.NewBatch()
	if err := b.Set(key(n), value(n, 1), nil); err != nil {
		t.Fatal(err)
	}
	if err := b.Commit(pebble.NoSync); err != nil { // may be lost
		t.Fatal(err)
	}
	cd.Crash()
	// db and the old sdf are abandoned, as a crashed process leaves them.

	fs = mount(t, dev, true, Options{})
	db, err = pebble.Open("db", pebbleOptions(t, fs))
	if err != nil {
		t.Fatal(err)
	}
	// Keys [0, n) are present; key n (unsynced) may or may not be.
	it, err := db.NewIter(&pebble.IterOptions{UpperBound: key(n)})
	if err != nil {
		t.Fatal(err)
	}
	i := 0
	for valid := it.First(); valid; valid = it.Next() {
		if string(it.Key()) != string(key(i)) || string(it.Value()) != string(value(i, 1)) {
			t.Fatalf("entry %d: %q=%q", i, it.Key(), it.Value())
		}
		i++
	}
	if err := it.Close(); err != nil {
		t.Fatal(err)
	}
	if i != n {
		t.Fatalf("recovered %d keys, want %d", i, n)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	if err := fs.SDF().Close(); err != nil {
		t.Fatal(err)
	}
}

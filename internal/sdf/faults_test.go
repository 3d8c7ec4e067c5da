package sdf

import (
	"errors"
	"math/rand"
	"testing"

	"github.com/flashmend/flashmend/internal/flash"
)

// TestProgramFailure: a program that fails (a grown bad block) makes the
// zone read-only and the pages are written elsewhere; nothing is lost.
func TestProgramFailure(t *testing.T) {
	dev, fs := newMem(t, small(), Options{})
	defer fs.Close()
	rng := rand.New(rand.NewSource(14))
	first := randBytes(rng, 5*4096)
	writeFile(t, fs, "a", LifetimeNone, first)
	fi, _ := fs.Stat("a")
	z := fs.Zones()[fi.Zones[0]]
	// The next page of that zone (page 5 of the stripe: die 1, page 2).
	next := fs.l.DataPageAddr(z.ID, z.Dies, z.WritePointer)
	dev.Faults().FailProgram(next)
	second := randBytes(rng, 40*4096)
	w, err := fs.Create("b", LifetimeNone)
	if err != nil {
		t.Fatal(err)
	}
	fs.mu.Lock()
	w.ino.last = fs.zones.All[z.ID] // make b continue in a's zone
	fs.mu.Unlock()
	if _, err := w.Write(second); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	mustEqual(t, "b", readFile(t, fs, "b"), second)
	// The device retires the whole block, so a's pages on it are lost:
	// reads say so, naming the range, and a rewrite repairs them.
	fa, _ := fs.OpenFile("a")
	ps := int64(fs.l.Geometry.PageSize)
	lost := 0
	for off := int64(0); off < int64(len(first)); off += ps {
		_, err := fa.ReadAt(make([]byte, ps), off)
		var ce *CorruptionError
		if errors.As(err, &ce) {
			if !errors.Is(err, flash.ErrBadBlock) || ce.Off != off || ce.Addr.BlockAddr() != next.BlockAddr() {
				t.Fatalf("%+v", ce)
			}
			if err := fs.RewriteRange("a", ce.Off, first[ce.Off:ce.Off+ce.Len]); err != nil {
				t.Fatal(err)
			}
			lost++
		} else if err != nil {
			t.Fatal(err)
		}
	}
	fa.Close()
	if lost != 2 {
		t.Fatalf("%d pages of a lost with the block, want 2", lost)
	}
	mustEqual(t, "a", readFile(t, fs, "a"), first)
	st := fs.Stats()
	if st.ProgramErrors != 1 {
		t.Fatalf("program errors %d", st.ProgramErrors)
	}
	if got := fs.Zones()[z.ID].State; got != ZoneReadOnly {
		t.Fatalf("zone after a failed program: %s", got)
	}
	if dev.Faults().Pending() != 0 {
		t.Fatal("the injected program failure never fired")
	}
	// Once its data is gone the zone is reset on its remaining good die.
	fs.Remove("a")
	fs.Remove("b")
	after := fs.Zones()[z.ID]
	if after.State != ZoneEmpty || len(after.Dies) != 1 {
		t.Fatalf("after reset: %s dies %v", after, after.Dies)
	}
	// And survives a reopen with its reduced die set.
	writeFile(t, fs, "c", LifetimeNone, randBytes(rng, 200_000))
	fs.Close()
	fs2, err := Open(dev, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer fs2.Close()
	if got := fs2.Zones()[z.ID].Dies; len(got) != 1 {
		t.Fatalf("dies after reopen %v", got)
	}
	readFile(t, fs2, "c")
}

// TestEraseFailure: a failed erase retires the block and the zone goes on
// striping over the dies left.
func TestEraseFailure(t *testing.T) {
	dev, fs := newMem(t, small(), Options{})
	defer fs.Close()
	rng := rand.New(rand.NewSource(15))
	zb := zoneBytes(fs)
	writeFile(t, fs, "a", LifetimeNone, randBytes(rng, zb))
	fi, _ := fs.Stat("a")
	z := fs.Zones()[fi.Zones[0]]
	dev.Faults().FailErase(flash.BlockAddr{Channel: z.Channel, Die: 0, Block: z.Block})
	if err := fs.Remove("a"); err != nil {
		t.Fatal(err)
	}
	after := fs.Zones()[z.ID]
	if after.State != ZoneEmpty || len(after.Dies) != 1 || after.Dies[0] != 1 || after.Capacity != z.Capacity/2 {
		t.Fatalf("after failed erase: %s dies %v", after, after.Dies)
	}
	if st := fs.Stats(); st.BadBytes == 0 {
		t.Fatalf("bad bytes not counted: %s", st)
	}
}

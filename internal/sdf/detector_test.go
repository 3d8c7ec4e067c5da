package sdf

import (
	"math/rand"
	"sync/atomic"
	"testing"
	"time"

	"github.com/flashmend/flashmend/internal/flash"
)

// pagesOnDie lists the file offsets of f's pages that sit on die d.
func pagesOnDie(fs *FS, name string) map[flash.DieAddr][]int64 {
	out := map[flash.DieAddr][]int64{}
	ino := fs.files[name]
	ps := int64(fs.l.Geometry.PageSize)
	for _, e := range ino.m.Exts {
		z := fs.zones.All[e.Zone]
		for k := 0; k < e.N; k++ {
			a := fs.l.DataPageAddr(z.ID, z.Dies, e.ZonePage+k)
			out[a.DieAddr()] = append(out[a.DieAddr()], int64(e.FilePage+uint64(k))*ps)
		}
	}
	return out
}

func writeOn(t *testing.T, fs *FS, name string, ch int, data []byte) {
	t.Helper()
	w, err := fs.CreateOn(name, LifetimeNone, ch)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Write(data); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestDetectorDeclaresSilentDieFailed: a die that dies without the device
// saying so is found from its bad blocks: the first uncorrectable read is a
// suspect, the probes of its block and neighbours fail, and the die is
// declared failed after DieBadBlocks+1 bad blocks, with one event.
func TestDetectorDeclaresSilentDieFailed(t *testing.T) {
	var calls atomic.Int32
	got := make(chan DieFailure, 4)
	dev, fs := newMem(t, small(), Options{OnDieFailure: func(f DieFailure) { calls.Add(1); got <- f }})
	defer fs.Close()
	data := randBytes(rand.New(rand.NewSource(13)), 60*4096)
	writeOn(t, fs, "f", 0, data)
	var target flash.DieAddr
	var offs []int64
	for d, o := range pagesOnDie(fs, "f") {
		target, offs = d, o
		break
	}
	if err := dev.FailDieSilently(target); err != nil {
		t.Fatal(err)
	}
	f, _ := fs.OpenFile("f")
	defer f.Close()
	ps := int64(fs.l.Geometry.PageSize)
	if _, err := f.ReadAt(make([]byte, ps), offs[0]); err == nil {
		t.Fatal("read of a dead die returned data")
	}
	if fd := fs.FailedDies(); len(fd) != 1 || fd[0] != target {
		t.Fatalf("failed dies %v after one read of dead %s", fd, target)
	}
	evs := fs.DieFailures()
	if len(evs) != 1 || evs[0].Die != target || evs[0].Reported || evs[0].BadBlocks != 5 || evs[0].Latency() < 0 {
		t.Fatalf("events %+v", evs)
	}
	select {
	case ev := <-got:
		if ev != evs[0] {
			t.Fatalf("callback %+v, event %+v", ev, evs[0])
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no callback")
	}
	if st := fs.Stats(); st.Probes == 0 || st.Probes > 8 {
		t.Fatalf("%d probes", st.Probes)
	}
	// More reads of the dead die: no second event.
	for _, off := range offs {
		f.ReadAt(make([]byte, ps), off)
	}
	if n := len(fs.DieFailures()); n != 1 || calls.Load() > 1 {
		t.Fatalf("%d events, %d callbacks", n, calls.Load())
	}
}

// TestDetectorIgnoresRandomUncorrectablePages: every page of one die reads
// uncorrectable once (a burst of bad pages on a healthy die): the probes read
// their blocks fine, so no die is declared failed.
func TestDetectorIgnoresRandomUncorrectablePages(t *testing.T) {
	dev, fs := newMem(t, small(), Options{})
	defer fs.Close()
	data := randBytes(rand.New(rand.NewSource(14)), 60*4096)
	writeOn(t, fs, "f", 0, data)
	var offs []int64
	var target flash.DieAddr
	ino := fs.files["f"]
	for d, o := range pagesOnDie(fs, "f") {
		target, offs = d, o
		break
	}
	for _, e := range ino.m.Exts {
		z := fs.zones.All[e.Zone]
		for k := 0; k < e.N; k++ {
			if a := fs.l.DataPageAddr(z.ID, z.Dies, e.ZonePage+k); a.DieAddr() == target {
				dev.Faults().FailRead(a)
			}
		}
	}
	f, _ := fs.OpenFile("f")
	defer f.Close()
	ps := int64(fs.l.Geometry.PageSize)
	for _, off := range offs {
		f.ReadAt(make([]byte, ps), off)
	}
	if fd := fs.FailedDies(); len(fd) != 0 {
		t.Fatalf("a healthy die was declared failed: %v", fd)
	}
}

func TestDetectorReportedAndMarked(t *testing.T) {
	dev, fs := newMem(t, small(), Options{})
	data := randBytes(rand.New(rand.NewSource(15)), 60*4096)
	writeOn(t, fs, "f", 1, data)
	var target flash.DieAddr
	var offs []int64
	for d, o := range pagesOnDie(fs, "f") {
		target, offs = d, o
		break
	}
	dev.FailDie(target)
	f, _ := fs.OpenFile("f")
	f.ReadAt(make([]byte, 4096), offs[0])
	f.Close()
	evs := fs.DieFailures()
	if len(evs) != 1 || !evs[0].Reported || evs[0].Latency() != 0 {
		t.Fatalf("events %+v", evs)
	}
	other := flash.DieAddr{Channel: 0, Die: 1}
	if err := fs.MarkDieFailed(other); err != nil {
		t.Fatal(err)
	}
	if err := fs.MarkDieFailed(flash.DieAddr{Channel: 5}); err == nil {
		t.Fatal("out-of-range die accepted")
	}
	if len(fs.FailedDies()) != 2 || len(fs.DieFailures()) != 2 {
		t.Fatalf("failed dies %v, events %v", fs.FailedDies(), fs.DieFailures())
	}
	if err := fs.Close(); err != nil {
		t.Fatal(err)
	}
	// Reopen: both dies known failed from the journal; no new event.
	fs2, err := Open(dev, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer fs2.Close()
	if len(fs2.FailedDies()) != 2 {
		t.Fatalf("after reopen: failed dies %v", fs2.FailedDies())
	}
	f, _ = fs2.OpenFile("f")
	f.ReadAt(make([]byte, 4096), offs[0])
	f.Close()
	if len(fs2.DieFailures()) != 0 {
		t.Fatalf("events after reopen %v", fs2.DieFailures())
	}
}

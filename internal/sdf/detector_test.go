package sdf

import (
	"math/rand"
	"testing"

	"github.com/flashmend/flashmend/internal/flash"
)

func TestDetectorDeclaresDieFailed(t *testing.T) {
	dev, fs := newMem(t, small(), Options{})
	defer fs.Close()
	data := randBytes(rand.New(rand.NewSource(13)), 60*4096)
	w, err := fs.CreateOn("f", LifetimeNone, 0)
	if err != nil {
		t.Fatal(err)
	}
	w.Write(data)
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	// Every page of the file on one die reads uncorrectable once.
	ino := fs.files["f"]
	var target flash.DieAddr
	n := 0
	for _, e := range ino.m.exts {
		z := fs.zones[e.zone]
		for k := 0; k < e.n; k++ {
			a := fs.l.dataPageAddr(z.id, z.dies, e.zonePage+k)
			if n == 0 {
				target = a.DieAddr()
			}
			if a.DieAddr() == target {
				dev.Faults().FailRead(a)
				n++
			}
		}
	}
	if n < uncorrectableRunToFail {
		t.Fatalf("only %d pages on %s", n, target)
	}
	f, _ := fs.OpenFile("f")
	defer f.Close()
	ps := int64(fs.l.g.PageSize)
	for off := int64(0); off < int64(len(data)); off += ps {
		f.ReadAt(make([]byte, ps), off)
		if off == 0 && len(fs.FailedDies()) != 0 {
			t.Fatal("one uncorrectable page declared the die failed")
		}
	}
	if fd := fs.FailedDies(); len(fd) != 1 || fd[0] != target {
		t.Fatalf("failed dies %v, want [%s] after %d uncorrectable reads in a row", fd, target, n)
	}
	// Explicit report, and validation.
	if err := fs.MarkDieFailed(flash.DieAddr{Channel: 1, Die: 1}); err != nil {
		t.Fatal(err)
	}
	if err := fs.MarkDieFailed(flash.DieAddr{Channel: 5}); err == nil {
		t.Fatal("out-of-range die accepted")
	}
	if len(fs.FailedDies()) != 2 {
		t.Fatalf("failed dies %v", fs.FailedDies())
	}
}

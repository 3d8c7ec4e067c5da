package sdf

import (
	"errors"
	"io"
	"math/rand"
	"testing"

	"github.com/flashmend/flashmend/internal/base"
)

func TestBasicFileOps(t *testing.T) {
	dev, fs := newMem(t, small(), Options{})
	rng := rand.New(rand.NewSource(1))
	a := randBytes(rng, 100_000)
	writeFile(t, fs, "a", LifetimeShort, a)
	mustEqual(t, "a", readFile(t, fs, "a"), a)

	// Appends with syncs in between exercise padding and tail rewrites.
	f, err := fs.Create("wal", LifetimeShort)
	if err != nil {
		t.Fatal(err)
	}
	var want []byte
	for i := 0; i < 50; i++ {
		chunk := randBytes(rng, 1+rng.Intn(3000))
		want = append(want, chunk...)
		if _, err := f.Write(chunk); err != nil {
			t.Fatal(err)
		}
		if i%3 == 0 {
			if err := f.Sync(); err != nil {
				t.Fatal(err)
			}
		}
		got := make([]byte, len(want))
		if _, err := f.ReadAt(got, 0); err != nil {
			t.Fatal(err)
		}
		mustEqual(t, "wal while writing", got, want)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	mustEqual(t, "wal", readFile(t, fs, "wal"), want)

	if err := fs.Rename("wal", "wal2"); err != nil {
		t.Fatal(err)
	}
	if _, err := fs.Stat("wal"); !errors.Is(err, ErrNotExist) {
		t.Fatalf("stat of renamed file: %v", err)
	}
	if got := fs.List(); len(got) != 2 || got[0] != "a" || got[1] != "wal2" {
		t.Fatalf("list %v", got)
	}
	// Reads past the end.
	r, _ := fs.OpenFile("a")
	buf := make([]byte, 10)
	if n, err := r.ReadAt(buf, int64(len(a))-5); n != 5 || err != io.EOF {
		t.Fatalf("short read n=%d err=%v", n, err)
	}
	r.Close()
	if err := fs.Remove("a"); err != nil {
		t.Fatal(err)
	}
	if _, err := fs.OpenFile("a"); !errors.Is(err, ErrNotExist) {
		t.Fatalf("open removed: %v", err)
	}
	if _, err := fs.Create("", LifetimeNone); !base.IsInvalidArgument(err) {
		t.Fatalf("empty name: %v", err)
	}
	if err := fs.Close(); err != nil {
		t.Fatal(err)
	}
	// Reopen on the same device.
	fs2, err := Open(dev, Options{})
	if err != nil {
		t.Fatal(err)
	}
	mustEqual(t, "wal2 after reopen", readFile(t, fs2, "wal2"), want)
	if got := fs2.List(); len(got) != 1 {
		t.Fatalf("list after reopen %v", got)
	}
	t.Log(fs2.Stats())
	if err := fs2.Close(); err != nil {
		t.Fatal(err)
	}
}

func TestUseAfterClose(t *testing.T) {
	_, fs := newMem(t, small(), Options{})
	w, _ := fs.Create("w", LifetimeNone)
	w.Write(make([]byte, 10_000))
	r, _ := fs.OpenFile("w")
	if err := fs.Close(); err != nil {
		t.Fatal(err)
	}
	if err := fs.Close(); !errors.Is(err, ErrClosed) {
		t.Fatalf("second close: %v", err)
	}
	if _, err := w.Write([]byte("x")); !errors.Is(err, ErrClosed) {
		t.Fatalf("write after close: %v", err)
	}
	if _, err := r.ReadAt(make([]byte, 10), 0); !errors.Is(err, ErrClosed) {
		t.Fatalf("read after close: %v", err)
	}
	if _, err := fs.Create("x", LifetimeNone); !errors.Is(err, ErrClosed) {
		t.Fatalf("create after close: %v", err)
	}
	// Closing handles after the FS is harmless.
	w.Close()
	r.Close()
}

func TestReadOnlyOpenWritesNothing(t *testing.T) {
	dev, fs := newMem(t, small(), Options{})
	data := randBytes(rand.New(rand.NewSource(16)), 70_000)
	writeFile(t, fs, "a", LifetimeNone, data)
	fs.Close()
	before := dev.Stats().Total
	ro, err := Open(dev, Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	mustEqual(t, "a", readFile(t, ro, "a"), data)
	if _, err := ro.Create("b", LifetimeNone); !errors.Is(err, ErrReadOnly) {
		t.Fatalf("create: %v", err)
	}
	for _, err := range []error{ro.Remove("a"), ro.Rename("a", "b"), ro.RewriteRange("a", 0, []byte{1})} {
		if !errors.Is(err, ErrReadOnly) {
			t.Fatalf("mutation: %v", err)
		}
	}
	if _, err := ro.GC(); !errors.Is(err, ErrReadOnly) && err != nil {
		t.Fatalf("gc: %v", err)
	}
	if err := ro.Close(); err != nil {
		t.Fatal(err)
	}
	after := dev.Stats().Total
	if after.Programs != before.Programs || after.Erases != before.Erases {
		t.Fatalf("read-only open programmed %d and erased %d", after.Programs-before.Programs, after.Erases-before.Erases)
	}
	if _, err := Format(dev, Options{ReadOnly: true}); !base.IsInvalidArgument(err) {
		t.Fatalf("read-only format: %v", err)
	}
}

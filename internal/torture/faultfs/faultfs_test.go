package faultfs

import (
	"errors"
	"strings"
	"syscall"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
)

func TestReadAndWriteFaults(t *testing.T) {
	mem := vfs.NewMem()
	fs := New(mem)
	for _, d := range []string{"n1", "n2"} {
		if err := fs.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	w, err := fs.Create("n1/a.log", vfs.WriteCategoryUnspecified)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Write(make([]byte, 3*4096)); err != nil {
		t.Fatal(err)
	}
	match := func(p string) bool { return strings.HasPrefix(p, "n1/") }
	fs.Set(&Rule{Kind: WriteError, Match: match})
	if _, err := w.Write([]byte("x")); !errors.Is(err, syscall.EIO) || !errors.Is(err, ErrInjected) {
		t.Fatalf("write under a write rule: %v", err)
	}
	if _, err := fs.Create("n2/b.log", vfs.WriteCategoryUnspecified); err != nil {
		t.Fatalf("create of an unmatched path: %v", err)
	}
	fs.Set(&Rule{Kind: ReadError, Match: match, Off: 4096, Len: 4096})
	if _, err := w.Write([]byte("y")); err != nil {
		t.Fatalf("write under a read rule: %v", err)
	}
	r, err := fs.Open("n1/a.log")
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 100)
	if _, err := r.ReadAt(buf, 0); err != nil {
		t.Fatalf("read before the bad block: %v", err)
	}
	if _, err := r.ReadAt(buf, 4090); !errors.Is(err, syscall.EIO) {
		t.Fatalf("read overlapping the bad block: %v", err)
	}
	if _, err := r.ReadAt(buf, 8192); err != nil {
		t.Fatalf("read after the bad block: %v", err)
	}
	if fs.Injected() != 2 {
		t.Fatalf("injected %d, want 2", fs.Injected())
	}
	fs.Set(nil)
	if _, err := r.ReadAt(buf, 4096); err != nil {
		t.Fatalf("read after the rule was cleared: %v", err)
	}
}

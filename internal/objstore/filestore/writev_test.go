package filestore

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/flashmend/flashmend/internal/fsys"
)

// writeAt2 writes its two parts back to back at the offset on an operating
// system file (one pwritev on Linux) and declines a file of fsys.Mem,
// writing nothing.
func TestWriteAt2(t *testing.T) {
	path := filepath.Join(t.TempDir(), "f")
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	a, b := []byte("header+name"), bytes.Repeat([]byte("0123456789abcdef"), 5000)
	ok, err := writeAt2(f, a, b, 100)
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if ok {
		want := append(make([]byte, 100), append(a, b...)...)
		if !bytes.Equal(got, want) {
			t.Fatalf("file holds %d bytes, not the %d of zeros, a and b", len(got), len(want))
		}
	} else if len(got) != 0 {
		t.Fatalf("declined, yet wrote %d bytes", len(got))
	}

	m := fsys.NewMem()
	if err := m.Mkdir("/d", 0o755); err != nil {
		t.Fatal(err)
	}
	mf, err := m.OpenFile("/d/f", os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	if ok, err := writeAt2(mf, a, b, 0); ok || err != nil {
		t.Fatalf("a file in memory took a vectored write: %v %v", ok, err)
	}
}

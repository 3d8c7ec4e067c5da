package sdf

import (
	"bytes"
	"math/rand"
	"testing"

	"github.com/flashmend/flashmend/internal/flash"
	"github.com/flashmend/flashmend/internal/testseed"
)

// newMem returns a formatted FS on a fresh in-memory device of geometry g.
func newMem(t testing.TB, g flash.Geometry, opts Options) (*flash.Emulator, *FS) {
	t.Helper()
	dev, err := flash.NewMemory(g, flash.Options{Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	fs, err := Format(dev, opts)
	if err != nil {
		t.Fatal(err)
	}
	return dev, fs
}

func small() flash.Geometry { return flash.SmallGeometry() }

func randBytes(rng *rand.Rand, n int) []byte {
	b := make([]byte, n)
	rng.Read(b)
	return b
}

func writeFile(t testing.TB, fs *FS, name string, hint Lifetime, data []byte) {
	t.Helper()
	f, err := fs.Create(name, hint)
	writeAndClose(t, f, err, data)
}

func readFile(t testing.TB, fs *FS, name string) []byte {
	t.Helper()
	f, err := fs.OpenFile(name)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	buf := make([]byte, f.Size())
	if n, err := f.ReadAt(buf, 0); err != nil || n != len(buf) {
		t.Fatalf("read %s: n=%d err=%v", name, n, err)
	}
	return buf
}

func mustEqual(t testing.TB, what string, got, want []byte) {
	t.Helper()
	if !bytes.Equal(got, want) {
		i := 0
		for i < len(got) && i < len(want) && got[i] == want[i] {
			i++
		}
		t.Fatalf("%s: content differs at byte %d (len got %d, want %d)", what, i, len(got), len(want))
	}
}

// testSeed returns the seed of a randomized test: $SDF_SEED if set (to
// replay a failure), else the clock. The test logs it.
func testSeed(t testing.TB) int64 { return testseed.Seed(t, "SDF_SEED") }

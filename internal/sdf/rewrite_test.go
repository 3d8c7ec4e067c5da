package sdf

import (
	"math/rand"
	"testing"
)

// TestRewriteRangeRandom rewrites random unaligned ranges of a file, some
// while its writer still buffers the tail, and checks against a model
// (also across a reopen).
func TestRewriteRangeRandom(t *testing.T) {
	seed := testSeed(t)
	rng := rand.New(rand.NewSource(seed))
	dev, fs := newMem(t, small(), Options{})
	w, err := fs.Create("f", LifetimeMedium)
	if err != nil {
		t.Fatal(err)
	}
	var model []byte
	for step := 0; step < 150; step++ {
		switch {
		case rng.Intn(3) == 0 || len(model) == 0:
			b := randBytes(rng, 1+rng.Intn(20_000))
			if _, err := w.Write(b); err != nil {
				t.Fatal(err)
			}
			model = append(model, b...)
			if rng.Intn(2) == 0 {
				if err := w.Sync(); err != nil {
					t.Fatal(err)
				}
			}
		default:
			off := rng.Intn(len(model))
			n := 1 + rng.Intn(min(len(model)-off, 30_000))
			b := randBytes(rng, n)
			if err := fs.RewriteRange("f", int64(off), b); err != nil {
				t.Fatalf("step %d rewrite [%d,+%d) of %d: %v", step, off, n, len(model), err)
			}
			copy(model[off:], b)
		}
		if step%10 == 0 {
			got := make([]byte, len(model))
			if _, err := w.ReadAt(got, 0); err != nil {
				t.Fatal(err)
			}
			mustEqual(t, "while writing", got, model)
		}
	}
	if err := fs.RewriteRange("f", int64(len(model)-1), []byte{1, 2}); err == nil {
		t.Fatal("rewrite past the end accepted")
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	mustEqual(t, "after close", readFile(t, fs, "f"), model)
	fs.Close()
	fs, err = Open(dev, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer fs.Close()
	mustEqual(t, "after reopen", readFile(t, fs, "f"), model)
}

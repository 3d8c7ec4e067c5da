package engine

import (
	"fmt"
	"math/rand"
	"testing"

	"github.com/flashmend/flashmend/internal/base"
	"github.com/flashmend/flashmend/internal/testseed"
)

// TestCorruptBlocksAtRest damages several data blocks of a closed engine
// in one call (what the helix harness does to every replica at rest): each
// chosen key's block is damaged, distinct blocks are reported, a key far
// from all of them still reads, and bad requests are refused with nothing
// damaged.
func TestCorruptBlocksAtRest(t *testing.T) {
	seed := testseed.Seed(t, "FLASHMEND_TEST_SEED")
	rng := rand.New(rand.NewSource(seed))
	const n = 3000
	fs, sm, path, _ := compactedTable(t, n)
	if err := sm.Close(); err != nil {
		t.Fatal(err)
	}
	key := func(i int) []byte { return []byte(fmt.Sprintf("key-%05d", i)) }
	for name, call := range map[string]func() error{
		"lengths":  func() error { _, err := CorruptBlocksAtRest(fs, "sm", [][]byte{key(1)}, nil); return err },
		"fraction": func() error { _, err := CorruptBlocksAtRest(fs, "sm", [][]byte{key(1)}, []float64{1}); return err },
		// The first key is valid: a refusal must come before any damage.
		"absent": func() error {
			_, err := CorruptBlocksAtRest(fs, "sm", [][]byte{key(1), []byte("nope")}, []float64{0.5, 0.5})
			return err
		},
	} {
		if err := call(); !base.IsInvalidArgument(err) {
			t.Fatalf("%s: %v, want an invalid argument", name, err)
		}
	}
	if err := VerifySSTable(fs, path, SSTReaderOptions()); err != nil {
		t.Fatalf("a refused request damaged the table: %v", err)
	}
	// Keys spread out (every 500th, from a random start), so that they lie
	// in distinct blocks.
	start := rng.Intn(400)
	var keys [][]byte
	var fracs []float64
	for i := start; i < n-500; i += 500 {
		keys = append(keys, key(i))
		fracs = append(fracs, rng.Float64())
	}
	damage, err := CorruptBlocksAtRest(fs, "sm", keys, fracs)
	if err != nil {
		t.Fatal(err)
	}
	distinct := map[BlockDamage]bool{}
	for _, d := range damage {
		distinct[d] = true
	}
	if len(distinct) != len(keys) {
		t.Fatalf("%d keys, %d distinct blocks damaged: %v", len(keys), len(distinct), damage)
	}
	sm, err = Open(fs, "sm", 0, 4<<20, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer sm.Close()
	for _, k := range keys {
		if _, _, err := Get(sm.db, k); err == nil {
			t.Fatalf("%s reads back after its block was damaged", k)
		}
	}
	if v, found, err := Get(sm.db, key(start+250)); err != nil || !found || len(v) == 0 {
		t.Fatalf("%s, far from every damaged block: %q %v %v", key(start+250), v, found, err)
	}
}

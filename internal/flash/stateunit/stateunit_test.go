package stateunit

import (
	"bytes"
	"math/rand"
	"testing"

	"github.com/flashmend/flashmend/internal/base"
	"github.com/flashmend/flashmend/internal/testseed"
)

func record(rng *rand.Rand) []byte {
	rec := make([]byte, 1+rng.Intn(6*UnitPayload))
	rng.Read(rec)
	return rec
}

func three(b []byte) [][]byte {
	return [][]byte{append([]byte(nil), b...), append([]byte(nil), b...), append([]byte(nil), b...)}
}

// flip flips one random bit of unit i of c.
func flip(rng *rand.Rand, c []byte, i int) {
	c[i*UnitSize+rng.Intn(UnitSize)] ^= 1 << rng.Intn(8)
}

// TestAssembleMergesUnits damages random units of random copies, always
// sparing one copy of every unit: the record comes back whole, and the
// merge counts what the next save must rewrite.
func TestAssembleMergesUnits(t *testing.T) {
	rng := testseed.Rand(t, "STATEUNIT_SEED")
	for run := 0; run < 500; run++ {
		rec := record(rng)
		copies := three(Frame(uint64(run), rec))
		units := len(copies[0]) / UnitSize
		damagedUnits, damagedCopies := 0, map[int]bool{}
		for i := 0; i < units; i++ {
			spare := rng.Intn(Copies)
			hit := false
			for c := range copies {
				if c != spare && rng.Intn(3) == 0 {
					flip(rng, copies[c], i)
					hit, damagedCopies[c] = true, true
				}
			}
			if hit {
				damagedUnits++
			}
		}
		got, m, err := Assemble(copies)
		if err != nil || !bytes.Equal(got, rec) {
			t.Fatalf("run %d: %v, record differs %v", run, err, !bytes.Equal(got, rec))
		}
		if m.UnitsMerged != damagedUnits || m.DamagedCopies != len(damagedCopies) || m.UnitsVoted != 0 {
			t.Fatalf("run %d: %+v, want %d units merged, %d copies damaged", run, m, damagedUnits, len(damagedCopies))
		}
	}
}

// TestAssembleVotes: a unit damaged in all three copies at different bits
// is voted back; at the same bit in two copies it cannot be, and the
// previous record is used.
func TestAssembleVotes(t *testing.T) {
	rng := testseed.Rand(t, "STATEUNIT_SEED")
	rec := record(rng)
	copies := three(Frame(5, rec))
	for c := range copies {
		copies[c][40+c] ^= 0x10 // unit 0, a different byte in each copy
	}
	got, m, err := Assemble(copies)
	if err != nil || !bytes.Equal(got, rec) || m.UnitsVoted != 1 {
		t.Fatalf("voted: %v, merge %+v", err, m)
	}
	old := record(rng)
	prev := Frame(4, old)
	copies = three(Frame(5, rec))
	copies[0][40] ^= 1
	copies[1][40] ^= 1 // two copies agree on the damage: the vote keeps it
	copies[2] = prev   // the third still holds the previous save
	got, _, err = Assemble(copies)
	if err != nil || !bytes.Equal(got, old) {
		t.Fatalf("fallback to the previous record: %v, got the previous %v", err, bytes.Equal(got, old))
	}
}

// TestAssembleRefuses: a record no copy can give back is an error, never a
// guess; nothing at all is no record; a unit out of its place never counts.
func TestAssembleRefuses(t *testing.T) {
	rng := testseed.Rand(t, "STATEUNIT_SEED")
	long := make([]byte, 2*UnitPayload+1) // three units: the others verify
	rng.Read(long)
	copies := three(Frame(1, long))
	for c := range copies {
		copies[c][30] ^= 4 // the same bit of unit 0 everywhere
	}
	if got, _, err := Assemble(copies); !base.IsCorruption(err) || got != nil {
		t.Fatalf("unit lost everywhere: %v, %d bytes", err, len(got))
	}
	if got, _, err := Assemble([][]byte{nil, {}, make([]byte, 10)}); got != nil || err != nil {
		t.Fatalf("no units: %d bytes, %v", len(got), err)
	}
	rec := make([]byte, 3*UnitPayload)
	rng.Read(rec)
	f := Frame(2, rec)
	swapped := append(append(append([]byte(nil), f[UnitSize:2*UnitSize]...), f[:UnitSize]...), f[2*UnitSize:]...)
	if got, _, err := Assemble([][]byte{swapped, swapped, swapped}); err == nil || got != nil {
		t.Fatalf("units out of place assembled %d bytes", len(got))
	}
}

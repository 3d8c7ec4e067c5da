package direct

import (
	"math/rand"
	"testing"

	"github.com/flashmend/flashmend/internal/base"
)

func TestSumsDetectEveryBitFlipAndMisdirection(t *testing.T) {
	seed := int64(7)
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewSource(seed))
	for _, n := range []int{0, 1, 511, 512, 513, 4096, ChunkSize - 1, ChunkSize} {
		data := make([]byte, n)
		rng.Read(data)
		id := ChunkID{Object: 1, Version: 2, Shard: 3, Index: 4}
		sums := Sums(id, data)
		if len(sums) != SectorCount(n) {
			t.Fatalf("n=%d: %d sums", n, len(sums))
		}
		if err := Verify(id, data, sums); err != nil {
			t.Fatalf("n=%d: clean data fails: %v", n, err)
		}
		for _, other := range []ChunkID{{0, 2, 3, 4}, {1, 3, 3, 4}, {1, 2, 0, 4}, {1, 2, 3, 5}} {
			if n > 0 && Verify(other, data, sums) == nil {
				t.Fatalf("n=%d: chunk of %s verifies as %s", n, id, other)
			}
		}
		for trial := 0; trial < 50 && n > 0; trial++ {
			bit := rng.Intn(n * 8)
			data[bit/8] ^= 1 << (bit % 8)
			bad := BadSectors(id, data, sums)
			if len(bad) != 1 || bad[0] != bit/8/SectorSize {
				t.Fatalf("n=%d bit %d: bad sectors %v", n, bit, bad)
			}
			if err := Verify(id, data, sums); !base.IsCorruption(err) {
				t.Fatalf("flip not reported as corruption: %v", err)
			}
			data[bit/8] ^= 1 << (bit % 8)
		}
	}
}

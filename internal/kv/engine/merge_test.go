package engine

import (
	"bytes"
	"encoding/binary"
	"math/rand"
	"testing"

	"github.com/cockroachdb/pebble/v2/sstable/block"

	"github.com/flashmend/flashmend/internal/base"
	"github.com/flashmend/flashmend/internal/testseed"
)

// testBlock returns a block of n random data bytes with a valid trailer
// (no compression, masked CRC32C, as Pebble writes it).
func testBlock(rng *rand.Rand, n int) (block.Handle, []byte) {
	b := make([]byte, n+block.TrailerLen)
	rng.Read(b[:n])
	b[n] = 0
	c := base.CRC32C(b[:n+1])
	binary.LittleEndian.PutUint32(b[n+1:], (c>>15|c<<17)+0xa282ead8)
	return block.Handle{Offset: 4096, Length: uint64(n)}, b
}

func flipped(b []byte, at int, bit uint) []byte {
	c := bytes.Clone(b)
	c[at] ^= 1 << bit
	return c
}

func TestMergeBlock(t *testing.T) {
	seed := testseed.Seed(t, "FLASHMEND_TEST_SEED")
	rng := rand.New(rand.NewSource(seed))
	for round := 0; round < 200; round++ {
		h, orig := testBlock(rng, 1000+rng.Intn(4000))
		n := len(orig)
		// Distinct damaged bytes for each copy.
		at := rng.Perm(n)[:6]
		own := flipped(orig, at[0], uint(rng.Intn(8)))
		a := flipped(orig, at[1], uint(rng.Intn(8)))
		b := flipped(flipped(orig, at[2], uint(rng.Intn(8))), at[3], uint(rng.Intn(8)))
		if !blockChecksumOK(orig, h) || blockChecksumOK(own, h) {
			t.Fatalf("seed %d: test block checksums wrong", seed)
		}
		check := func(name string, others [][]byte, wantHow string) {
			t.Helper()
			got, how, ok := MergeBlock(h, own, others)
			if wantHow == "" {
				if ok {
					t.Fatalf("seed %d round %d %s: merged (%s), want no merge", seed, round, name, how)
				}
				return
			}
			if !ok || how != wantHow || !bytes.Equal(got, orig) {
				t.Fatalf("seed %d round %d %s: ok=%t how=%q equal=%t, want %s", seed, round, name, ok, how, bytes.Equal(got, orig), wantHow)
			}
		}
		check("intact peer", [][]byte{a, orig}, "copy")
		check("three damaged copies", [][]byte{a, b}, "vote")
		check("two damaged copies", [][]byte{a}, "combination")
		check("no peer", nil, "")
		check("same byte damaged on every copy", [][]byte{bytes.Clone(own), bytes.Clone(own)}, "")
		// A valid block of another table (same size, other content) is
		// never taken, however it verifies.
		_, other := testBlock(rng, int(h.Length))
		check("another table's block", [][]byte{other}, "")
		// The damage is in the replica's own trailer: an intact peer copy
		// with the same data is taken.
		ownTrailer := flipped(orig, n-1-rng.Intn(4), uint(rng.Intn(8)))
		if got, how, ok := MergeBlock(h, ownTrailer, [][]byte{orig}); !ok || how != "copy" || !bytes.Equal(got, orig) {
			t.Fatalf("seed %d round %d: trailer damage not merged: %t %q", seed, round, ok, how)
		}
		// A peer's block that differs at the very byte the replica lost
		// (another table's: other row numbering), with its own valid
		// checksum, neither is this block nor gives the lost byte back.
		renum := bytes.Clone(orig)
		for renum[at[0]] == orig[at[0]] || renum[at[0]] == own[at[0]] {
			renum[at[0]] = byte(rng.Intn(256))
		}
		c := base.CRC32C(renum[:int(h.Length)+1])
		binary.LittleEndian.PutUint32(renum[int(h.Length)+1:], (c>>15|c<<17)+0xa282ead8)
		if at[0] < int(h.Length)+1 {
			check("a block differing at the lost byte with its own checksum", [][]byte{renum}, "")
		}
	}
}

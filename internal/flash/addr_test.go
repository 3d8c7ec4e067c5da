package flash

import (
	"math/rand"
	"testing"
)

// TestFlatRoundTrip: PageOfFlat inverts PageAddr.Flat over whole small
// geometries and random pages of a large one, and refuses indexes outside
// the device.
func TestFlatRoundTrip(t *testing.T) {
	small := Geometry{Channels: 3, DiesPerChannel: 2, BlocksPerDie: 5, PagesPerBlock: 7, PageSize: 512}
	n := int64(small.Dies() * small.BlocksPerDie * small.PagesPerBlock)
	for i := int64(0); i < n; i++ {
		a, ok := small.PageOfFlat(i)
		if !ok || a.Flat(small) != i || !small.Contains(a) {
			t.Fatalf("flat %d: %v %v (back to %d)", i, a, ok, a.Flat(small))
		}
	}
	for _, i := range []int64{-1, n} {
		if _, ok := small.PageOfFlat(i); ok {
			t.Fatalf("flat %d of %d pages accepted", i, n)
		}
	}
	big := Geometry{Channels: 16, DiesPerChannel: 8, BlocksPerDie: 4096, PagesPerBlock: 1024, PageSize: 16384, OOBSize: 1024}
	rng := rand.New(rand.NewSource(1))
	for k := 0; k < 1000; k++ {
		a := PageAddr{rng.Intn(big.Channels), rng.Intn(big.DiesPerChannel), rng.Intn(big.BlocksPerDie), rng.Intn(big.PagesPerBlock)}
		if b, ok := big.PageOfFlat(a.Flat(big)); !ok || b != a {
			t.Fatalf("%v -> %d -> %v %v", a, a.Flat(big), b, ok)
		}
	}
}

package objstore

import (
	"errors"
	"fmt"
	"testing"

	"github.com/flashmend/flashmend/internal/base"
)

// TestSDFStoreFillsWithShards: a node's emulated flash (the `flashmend dev`
// geometry, 256 MiB) takes EC shard files (16 KiB: a 64 KiB chunk over k=4)
// until its data zones are full, not until its metadata zones are: the file
// table of 16,000 files goes to a checkpoint body in data zones. Before
// that the device stopped at about 5,700 files with "fewer than 3 usable
// metadata zones" (a third of a 1 GiB device of 64 KiB chunks).
// Every chunk reads back after a reopen.
func TestSDFStoreFillsWithShards(t *testing.T) {
	dir := t.TempDir()
	g := DevGeometry()
	g.BlocksPerDie = 64
	// PowerUnsafe: no power is cut here, and the device's power-safe
	// fsyncs (several per put) made filling it minutes long.
	s, err := OpenSDFStore(dir, SDFStoreOptions{Geometry: g, Seed: 1, PowerUnsafe: true})
	if err != nil {
		t.Fatal(err)
	}
	chunk := func(i int) []byte {
		b := make([]byte, 16<<10)
		for k := 0; k < len(b); k += 4096 {
			b[k], b[k+1] = byte(i), byte(i>>8)
		}
		return b
	}
	name := func(i int) string { return fmt.Sprintf("objects/o%06d/chunk-%04d.ec1", i/16, i%16) }
	n := 0
	for ; ; n++ {
		if err := s.Put(name(n), chunk(n)); err != nil {
			if !errors.Is(err, base.ErrNoSpace) {
				t.Fatalf("put %d: %v", n, err)
			}
			break
		}
	}
	u, err := s.Usage()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%d shards of 16 KiB (%d MiB) on a device of %d MiB data capacity", n, n/64, int64(u.CapacityBytes)>>20)
	if int64(n)*16<<10 < int64(u.CapacityBytes)*9/10 {
		t.Fatalf("device full after %d MiB of shards, capacity %d MiB", n/64, int64(u.CapacityBytes)>>20)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s, err = OpenSDFStore(dir, SDFStoreOptions{Geometry: g, Seed: 1, PowerUnsafe: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for i := 0; i < n; i += 197 {
		got, err := s.Get(name(i))
		if err != nil {
			t.Fatalf("get %s: %v", name(i), err)
		}
		if string(got) != string(chunk(i)) {
			t.Fatalf("%s reads back different bytes", name(i))
		}
	}
}

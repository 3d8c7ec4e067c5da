package objstore

import (
	"bytes"
	"fmt"
	"math/rand"
	"testing"

	"github.com/flashmend/flashmend/internal/flash"
)

// TestMetaFilesSurviveADieFailure: on an SDF store (through the node's
// FaultStore), the three copies of every metadata file are placed on
// different channels (CopyPlacer), so whichever single die fails, every
// metadata file still reads back whole, and the read rewrites the copy the
// die took. The fill interleaves the metadata writes with other files of a
// few pages, as a node's chunk writes do.
func TestMetaFilesSurviveADieFailure(t *testing.T) {
	g := flash.Geometry{Channels: 4, DiesPerChannel: 2, BlocksPerDie: 32, PagesPerBlock: 16, PageSize: 4096, OOBSize: 128}
	const seed = 17
	t.Logf("seed %d", seed)
	for die := 0; die < g.Dies(); die++ {
		t.Run(fmt.Sprintf("die%d", die), func(t *testing.T) {
			// PowerUnsafe: no power is cut here (the device's
			// power-safe fsyncs only made it slower).
			s, err := OpenSDFStore(t.TempDir(), SDFStoreOptions{Geometry: g, Seed: seed, PowerUnsafe: true})
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			fs := NewFaultStore(s, seed)
			m := NewMetaFiles(fs)
			rng := rand.New(rand.NewSource(seed))
			want := map[string][]byte{}
			for i := 0; i < 40; i++ {
				name := fmt.Sprintf("i/%016x.%d/%d", rng.Uint64(), i, rng.Intn(6))
				want[name] = []byte(fmt.Sprintf("record %d %x", i, rng.Uint64()))
				if err := m.Write(name, want[name]); err != nil {
					t.Fatal(err)
				}
				other := make([]byte, 1+rng.Intn(3*g.PageSize))
				rng.Read(other)
				if err := fs.Put(fmt.Sprintf("d/%04d", i), other); err != nil {
					t.Fatal(err)
				}
			}
			if err := s.FailDie(die); err != nil {
				t.Fatal(err)
			}
			repaired := 0
			for name, payload := range want {
				res, err := m.Read(name)
				if err != nil {
					t.Fatalf("%s after die %d failed: %v", name, die, err)
				}
				if !bytes.Equal(res.Payload, payload) {
					t.Fatalf("%s after die %d failed: %q, want %q", name, die, res.Payload, payload)
				}
				repaired += res.Repaired
			}
			// The rewritten copies read back without repair.
			for name := range want {
				if res, err := m.Read(name); err != nil || res.Repaired != 0 {
					t.Fatalf("%s read again: %d repaired, %v", name, res.Repaired, err)
				}
			}
			t.Logf("die %d: %d copies rewritten", die, repaired)
		})
	}
}

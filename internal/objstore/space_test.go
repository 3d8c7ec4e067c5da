package objstore

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/flashmend/flashmend/internal/base"
	"github.com/flashmend/flashmend/internal/direct"
	"github.com/flashmend/flashmend/internal/flash"
	"github.com/flashmend/flashmend/internal/objstore/sumsrec"
)

// fillChunks writes new chunks of object obj until the store refuses one,
// and returns how many it took and the refusal.
func fillChunks(t *testing.T, cs *ChunkStore, obj uint64) (int, error) {
	t.Helper()
	data := make([]byte, direct.ChunkSize)
	for i := 0; i < 100000; i++ {
		id := direct.ChunkID{Object: obj, Version: 1, Index: uint32(i)}
		data[0] = byte(i)
		if err := cs.WriteChunk(id, data, direct.Sums(id, data), false); err != nil {
			return i, err
		}
	}
	t.Fatal("the store never filled")
	return 0, nil
}

// spaceStores are the two stores that report their space: a memory store
// of 4 MiB and an SDF store of spaceGeometry (closed with the test).
func spaceStores(t *testing.T) map[string]Store {
	t.Helper()
	sdf, err := OpenSDFStore(filepath.Join(t.TempDir(), "sdf"), SDFStoreOptions{Geometry: spaceGeometry(), Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sdf.Close() })
	mem := NewMemStore()
	mem.SetCapacity(4 * base.MiB)
	return map[string]Store{"mem": mem, "sdf": sdf}
}

// TestRepairReserve: on each store that reports its space, new writes are
// refused with a no-space error while the reserve is still free, and repairs
// (a corrupt chunk rewritten, a missing one re-created) use it.
func TestRepairReserve(t *testing.T) {
	for name, st := range spaceStores(t) {
		t.Run(name, func(t *testing.T) {
			cs := NewChunkStore(st)
			if err := cs.SetRepairReserve(0.6); !base.IsInvalidArgument(err) {
				t.Fatalf("reserve of 60%% accepted: %v", err)
			}
			if err := cs.SetRepairReserve(0.1); err != nil {
				t.Fatal(err)
			}
			n, err := fillChunks(t, cs, 1)
			if !base.IsNoSpace(err) || !strings.Contains(err.Error(), "kept for repairs") {
				t.Fatalf("after %d chunks: %v, want a refusal that keeps the repair reserve", n, err)
			}
			capacity, free, _ := st.(SpaceReporter).Space()
			if free < capacity/10-direct.ChunkSize-sumsrec.Size {
				t.Fatalf("refused with %s free of %s: the reserve was not kept", free, capacity)
			}
			if cs.Stats().RefusedFull != 1 {
				t.Fatalf("refusals counted: %d", cs.Stats().RefusedFull)
			}
			// Repairs: half of the chunks lose a sector, a few are deleted.
			data := make([]byte, direct.ChunkSize)
			for i := 0; i < n; i += 2 {
				id := direct.ChunkID{Object: 1, Version: 1, Index: uint32(i)}
				if i%10 == 0 {
					if err := st.Delete(DataName(id)); err != nil {
						t.Fatal(err)
					}
				} else if err := st.FlipBits(DataName(id), 8*600, 3); err != nil {
					t.Fatal(err)
				}
			}
			for i := 0; i < n; i += 2 {
				id := direct.ChunkID{Object: 1, Version: 1, Index: uint32(i)}
				data[0] = byte(i)
				if err := cs.WriteChunk(id, data, direct.Sums(id, data), true); err != nil {
					t.Fatalf("repair of %s in the reserve: %v", id, err)
				}
				r, err := cs.ReadChunk(id)
				if err != nil || r.Corrupt {
					t.Fatalf("chunk %s after its repair: %v %v", id, r, err)
				}
			}
			if st := cs.Stats(); st.RepairFailed != 0 || st.Repaired != int64((n+1)/2) {
				t.Fatalf("stats %+v", st)
			}
		})
	}
}

// TestRepairOnFullDevice: with no reserve the device fills up and a repair
// that needs room fails with a no-space error and is counted; once room is
// made it succeeds.
func TestRepairOnFullDevice(t *testing.T) {
	for name, st := range spaceStores(t) {
		t.Run(name, func(t *testing.T) {
			cs := NewChunkStore(st)
			n, err := fillChunks(t, cs, 2)
			if !base.IsNoSpace(err) || n < 10 {
				t.Fatalf("after %d chunks: %v, want the device full", n, err)
			}
			// Whatever room the last chunk left, fill it with small files.
			for i := 0; ; i++ {
				if err := st.Put(fmt.Sprintf("filler/%d", i), make([]byte, 4096)); err != nil {
					if !base.IsNoSpace(err) {
						t.Fatal(err)
					}
					break
				}
			}
			id := direct.ChunkID{Object: 2, Version: 1, Index: 3}
			if err := st.Delete(DataName(id)); err != nil {
				t.Fatal(err)
			}
			// The deleted chunk's room goes to a filler (as another
			// writer would take it).
			for i := 0; ; i++ {
				if err := st.Put(fmt.Sprintf("filler2/%d", i), make([]byte, 4096)); err != nil {
					break
				}
			}
			data := make([]byte, direct.ChunkSize)
			data[0] = 3
			err = cs.WriteChunk(id, data, direct.Sums(id, data), true)
			if !base.IsNoSpace(err) {
				t.Fatalf("repair on a full device: %v, want a no-space error", err)
			}
			if got := cs.Stats().RepairFailed; got != 1 {
				t.Fatalf("failed repairs counted: %d", got)
			}
			names, _ := st.List("filler")
			for _, name := range names {
				if err := st.Delete(name); err != nil {
					t.Fatal(err)
				}
			}
			if err := cs.WriteChunk(id, data, direct.Sums(id, data), true); err != nil {
				t.Fatalf("repair once room was made: %v", err)
			}
			if r, err := cs.ReadChunk(id); err != nil || r.Corrupt {
				t.Fatalf("chunk after its repair: %v %v", r, err)
			}
		})
	}
}

// spaceGeometry is an 8 MiB emulated device: small enough to fill in a test.
func spaceGeometry() flash.Geometry {
	return flash.Geometry{Channels: 4, DiesPerChannel: 2, BlocksPerDie: 16, PagesPerBlock: 16, PageSize: 4096, OOBSize: 128}
}

// TestSharedHeadroomKeptForKV: found by the crash-point sweep on 128 MiB
// devices, where object writes filled the device to its repair reserve and
// the KV replicas sharing it fail-stopped on "no space" at their next raft
// log sync (the shard lost quorum). With a shared headroom new chunk
// writes stop while reserve + headroom is still free, the refusal says
// why, and the space kept follows the headroom function: when it shrinks
// (the KV files grew into it) writes go on, and repairs still use the
// reserve.
func TestSharedHeadroomKeptForKV(t *testing.T) {
	for name, st := range spaceStores(t) {
		t.Run(name, func(t *testing.T) {
			cs := NewChunkStore(st)
			if err := cs.SetRepairReserve(0.05); err != nil {
				t.Fatal(err)
			}
			capacity, _, _ := st.(SpaceReporter).Space()
			headroom := capacity / 4
			cs.SetSharedHeadroom(func() base.Bytes { return headroom })
			n, err := fillChunks(t, cs, 1)
			if !base.IsNoSpace(err) || !strings.Contains(err.Error(), "for the KV replicas") {
				t.Fatalf("after %d chunks: %v, want a refusal that keeps the KV headroom", n, err)
			}
			_, free, _ := st.(SpaceReporter).Space()
			if keep := capacity/20 + headroom; free < keep-direct.ChunkSize-sumsrec.Size {
				t.Fatalf("refused with %s free of %s: %s (reserve + headroom) not kept", free, capacity, keep)
			}
			// The KV files took half of their headroom: more object
			// writes fit, and again stop at reserve + what is left.
			headroom /= 2
			m, err := fillChunks(t, cs, 2)
			if !base.IsNoSpace(err) || m == 0 {
				t.Fatalf("after the headroom shrank: %d more chunks, %v", m, err)
			}
			_, free, _ = st.(SpaceReporter).Space()
			if keep := capacity/20 + headroom; free < keep-direct.ChunkSize-sumsrec.Size {
				t.Fatalf("refused with %s free of %s: %s not kept", free, capacity, keep)
			}
			// A repair may still use the space kept.
			id := direct.ChunkID{Object: 1, Version: 1, Index: 0}
			if err := st.Delete(DataName(id)); err != nil {
				t.Fatal(err)
			}
			data := make([]byte, direct.ChunkSize)
			if err := cs.WriteChunk(id, data, direct.Sums(id, data), true); err != nil {
				t.Fatalf("repair with the headroom kept: %v", err)
			}
			// No headroom function: the reserve alone.
			cs.SetSharedHeadroom(nil)
			if k, err := fillChunks(t, cs, 3); !base.IsNoSpace(err) || strings.Contains(err.Error(), "for the KV replicas") || k == 0 {
				t.Fatalf("headroom removed: %d chunks, %v", k, err)
			}
		})
	}
}

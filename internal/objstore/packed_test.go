package objstore

import (
	"bytes"
	"math/rand"
	"sync"
	"testing"

	"github.com/flashmend/flashmend/internal/base"
	"github.com/flashmend/flashmend/internal/direct"
	"github.com/flashmend/flashmend/internal/flash"
	"github.com/flashmend/flashmend/internal/objstore/sumsrec"
)

// smallGeometry is a 32 MiB emulated device for tests.
func smallGeometry() flash.Geometry {
	return flash.Geometry{Channels: 4, DiesPerChannel: 2, BlocksPerDie: 16, PagesPerBlock: 64, PageSize: 4096, OOBSize: 128}
}

func openSmallSDF(t *testing.T) *SDFStore {
	t.Helper()
	// PowerUnsafe: no power is cut here, and the device's power-safe
	// fsyncs (several per put) made these tests minutes long.
	s, err := OpenSDFStore(t.TempDir(), SDFStoreOptions{Geometry: smallGeometry(), PowerUnsafe: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func writeBlob(t *testing.T, cs *ChunkStore, rng *rand.Rand, object uint64, n int) map[direct.ChunkID][]byte {
	t.Helper()
	out := map[direct.ChunkID][]byte{}
	for i := 0; i < n; i++ {
		data := make([]byte, direct.ChunkSize-rng.Intn(2)*1000)
		rng.Read(data)
		id := direct.ChunkID{Object: object, Version: 3, Index: uint32(i)}
		if err := cs.WriteChunk(id, data, direct.Sums(id, data), false); err != nil {
			t.Fatal(err)
		}
		out[id] = data
	}
	return out
}

func checkAll(t *testing.T, cs *ChunkStore, chunks map[direct.ChunkID][]byte) {
	t.Helper()
	for id, data := range chunks {
		r, err := cs.ReadChunk(id)
		if err != nil || r.Corrupt || !bytes.Equal(r.Data, data) {
			t.Fatalf("%s: %s %v", id, r, err)
		}
	}
}

// A corrupt record makes its chunk (and only it) count as corrupt, and the
// repair rewrites it, on every store kind.
func TestPackedCorruptRecordRepaired(t *testing.T) {
	stores := map[string]Store{"mem": NewMemStore(), "sdf": openSmallSDF(t)}
	for name, st := range stores {
		t.Run(name, func(t *testing.T) {
			rng := rand.New(rand.NewSource(1))
			cs := NewChunkStore(st)
			chunks := writeBlob(t, cs, rng, 7, 17) // files of 7, 7 and 3 records
			if got, _ := st.List("k/"); len(got) != 3 {
				t.Fatalf("sums files %v, want 3", got)
			}
			checkAll(t, cs, chunks)
			for _, idx := range []uint32{0, 9, 16} {
				id := direct.ChunkID{Object: 7, Version: 3, Index: idx}
				if err := st.FlipBits(SumsName(id), 8*SumsOffset(id)+8*100+3, 1); err != nil {
					t.Fatal(err)
				}
				r, err := cs.ReadChunk(id)
				if err != nil || !r.Corrupt || r.Sums != nil || !bytes.Equal(r.Data, chunks[id]) {
					t.Fatalf("%s: damaged record not reported: %s %v", id, r, err)
				}
				for other := range chunks {
					if other == id {
						continue
					}
					if r, err := cs.ReadChunk(other); err != nil || r.Corrupt {
						t.Fatalf("%s: damage to %s's record spread: %s %v", other, id, r, err)
					}
				}
				if err := cs.WriteChunk(id, chunks[id], direct.Sums(id, chunks[id]), true); err != nil {
					t.Fatal(err)
				}
				checkAll(t, cs, chunks)
			}
			if st := cs.Stats(); st.Repaired != 3 || st.Persistent != 3 {
				t.Fatalf("stats %s", st)
			}
		})
	}
}

// On SDF a chunk repair reprograms only the damaged sectors of the chunk's
// data file and, inside its sums file, only its record's range: neither
// file is written anew.
func TestPackedRepairRewritesOnlyItsRecord(t *testing.T) {
	st := openSmallSDF(t)
	cs := NewChunkStore(NewFaultStore(st, 1)) // as on a node
	rng := rand.New(rand.NewSource(2))
	chunks := writeBlob(t, cs, rng, 8, 7)
	id := direct.ChunkID{Object: 8, Version: 3, Index: 4}
	before, err := st.Get(SumsName(id))
	if err != nil {
		t.Fatal(err)
	}
	if err := cs.Corrupt(id, 10, 3); err != nil {
		t.Fatal(err)
	}
	if r, _ := cs.ReadChunk(id); !r.Corrupt || r.Sums == nil {
		t.Fatalf("data damage not reported: %s", r)
	}
	s0 := st.FS().Stats()
	if err := cs.WriteChunk(id, chunks[id], direct.Sums(id, chunks[id]), true); err != nil {
		t.Fatal(err)
	}
	s1 := st.FS().Stats()
	// The damaged sector and the record are rewritten in place (patchChunk,
	// writeRecord); nothing is appended (no new chunk or sums file).
	if d := s1.RewriteBytes - s0.RewriteBytes; d != direct.SectorSize+sumsrec.Size {
		t.Fatalf("repair rewrote %d bytes in place, want one sector and one record (%d)", d, direct.SectorSize+sumsrec.Size)
	}
	if d := s1.UserBytes - s0.UserBytes; d != 0 {
		t.Fatalf("repair appended %d bytes, want none", d)
	}
	after, err := st.Get(SumsName(id))
	if err != nil || !bytes.Equal(before, after) {
		t.Fatalf("sums file changed by a repair with the same sums: %v", err)
	}
	checkAll(t, cs, chunks)
}

// Chunks of one blob written concurrently and out of order share sums files
// without losing records, and transient read flips during the
// read-modify-write are not written back.
func TestPackedConcurrentOutOfOrder(t *testing.T) {
	const seed = 3
	t.Logf("seed %d", seed)
	for _, name := range []string{"mem", "sdf"} {
		t.Run(name, func(t *testing.T) {
			var inner Store = NewMemStore()
			if name == "sdf" {
				inner = openSmallSDF(t)
			}
			// Hide the stores' range reads and writes so that every record
			// write takes the whole-file read-modify-write path.
			fault := NewFaultStore(wholeFileStore{inner}, seed)
			if err := fault.SetUBER(1e-5, false); err != nil {
				t.Fatal(err)
			}
			cs := NewChunkStore(fault)
			rng := rand.New(rand.NewSource(seed))
			const n = 40
			data := make([][]byte, n)
			for i := range data {
				data[i] = make([]byte, 1+rng.Intn(direct.ChunkSize))
				rng.Read(data[i])
			}
			order := rng.Perm(n)
			var wg sync.WaitGroup
			errs := make(chan error, n)
			for w := 0; w < 4; w++ {
				wg.Add(1)
				go func(w int) {
					defer wg.Done()
					for k := w; k < n; k += 4 {
						i := order[k]
						id := direct.ChunkID{Object: 5, Version: 9, Index: uint32(i)}
						errs <- cs.WriteChunk(id, data[i], direct.Sums(id, data[i]), false)
					}
				}(w)
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				if err != nil {
					t.Fatal(err)
				}
			}
			if fault.Flips() == 0 {
				t.Fatal("no flip injected: the test does not exercise the re-read")
			}
			t.Logf("%d flips injected on reads of sums files", fault.Flips())
			fault.SetUBER(0, false)
			for i := range data {
				id := direct.ChunkID{Object: 5, Version: 9, Index: uint32(i)}
				r, err := cs.ReadChunk(id)
				if err != nil || r.Corrupt || !bytes.Equal(r.Data, data[i]) {
					t.Fatalf("%s: %s %v", id, r, err)
				}
			}
		})
	}
}

// The capacity of a small SDF store filled with REP replicas of the size
// mix: the sums records take exactly one page per seven chunks of every
// blob (the format's bound), and the layers add up to the raw bytes.
func TestPackedCapacity(t *testing.T) {
	const seed = 4
	t.Logf("seed %d", seed)
	st := openSmallSDF(t)
	cs := NewChunkStore(st)
	blobs, err := FillREP(cs, rand.New(rand.NewSource(seed)), CapacityMix, 0.8)
	if err != nil {
		t.Fatal(err)
	}
	c, err := st.Capacity()
	if err != nil {
		t.Fatal(err)
	}
	t.Log(c)
	ps := int64(smallGeometry().PageSize)
	var sumsPages, chunks int64
	for _, n := range blobs {
		sumsPages += int64((n + sumsrec.PerFile - 1) / sumsrec.PerFile)
		chunks += int64(n)
	}
	if int64(c.SumsRecords) != sumsPages*ps || int64(c.SumsFiles) != sumsPages || c.Chunks != int(chunks) || c.Blobs != len(blobs) {
		t.Fatalf("sums %d B in %d files for %d blobs / %d chunks, format says %d pages", c.SumsRecords, c.SumsFiles, len(blobs), chunks, sumsPages)
	}
	// One page per chunk before packing; now at most 1/7 of that plus one
	// partial file per blob.
	if sumsPages > chunks/sumsrec.PerFile+int64(len(blobs)) {
		t.Fatalf("sums pages %d above the bound", sumsPages)
	}
	if sum := c.Live() + c.Free + c.SDFMeta + c.P2L + c.Bad; sum != c.Raw || c.Other != 0 {
		t.Fatalf("layers add up to %s of %s raw (other %s)", sum, c.Raw, c.Other)
	}
	if c.StoredFraction() < 0.5 || c.Free < 0 {
		t.Fatalf("filled only %.3f", c.StoredFraction())
	}
}

// wholeFileStore exposes only the Store interface of a store, hiding its
// RangeReader and RangeWriter.
type wholeFileStore struct{ Store }

// A chunk read and a record rewrite touch only that chunk's record in the
// shared sums file: with persistent injection at a high rate, the other
// records' stored bytes never change.
func TestRecordAccessTouchesOnlyItsRecord(t *testing.T) {
	const seed = 11
	t.Logf("seed %d", seed)
	for _, name := range []string{"mem", "sdf"} {
		t.Run(name, func(t *testing.T) {
			var inner Store = NewMemStore()
			if name == "sdf" {
				inner = openSmallSDF(t)
			}
			fault := NewFaultStore(inner, seed)
			cs := NewChunkStore(fault)
			rng := rand.New(rand.NewSource(seed))
			ids := make([]direct.ChunkID, sumsrec.PerFile)
			for i := range ids {
				ids[i] = direct.ChunkID{Object: 7, Version: 1, Index: uint32(i)}
				data := make([]byte, direct.ChunkSize)
				rng.Read(data)
				if err := cs.WriteChunk(ids[i], data, direct.Sums(ids[i], data), false); err != nil {
					t.Fatal(err)
				}
			}
			before, err := inner.Get(SumsName(ids[0]))
			if err != nil {
				t.Fatal(err)
			}
			if err := fault.SetUBER(1e-3, true); err != nil {
				t.Fatal(err)
			}
			for i := 0; i < 50; i++ {
				if _, err := cs.ReadChunk(ids[3]); err != nil && !base.IsCorruption(err) {
					t.Fatal(err)
				}
			}
			if fault.Flips() == 0 {
				t.Fatal("no flip injected")
			}
			after, err := inner.Get(SumsName(ids[0]))
			if err != nil {
				t.Fatal(err)
			}
			lo, hi := SumsOffset(ids[3]), SumsOffset(ids[3])+sumsrec.Size
			if !bytes.Equal(before[:lo], after[:lo]) || !bytes.Equal(before[hi:], after[hi:]) {
				t.Fatal("reading one chunk changed other chunks' records")
			}
		})
	}
}

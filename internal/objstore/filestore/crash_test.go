package filestore

import (
	"bytes"
	"math/rand"
	"testing"

	"github.com/flashmend/flashmend/internal/direct"
	"github.com/flashmend/flashmend/internal/objstore"
)

// A crash in the middle of an in-place write (a new chunk's data file, or a
// sums record filled into its slot) leaves the bytes that reached the file:
// after a restart every chunk acknowledged before the crash reads back
// verified, the chunk being written reads as corrupt or missing (or, when
// the torn write happened to complete it, verified and equal), never as
// other data that verifies; and its repair makes it whole. Seeded: the
// trial, the write the crash cuts, how much of it lands and the order of
// the chunks are drawn from the seed printed.
func TestFileStoreCrashTornWrites(t *testing.T) {
	const seed = 20261124
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewSource(seed))
	tornKinds := map[byte]int{} // 'd' data file, 'k' sums record
	for trial := 0; trial < 40; trial++ {
		dir := t.TempDir()
		fs, err := Open(dir, trial%8 == 0)
		if err != nil {
			t.Fatal(err)
		}
		const n = 16
		data := make([][]byte, n)
		for i := range data {
			data[i] = make([]byte, 1+rng.Intn(direct.ChunkSize))
			rng.Read(data[i])
		}
		order := rng.Perm(n)
		// Every chunk write does two in-place writes (data, record).
		cut := 1 + rng.Intn(2*n)
		writes, tornName := 0, ""
		fs.torn = func(name string, size int) (int, bool) {
			writes++
			if writes != cut {
				return 0, false
			}
			tornName = name
			return rng.Intn(size), true
		}
		cs := objstore.NewChunkStore(fs)
		acked := map[int]bool{}
		crashed := -1
		for _, i := range order {
			id := direct.ChunkID{Object: 7, Version: 2, Index: uint32(i)}
			if err := cs.WriteChunk(id, data[i], direct.Sums(id, data[i]), false); err != nil {
				if err != errTorn {
					t.Fatalf("trial %d: chunk %d: %v", trial, i, err)
				}
				crashed = i
				break
			}
			acked[i] = true
		}
		if crashed < 0 {
			t.Fatalf("trial %d: no write was cut (cut %d of %d)", trial, cut, writes)
		}
		tornKinds[tornName[0]]++
		// Restart: a new store and chunk store over the same files.
		fs2, err := Open(dir, false)
		if err != nil {
			t.Fatal(err)
		}
		cs2 := objstore.NewChunkStore(fs2)
		for i := 0; i < n; i++ {
			id := direct.ChunkID{Object: 7, Version: 2, Index: uint32(i)}
			r, err := cs2.ReadChunk(id)
			switch {
			case acked[i]:
				if err != nil || r.Corrupt || !bytes.Equal(r.Data, data[i]) {
					t.Fatalf("trial %d: acknowledged chunk %d after the crash (%s torn): %s %v", trial, i, tornName, r, err)
				}
			case err != nil && !objstore.IsNotFound(err):
				t.Fatalf("trial %d: chunk %d: %v", trial, i, err)
			case err == nil && !r.Corrupt && !bytes.Equal(r.Data, data[i]):
				t.Fatalf("trial %d: chunk %d verifies with other data after the crash (%s torn)", trial, i, tornName)
			}
		}
		// The torn chunk is repaired (out of place) and reads back whole.
		id := direct.ChunkID{Object: 7, Version: 2, Index: uint32(crashed)}
		if err := cs2.WriteChunk(id, data[crashed], direct.Sums(id, data[crashed]), true); err != nil {
			t.Fatalf("trial %d: repair of chunk %d: %v", trial, crashed, err)
		}
		for i := 0; i < n; i++ {
			id := direct.ChunkID{Object: 7, Version: 2, Index: uint32(i)}
			if !acked[i] && i != crashed {
				continue
			}
			r, err := cs2.ReadChunk(id)
			if err != nil || r.Corrupt || !bytes.Equal(r.Data, data[i]) {
				t.Fatalf("trial %d: chunk %d after the repair: %s %v", trial, i, r, err)
			}
		}
	}
	t.Logf("torn: %d data files, %d sums records", tornKinds['d'], tornKinds['k'])
	if tornKinds['d'] == 0 || tornKinds['k'] == 0 {
		t.Fatalf("the trials did not tear both kinds of write: %v", tornKinds)
	}
}

// WriteFresh never overwrites bytes already written: a slot holding a
// record is refused (the caller rewrites out of place), a zero slot inside
// the file and a range past its end are written.
func TestFileStoreWriteFreshOnlyFillsEmptyRanges(t *testing.T) {
	fs, err := Open(t.TempDir(), false)
	if err != nil {
		t.Fatal(err)
	}
	if err := fs.WriteFresh("k/a", 10, []byte("abc")); err != nil {
		t.Fatal(err)
	}
	if err := fs.WriteFresh("k/a", 11, []byte("x")); err == nil {
		t.Fatal("a written byte was overwritten in place")
	}
	if err := fs.WriteFresh("k/a", 0, []byte("0123456789")); err != nil {
		t.Fatal(err)
	}
	got, err := fs.Get("k/a")
	if err != nil || string(got) != "0123456789abc" {
		t.Fatalf("%q %v", got, err)
	}
	if err := fs.Create("d/x", []byte("one")); err != nil {
		t.Fatal(err)
	}
	if err := fs.Create("d/x", []byte("two")); err != nil { // exists: out of place
		t.Fatal(err)
	}
	if got, err := fs.Get("d/x"); err != nil || string(got) != "two" {
		t.Fatalf("%q %v", got, err)
	}
}

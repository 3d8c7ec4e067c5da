package objstore

import (
	"bytes"
	"strings"
	"testing"

	"github.com/flashmend/flashmend/internal/direct"
	"github.com/flashmend/flashmend/internal/objstore/sumsrec"
	"github.com/flashmend/flashmend/internal/testseed"
)

// sumsCountingStore counts the writes of sums files (range writes and
// whole-file puts of k/ names).
type sumsCountingStore struct {
	*MemStore
	sumsWrites int
}

func (s *sumsCountingStore) WriteAt(name string, off int64, data []byte) error {
	if strings.HasPrefix(name, "k/") {
		s.sumsWrites++
	}
	return s.MemStore.WriteAt(name, off, data)
}

func (s *sumsCountingStore) Put(name string, data []byte) error {
	if strings.HasPrefix(name, "k/") {
		s.sumsWrites++
	}
	return s.MemStore.Put(name, data)
}

// A batch writes a sums file's records together: one write per run of
// slots (a group of sumsrec.PerFile chunks written in order is one write),
// whatever the order of the chunks (an object of unknown size sends chunk 0
// last) and however many groups wait; slots already holding a record (a
// chunk written before the batch) are written record by record. After the
// commit every chunk reads back verified. Seeded: sizes, contents and the
// order of the chunks.
func TestChunkBatchGroupsSumsRecords(t *testing.T) {
	rng := testseed.Rand(t, "FLASHMEND_CHUNKBATCH_SEED")
	const n = 6*sumsrec.PerFile + 3 // 7 files, the last one short
	for _, order := range []string{"in order", "chunk 0 last", "shuffled", "some written before"} {
		store := &sumsCountingStore{MemStore: NewMemStore()}
		cs := NewChunkStore(store)
		ids := make([]direct.ChunkID, n)
		data := make([][]byte, n)
		for i := range data {
			ids[i] = direct.ChunkID{Object: 11, Version: 4, Shard: 2, Index: uint32(i)}
			data[i] = make([]byte, 1+rng.Intn(direct.ChunkSize))
			rng.Read(data[i])
		}
		seq := make([]int, n)
		for i := range seq {
			seq[i] = i
		}
		before := map[int]bool{}
		switch order {
		case "chunk 0 last":
			seq = append(seq[1:], 0)
		case "shuffled":
			rng.Shuffle(n, func(i, j int) { seq[i], seq[j] = seq[j], seq[i] })
		case "some written before":
			for _, i := range []int{3, 9, n - 1} {
				before[i] = true
				if err := cs.WriteChunk(ids[i], data[i], direct.Sums(ids[i], data[i]), false); err != nil {
					t.Fatal(err)
				}
			}
		}
		store.sumsWrites = 0
		b := cs.NewBatch()
		for _, i := range seq {
			if before[i] {
				continue
			}
			if err := cs.WriteChunkIn(b, ids[i], data[i], direct.Sums(ids[i], data[i])); err != nil {
				t.Fatalf("%s: chunk %d: %v", order, i, err)
			}
		}
		if err := b.Commit(); err != nil {
			t.Fatalf("%s: commit: %v", order, err)
		}
		files := (n + sumsrec.PerFile - 1) / sumsrec.PerFile
		switch order {
		case "in order", "chunk 0 last":
			if store.sumsWrites != files {
				t.Errorf("%s: %d sums writes for %d files", order, store.sumsWrites, files)
			}
		default:
			if store.sumsWrites > n-len(before) {
				t.Errorf("%s: %d sums writes for %d chunks", order, store.sumsWrites, n-len(before))
			}
		}
		for i, id := range ids {
			r, err := cs.ReadChunk(id)
			if err != nil || r.Corrupt || !bytes.Equal(r.Data, data[i]) {
				t.Fatalf("%s: chunk %d after the commit: %s %v", order, i, r, err)
			}
		}
		t.Logf("%s: %d sums writes for %d chunks", order, store.sumsWrites, n-len(before))
	}
}

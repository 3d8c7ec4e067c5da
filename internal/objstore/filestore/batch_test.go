package filestore

import (
	"bytes"
	"testing"

	"github.com/flashmend/flashmend/internal/direct"
	"github.com/flashmend/flashmend/internal/fsys"
	"github.com/flashmend/flashmend/internal/objstore"
	"github.com/flashmend/flashmend/internal/testseed"
)

// A batch's chunk writes are durable once its Commit returns: a power loss
// right after the commit (keeping nothing that was not synced) leaves every
// chunk reading back verified, while one before it may lose them (and does,
// when it keeps nothing unsynced: the proof that the writes themselves did
// not sync, which is the batch's point). A power loss keeping a random part
// of what was not synced never yields a chunk that verifies with other data.
// Seeded: the chunk sizes and contents and what the crash keeps.
func TestBatchDurableAtCommit(t *testing.T) {
	rng := testseed.Rand(t, "FLASHMEND_FILESTORE_BATCH_SEED")
	const root, n = "/node/store", 20
	ids := make([]direct.ChunkID, n)
	data := make([][]byte, n)
	for i := range data {
		ids[i] = direct.ChunkID{Object: 9, Version: 3, Index: uint32(i)}
		data[i] = make([]byte, 1+rng.Intn(direct.ChunkSize))
		rng.Read(data[i])
	}
	// writeAll writes every chunk in one batch over a new store on m and
	// returns the batch, not committed.
	writeAll := func(m *fsys.Mem) *objstore.ChunkBatch {
		s, err := OpenFS(m, root, true)
		if err != nil {
			t.Fatal(err)
		}
		cs := objstore.NewChunkStore(s)
		b := cs.NewBatch()
		for i, id := range ids {
			if err := cs.WriteChunkIn(b, id, data[i], direct.Sums(id, data[i])); err != nil {
				t.Fatalf("chunk %d: %v", i, err)
			}
		}
		return b
	}
	// check reopens the image and reads every chunk: verified and equal,
	// or (unless durable) missing or corrupt; never other data.
	check := func(img *fsys.Mem, durable bool) (lost int) {
		s, err := OpenFS(img, root, true)
		if err != nil {
			t.Fatal(err)
		}
		cs := objstore.NewChunkStore(s)
		for i, id := range ids {
			r, err := cs.ReadChunk(id)
			switch {
			case err == nil && !r.Corrupt && bytes.Equal(r.Data, data[i]):
				continue
			case durable:
				t.Fatalf("chunk %d after a crash past the commit: %s %v", i, r, err)
			case err != nil && !objstore.IsNotFound(err):
				t.Fatalf("chunk %d: %v", i, err)
			case err == nil && !r.Corrupt:
				t.Fatalf("chunk %d verifies with other data after the crash", i)
			}
			lost++
		}
		return lost
	}

	m := fsys.NewMem()
	b := writeAll(m)
	if lost := check(m.Crash(fsys.CrashConfig{KeepPercent: 0}), false); lost != n {
		t.Fatalf("a crash before the commit, keeping nothing unsynced, kept %d of %d chunks: the writes synced", n-lost, n)
	}
	if err := b.Commit(); err == nil {
		t.Fatal("commit on a crashed file system succeeded")
	}

	for trial := 0; trial < 5; trial++ {
		m := fsys.NewMem()
		writeAll(m)
		check(m.Crash(fsys.CrashConfig{KeepPercent: 10 + rng.Intn(80), Rand: rng}), false)

		m = fsys.NewMem()
		b := writeAll(m)
		if err := b.Commit(); err != nil {
			t.Fatal(err)
		}
		check(m.Crash(fsys.CrashConfig{KeepPercent: 0}), true)
	}
}

package objstore

import (
	"errors"
	"fmt"
	"slices"

	"github.com/flashmend/flashmend/internal/base"
	"github.com/flashmend/flashmend/internal/crashpoint"
	"github.com/flashmend/flashmend/internal/direct"
	"github.com/flashmend/flashmend/internal/objstore/sumsrec"
)

// ChunkBatch is a batch of new chunk writes (a node's WriteChunks stream:
// one replica or shard of a PUT) made durable together by Commit (group
// commit, Batch). It also groups the sums records: a chunk's record waits
// in the batch until the sums file it belongs to has a record for each of
// its sumsrec.PerFile chunks, or until more than maxPendingSumsFiles files
// wait, or Commit, and the file's waiting records go out in one write (a
// run of slots). Written one by one, each record was a read of the file's
// current content and a write of its whole new content (in a pack, a new
// record of up to seven records): seven of each per group instead of one
// write.
//
// A chunk written in a batch reads back once its record went out (its
// group complete) and at the latest after Commit; before that it reads as
// a chunk without a record (corrupt). Nothing reads a PUT's chunks before
// the PUT is acknowledged. Its data is written before its record, as by
// WriteChunk: a crash in between leaves a chunk that does not verify,
// repaired from the other copies.
//
// A ChunkBatch is used by one goroutine.
type ChunkBatch struct {
	c     *ChunkStore
	store Batch
	// pending holds the records not yet written, by sums file name.
	pending map[string]*pendingSums
}

// maxPendingSumsFiles bounds the sums files whose records wait in a batch
// (a stream's chunks come in order: one group fills at a time, but an
// object of unknown size sends chunk 0 last).
const maxPendingSumsFiles = 4

// pendingSums are one sums file's records waiting in a batch, by slot.
type pendingSums struct {
	ids  [sumsrec.PerFile]direct.ChunkID
	recs [sumsrec.PerFile][]byte
	n    int
}

// NewBatch starts a batch of new chunk writes (WriteChunkIn).
func (c *ChunkStore) NewBatch() *ChunkBatch {
	return &ChunkBatch{c: c, store: NewBatch(c.store), pending: map[string]*pendingSums{}}
}

// WriteChunkIn is WriteChunk of a new chunk (not a repair) in batch b: its
// data and sums record are durable once b.Commit has returned nil. A crash
// before that leaves them as a crash in the middle of WriteChunk does (a
// chunk that does not verify or is missing, repaired from the other
// copies), which is why only a write not yet acknowledged may be in a
// batch.
func (c *ChunkStore) WriteChunkIn(b *ChunkBatch, id direct.ChunkID, data []byte, sums []uint32) error {
	if b == nil || b.c != c {
		return base.AssertionFailedf("chunk %s: write in a batch of another store (or none)", id)
	}
	if err := c.checkRoom(len(data) + sumsrec.Size); err != nil {
		return fmt.Errorf("chunk %s: %w", id, err)
	}
	return c.writeChunk(id, data, sums, false, b)
}

// addRecord keeps id's sums record (encoded, checked) until its file's
// records go out.
func (b *ChunkBatch) addRecord(id direct.ChunkID, rec []byte) error {
	name := SumsName(id)
	p := b.pending[name]
	if p == nil {
		p = &pendingSums{}
		b.pending[name] = p
	}
	slot := id.Index % sumsrec.PerFile
	if p.recs[slot] == nil {
		p.n++
	}
	p.ids[slot], p.recs[slot] = id, rec // NB: rec is the caller's to give (sumsrec.Encode's)
	if p.n == sumsrec.PerFile {
		return b.flush(name)
	}
	if len(b.pending) > maxPendingSumsFiles {
		return b.flushAll()
	}
	return nil
}

// Commit writes the records still waiting and makes every write of the
// batch durable (Batch.Commit). After an error no write of the batch may be
// taken as durable.
func (b *ChunkBatch) Commit() error {
	if err := b.flushAll(); err != nil {
		return err
	}
	return b.store.Commit()
}

// Flush writes the records still waiting, without making anything
// durable: a stream that fails leaves the chunks it wrote before the
// failure readable, as WriteChunk would have.
func (b *ChunkBatch) Flush() error { return b.flushAll() }

func (b *ChunkBatch) flushAll() error {
	names := make([]string, 0, len(b.pending))
	for name := range b.pending {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		if err := b.flush(name); err != nil {
			return err
		}
	}
	return nil
}

// flush writes the waiting records of sums file name: each run of
// consecutive slots in one write where the store can (a range write, or an
// in-place write of slots that hold nothing yet), else record by record as
// WriteChunk writes them.
func (b *ChunkBatch) flush(name string) error {
	p := b.pending[name]
	delete(b.pending, name)
	for lo := 0; lo < sumsrec.PerFile; {
		if p.recs[lo] == nil {
			lo++
			continue
		}
		hi := lo
		var run []byte
		for hi < sumsrec.PerFile && p.recs[hi] != nil {
			run = append(run, p.recs[hi]...)
			hi++
		}
		ok, err := b.writeRun(name, SumsOffset(p.ids[lo]), run)
		if err != nil {
			return err
		}
		for k := lo; k < hi && !ok; k++ {
			if err := b.c.writeRecord(p.ids[k], p.recs[k], b.store); err != nil {
				return err
			}
		}
		crashpoint.Hit("chunk-sums")
		lo = hi
	}
	return nil
}

// writeRun writes a run of records at off of sums file name in one write,
// reporting false (nothing written) when the store cannot: slots there
// hold records already (a chunk written before, in another stream).
func (b *ChunkBatch) writeRun(name string, off int64, run []byte) (bool, error) {
	defer b.c.sumsMu.lock(name).Unlock()
	if rw, ok := b.c.store.(RangeWriter); ok {
		err := rw.WriteAt(name, off, run)
		if err == nil || !errors.Is(err, ErrRangeUnsupported) {
			return err == nil, err
		}
	}
	err := b.store.WriteFresh(name, off, run)
	if err == nil || !errors.Is(err, ErrRangeUnsupported) {
		return err == nil, err
	}
	return false, nil
}

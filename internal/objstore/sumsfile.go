package objstore

import (
	"errors"
	"fmt"
	"hash/fnv"
	"sync"

	"github.com/flashmend/flashmend/internal/direct"
	"github.com/flashmend/flashmend/internal/objstore/sumsrec"
)

// Sums files. A blob (one replica or shard of an object version) keeps its
// chunks' sums records (package sumsrec has the record format) in sums files
// apart from the data: sums file g of the blob holds the records of chunks
// g*sumsrec.PerFile .. (g+1)*sumsrec.PerFile-1, record k of the file at byte
// offset k*sumsrec.Size. A file is exactly as long as its highest written
// slot, so a blob of n chunks keeps ceil(n/sumsrec.PerFile) files and the
// last one is short. A slot never written is zeros and does not verify. A
// record is rewritten by replacing its 520 bytes (out of place: the store's
// RangeWriter, sdf RewriteRange, or a new file renamed over the old one);
// its neighbours' bytes are carried over unchanged.

// SumsName is the store file holding a chunk's sums record (shared with the
// other chunks of its group), apart from its data.
func SumsName(id direct.ChunkID) string {
	return fmt.Sprintf("k/%s/%d.g%d", blobDir(id.Object, id.Version), id.Shard, id.Index/sumsrec.PerFile)
}

// SumsOffset is the byte offset of id's record in SumsName(id).
func SumsOffset(id direct.ChunkID) int64 {
	return int64(id.Index%sumsrec.PerFile) * sumsrec.Size
}

// sumsLocks serializes the writers of one sums file (striped by name).
type sumsLocks [64]sync.Mutex

func (l *sumsLocks) lock(name string) *sync.Mutex {
	h := fnv.New32a()
	h.Write([]byte(name))
	m := &l[h.Sum32()%uint32(len(l))]
	m.Lock()
	return m
}

// readRecord returns id's record slot from its sums file: nil when the file
// or the slot does not exist.
func (c *ChunkStore) readRecord(id direct.ChunkID) ([]byte, error) {
	// Only the record's own bytes are read: a chunk read must not touch (and
	// be exposed to read errors on) its neighbours' records.
	b, err := getRange(c.store, SumsName(id), SumsOffset(id), sumsrec.Size)
	if IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	if int64(len(b)) < sumsrec.Size {
		return nil, nil
	}
	return b, nil
}

// writeRecord stores id's record: a range rewrite of its slot when the file
// already holds it and the store can, else a new file with every other slot
// carried over. Slots that do not verify are read up to twice more so
// that a transient flip on the way out is not written back as damage. A
// new slot's in-place write goes into batch b when not nil.
func (c *ChunkStore) writeRecord(id direct.ChunkID, rec []byte, b Batch) error {
	name, off := SumsName(id), SumsOffset(id)
	defer c.sumsMu.lock(name).Unlock()
	// A range write touches only this record's bytes; the fallback below
	// reads the whole file, exposing the other records to read errors.
	if rw, ok := c.store.(RangeWriter); ok {
		err := rw.WriteAt(name, off, rec)
		if err == nil || !errors.Is(err, ErrRangeUnsupported) {
			return err
		}
	}
	// A slot never written (a new chunk's) is filled in place: an append,
	// nothing written before is touched.
	fresh := FreshWriter(nil)
	if fw, ok := c.store.(FreshWriter); ok {
		fresh = fw
	}
	if b != nil {
		fresh = b
	}
	if fresh != nil {
		err := fresh.WriteFresh(name, off, rec)
		if err == nil || !errors.Is(err, ErrRangeUnsupported) {
			return err
		}
	}
	old, err := c.store.Get(name)
	if IsMediaError(err) {
		// Part of the file is unreadable: carry over the slots that still
		// read, record by record; the others are left empty, so their
		// chunks count as corrupt on this node and are repaired from the
		// other copies when next read or scrubbed.
		old, err = c.readableSlots(id, name)
	}
	if err != nil && !IsNotFound(err) {
		return err
	}
	// Up to two more reads of the slots that do not verify.
	for try := 0; try < 2; try++ {
		bad := c.badSlots(id, old)
		if len(bad) == 0 {
			break
		}
		again, err := c.store.Get(name)
		if err != nil || len(again) != len(old) {
			break
		}
		for _, k := range bad {
			lo := k * sumsrec.Size
			other := id
			other.Index = id.Index - id.Index%sumsrec.PerFile + uint32(k)
			if _, _, err := sumsrec.Decode(other, again[lo:lo+sumsrec.Size]); err == nil {
				copy(old[lo:lo+sumsrec.Size], again[lo:lo+sumsrec.Size])
			}
		}
	}
	if int64(len(old)) < off+sumsrec.Size {
		old = append(old, make([]byte, off+sumsrec.Size-int64(len(old)))...)
	}
	copy(old[off:], rec)
	return c.store.Put(name, old)
}

// readableSlots reads a sums file slot by slot, leaving zeros where the
// device fails the read.
func (c *ChunkStore) readableSlots(id direct.ChunkID, name string) ([]byte, error) {
	var out []byte
	first := id
	first.Index = id.Index - id.Index%sumsrec.PerFile
	for k := 0; k < sumsrec.PerFile; k++ {
		b, err := getRange(c.store, name, SumsOffset(first)+int64(k)*sumsrec.Size, sumsrec.Size)
		switch {
		case IsMediaError(err):
			b = make([]byte, sumsrec.Size)
		case err != nil:
			return nil, err
		case len(b) < sumsrec.Size:
			return append(out, b...), nil // the file's end
		}
		out = append(out, b...)
	}
	return out, nil
}

// badSlots lists the slots of a sums file (other than id's) holding bytes
// that do not verify as their chunk's record.
func (c *ChunkStore) badSlots(id direct.ChunkID, file []byte) []int {
	var bad []int
	first := id.Index - id.Index%sumsrec.PerFile
	for k := 0; (k+1)*sumsrec.Size <= len(file); k++ {
		other := id
		other.Index = first + uint32(k)
		if other.Index == id.Index {
			continue
		}
		slot := file[k*sumsrec.Size : (k+1)*sumsrec.Size]
		if sumsrec.IsEmpty(slot) {
			continue
		}
		if _, _, err := sumsrec.Decode(other, slot); err != nil {
			bad = append(bad, k)
		}
	}
	return bad
}

package objstore

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/fnv"
	"sync"

	"github.com/flashmend/flashmend/internal/base"
	"github.com/flashmend/flashmend/internal/direct"
)

// Packed sums layout. A blob (one replica or shard of an object version) keeps
// its chunks' sums records in sums files apart from the data: sums file g of
// the blob holds the records of chunks g*RecordsPerSumsFile ..
// (g+1)*RecordsPerSumsFile-1, record k of the file at byte offset
// k*SumsRecordSize. A file is exactly as long as its highest written slot, so
// a blob of n chunks keeps ceil(n/RecordsPerSumsFile) files and the last one
// is short. With 64 KiB chunks and 4 KiB flash pages that is one sums page
// per seven chunks (112 data pages), against one page per chunk when every
// record was its own file.
//
// A record (SumsRecordSize = 520 bytes):
//
//	[0:4]     chunk data length, little endian (1..ChunkSize)
//	[4:516]   the chunk's per-sector CRC32Cs, little endian, zero after the
//	          last sector
//	[516:520] CRC32C over the chunk identity (object, version, shard, chunk
//	          index; 24 bytes) followed by bytes [0:516]
//
// The identity is not stored: it is implied by the file name and the slot,
// and covered by the record's CRC, so a record read from the wrong slot or
// file does not verify. A slot never written is zeros and does not verify
// either. A record is rewritten by replacing its 520 bytes (out of place: the
// store's RangeWriter, sdf RewriteRange, or a new file renamed over the old
// one); its neighbours' bytes are carried over unchanged.
const (
	// SumsRecordSize is the bytes of one chunk's sums record.
	SumsRecordSize = 4 + 4*direct.SectorsPerChunk + 4
	// RecordsPerSumsFile is the records per sums file: 7 x 520 = 3640 bytes,
	// one 4 KiB flash page.
	RecordsPerSumsFile = 7
)

// RangeWriter is implemented by stores that can replace a byte range inside
// an existing file out of place (the old bytes are not overwritten; on SDF,
// sdf.FS.RewriteRange reprograms only the pages the range touches).
// WriteAt returns an error wrapping ErrRangeUnsupported when it cannot do it
// for this file (the caller then rewrites the whole file); a store may also
// accept a range past the end of the file (or of a missing file), extending
// it with zero bytes, where it can do so out of place.
type RangeWriter interface {
	WriteAt(name string, off int64, data []byte) error
}

// FreshWriter is implemented by stores that can write bytes into a range
// of a file that holds nothing there yet (past the file's end, a missing
// file being created, or only zero bytes: a sums slot never written) in
// place, without a new file. Nothing already written is overwritten: a
// range that holds a nonzero byte gets an error wrapping
// ErrRangeUnsupported, and the caller writes out of place. A crash may
// leave the range partly written, so it is used only for records that carry
// their own checksum (a sums record: a torn one does not verify, its chunk
// counts as corrupt and is repaired). Callers serialize the writers of one
// file.
type FreshWriter interface {
	WriteFresh(name string, off int64, data []byte) error
}

// Creator is implemented by stores that can write a file that does not
// exist yet in place (no temporary file and rename). A crash may leave the
// new file partly written, so it is used only for content checked against a
// checksum kept apart (a chunk's data, against its sums record, written
// after it). A name that exists is replaced out of place, as Put does.
type Creator interface {
	Create(name string, data []byte) error
}

// ErrRangeUnsupported is returned (wrapped) by RangeWriter.WriteAt when the
// range cannot be rewritten in place.
var ErrRangeUnsupported = errors.New("range rewrite unsupported")

// SumsName is the store file holding a chunk's sums record (shared with the
// other chunks of its group), apart from its data.
func SumsName(id direct.ChunkID) string {
	return fmt.Sprintf("k/%s/%d.g%d", blobDir(id.Object, id.Version), id.Shard, id.Index/RecordsPerSumsFile)
}

// SumsOffset is the byte offset of id's record in SumsName(id).
func SumsOffset(id direct.ChunkID) int64 {
	return int64(id.Index%RecordsPerSumsFile) * SumsRecordSize
}

// EncodeSums encodes id's sums record (SumsRecordSize bytes).
func EncodeSums(id direct.ChunkID, dataLen int, sums []uint32) []byte {
	b := make([]byte, SumsRecordSize)
	binary.LittleEndian.PutUint32(b, uint32(dataLen))
	for i, s := range sums {
		binary.LittleEndian.PutUint32(b[4+4*i:], s)
	}
	binary.LittleEndian.PutUint32(b[SumsRecordSize-4:], recordCRC(id, b[:SumsRecordSize-4]))
	return b
}

func recordCRC(id direct.ChunkID, body []byte) uint32 {
	ident := id.Identity()
	return base.CRC32CUpdate(base.CRC32C(ident[:]), body)
}

// DecodeSums decodes and verifies id's sums record. It returns the chunk's
// data length and sums, or a corruption error.
// DamagedSums returns the sector checksums a sums record that failed its
// own CRC still holds (nil for a record of the wrong size or an empty slot):
// every entry is a CRC32C bound to the chunk's identity and the sector's
// index, so a sector that matches its entry verified as surely as with an
// intact record; an entry the damage hit only makes its sector count as bad.
// EC's per-sector decode uses them, so that a flip in a sums record costs
// the sectors whose entries it hit, not the whole chunk.
func DamagedSums(rec []byte) []uint32 {
	if len(rec) != SumsRecordSize || isZero(rec) {
		return nil
	}
	sums := make([]uint32, direct.SectorsPerChunk)
	for i := range sums {
		sums[i] = binary.LittleEndian.Uint32(rec[4+4*i:])
	}
	return sums
}

func DecodeSums(id direct.ChunkID, rec []byte) (dataLen int, sums []uint32, err error) {
	if len(rec) != SumsRecordSize {
		return 0, nil, base.CorruptionErrorf("sums of %s: record of %d bytes, want %d", id, len(rec), SumsRecordSize)
	}
	body := rec[:SumsRecordSize-4]
	if recordCRC(id, body) != binary.LittleEndian.Uint32(rec[SumsRecordSize-4:]) {
		if isZero(rec) {
			return 0, nil, base.CorruptionErrorf("sums of %s: no record (empty slot)", id)
		}
		return 0, nil, base.CorruptionErrorf("sums of %s: record checksum mismatch (or record of another chunk)", id)
	}
	dataLen = int(binary.LittleEndian.Uint32(body))
	if dataLen <= 0 || dataLen > direct.ChunkSize {
		return 0, nil, base.CorruptionErrorf("sums of %s: data length %d outside [1, %d]", id, dataLen, direct.ChunkSize)
	}
	n := direct.SectorCount(dataLen)
	if !isZero(body[4+4*n:]) {
		return 0, nil, base.CorruptionErrorf("sums of %s: nonzero bytes after %d sums", id, n)
	}
	sums = make([]uint32, n)
	for i := range sums {
		sums[i] = binary.LittleEndian.Uint32(body[4+4*i:])
	}
	return dataLen, sums, nil
}

func isZero(b []byte) bool { return len(bytes.TrimLeft(b, "\x00")) == 0 }

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
	b, err := getRange(c.store, SumsName(id), SumsOffset(id), SumsRecordSize)
	if IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	if int64(len(b)) < SumsRecordSize {
		return nil, nil
	}
	return b, nil
}

// writeRecord stores id's record: a range rewrite of its slot when the file
// already holds it and the store can, else a new file with every other slot
// carried over. Slots that do not verify are read up to twice more so
// that a transient flip on the way out is not written back as damage.
func (c *ChunkStore) writeRecord(id direct.ChunkID, rec []byte) error {
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
	if fw, ok := c.store.(FreshWriter); ok {
		err := fw.WriteFresh(name, off, rec)
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
			lo := k * SumsRecordSize
			other := id
			other.Index = id.Index - id.Index%RecordsPerSumsFile + uint32(k)
			if _, _, err := DecodeSums(other, again[lo:lo+SumsRecordSize]); err == nil {
				copy(old[lo:lo+SumsRecordSize], again[lo:lo+SumsRecordSize])
			}
		}
	}
	if int64(len(old)) < off+SumsRecordSize {
		old = append(old, make([]byte, off+SumsRecordSize-int64(len(old)))...)
	}
	copy(old[off:], rec)
	return c.store.Put(name, old)
}

// readableSlots reads a sums file slot by slot, leaving zeros where the
// device fails the read.
func (c *ChunkStore) readableSlots(id direct.ChunkID, name string) ([]byte, error) {
	var out []byte
	first := id
	first.Index = id.Index - id.Index%RecordsPerSumsFile
	for k := 0; k < RecordsPerSumsFile; k++ {
		b, err := getRange(c.store, name, SumsOffset(first)+int64(k)*SumsRecordSize, SumsRecordSize)
		switch {
		case IsMediaError(err):
			b = make([]byte, SumsRecordSize)
		case err != nil:
			return nil, err
		case len(b) < SumsRecordSize:
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
	first := id.Index - id.Index%RecordsPerSumsFile
	for k := 0; (k+1)*SumsRecordSize <= len(file); k++ {
		other := id
		other.Index = first + uint32(k)
		if other.Index == id.Index {
			continue
		}
		slot := file[k*SumsRecordSize : (k+1)*SumsRecordSize]
		if isZero(slot) {
			continue
		}
		if _, _, err := DecodeSums(other, slot); err != nil {
			bad = append(bad, k)
		}
	}
	return bad
}

package sumsrec

import (
	"bytes"
	"encoding/binary"

	"github.com/flashmend/flashmend/internal/base"
	"github.com/flashmend/flashmend/internal/direct"
)

const (
	// Size is the bytes of one chunk's sums record.
	Size = 4 + 4*direct.SectorsPerChunk + 4
	// PerFile is the records per sums file: 7 x 520 = 3640 bytes, one 4 KiB
	// flash page.
	PerFile = 7
)

// Encode encodes id's sums record (Size bytes).
func Encode(id direct.ChunkID, dataLen int, sums []uint32) []byte {
	b := make([]byte, Size)
	binary.LittleEndian.PutUint32(b, uint32(dataLen))
	for i, s := range sums {
		binary.LittleEndian.PutUint32(b[4+4*i:], s)
	}
	binary.LittleEndian.PutUint32(b[Size-4:], recordCRC(id, b[:Size-4]))
	return b
}

func recordCRC(id direct.ChunkID, body []byte) uint32 {
	ident := id.Identity()
	return base.CRC32CUpdate(base.CRC32C(ident[:]), body)
}

// Damaged returns the sector checksums a sums record that failed its
// own CRC still holds (nil for a record of the wrong size or an empty slot):
// every entry is a CRC32C bound to the chunk's identity and the sector's
// index, so a sector that matches its entry verified as surely as with an
// intact record; an entry the damage hit only makes its sector count as bad.
// EC's per-sector decode uses them, so that a flip in a sums record costs
// the sectors whose entries it hit, not the whole chunk.
func Damaged(rec []byte) []uint32 {
	if len(rec) != Size || IsEmpty(rec) {
		return nil
	}
	sums := make([]uint32, direct.SectorsPerChunk)
	for i := range sums {
		sums[i] = binary.LittleEndian.Uint32(rec[4+4*i:])
	}
	return sums
}

// Decode decodes and verifies id's sums record. It returns the chunk's
// data length and sums, or a corruption error.
func Decode(id direct.ChunkID, rec []byte) (dataLen int, sums []uint32, err error) {
	if len(rec) != Size {
		return 0, nil, base.CorruptionErrorf("sums of %s: record of %d bytes, want %d", id, len(rec), Size)
	}
	body := rec[:Size-4]
	if recordCRC(id, body) != binary.LittleEndian.Uint32(rec[Size-4:]) {
		if IsEmpty(rec) {
			return 0, nil, base.CorruptionErrorf("sums of %s: no record (empty slot)", id)
		}
		return 0, nil, base.CorruptionErrorf("sums of %s: record checksum mismatch (or record of another chunk)", id)
	}
	dataLen = int(binary.LittleEndian.Uint32(body))
	if dataLen <= 0 || dataLen > direct.ChunkSize {
		return 0, nil, base.CorruptionErrorf("sums of %s: data length %d outside [1, %d]", id, dataLen, direct.ChunkSize)
	}
	n := direct.SectorCount(dataLen)
	if !IsEmpty(body[4+4*n:]) {
		return 0, nil, base.CorruptionErrorf("sums of %s: nonzero bytes after %d sums", id, n)
	}
	sums = make([]uint32, n)
	for i := range sums {
		sums[i] = binary.LittleEndian.Uint32(body[4+4*i:])
	}
	return dataLen, sums, nil
}

// IsEmpty reports whether rec holds only zero bytes: a slot never written.
func IsEmpty(rec []byte) bool { return len(bytes.TrimLeft(rec, "\x00")) == 0 }

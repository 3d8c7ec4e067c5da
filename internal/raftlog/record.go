package raftlog

import (
	"encoding/binary"
	"hash/crc32"

	"github.com/flashmend/flashmend/internal/base"
)

// recordMagic starts every record copy ("FMRL" in little endian).
const recordMagic uint32 = 0x4c524d46

// headerBytes is the size of a record header: magic, crc, kind, length.
const headerBytes = 4 + 4 + 1 + 4

// Record kinds.
const (
	// kindState starts a generation: the full state of the log.
	kindState byte = 1
	// kindUpdate is one Save, Compact or CreateSnapshot call.
	kindUpdate byte = 2
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// recordChecksum covers the record's identity (generation, offset) as well as
// its content, so a record written at the wrong place or left over from an
// older generation does not verify.
func recordChecksum(gen uint64, offset int64, kind byte, payload []byte) uint32 {
	var id [8 + 8 + 1 + 4]byte
	binary.LittleEndian.PutUint64(id[0:], gen)
	binary.LittleEndian.PutUint64(id[8:], uint64(offset))
	id[16] = kind
	binary.LittleEndian.PutUint32(id[17:], uint32(len(payload)))
	crc := crc32.Update(0, castagnoli, id[:])
	return crc32.Update(crc, castagnoli, payload)
}

// encodeRecord returns the bytes of one record copy placed at offset.
func encodeRecord(gen uint64, offset int64, kind byte, payload []byte) []byte {
	buf := make([]byte, headerBytes+len(payload))
	binary.LittleEndian.PutUint32(buf[0:], recordMagic)
	binary.LittleEndian.PutUint32(buf[4:], recordChecksum(gen, offset, kind, payload))
	buf[8] = kind
	binary.LittleEndian.PutUint32(buf[9:], uint32(len(payload)))
	copy(buf[headerBytes:], payload)
	return buf
}

// decodeRecord verifies the record copy that starts at data[0] (data is the
// file from offset on). It returns the kind, the payload and the record's
// total length, or a corruption error.
func decodeRecord(gen uint64, offset int64, data []byte, maxRecordBytes int) (kind byte, payload []byte, n int, err error) {
	if len(data) < headerBytes {
		return 0, nil, 0, base.CorruptionErrorf("raftlog: short record header at offset %d (%d bytes)", offset, len(data))
	}
	if m := binary.LittleEndian.Uint32(data[0:]); m != recordMagic {
		return 0, nil, 0, base.CorruptionErrorf("raftlog: bad magic %#x at offset %d", m, offset)
	}
	length := int(binary.LittleEndian.Uint32(data[9:]))
	if length > maxRecordBytes || headerBytes+length > len(data) {
		return 0, nil, 0, base.CorruptionErrorf("raftlog: record length %d at offset %d exceeds file or limit", length, offset)
	}
	kind = data[8]
	payload = data[headerBytes : headerBytes+length]
	if want, got := binary.LittleEndian.Uint32(data[4:]), recordChecksum(gen, offset, kind, payload); want != got {
		return 0, nil, 0, base.CorruptionErrorf("raftlog: checksum mismatch at offset %d: stored %#x computed %#x", offset, want, got)
	}
	if kind != kindState && kind != kindUpdate {
		return 0, nil, 0, base.CorruptionErrorf("raftlog: unknown record kind %d at offset %d", kind, offset)
	}
	return kind, payload, headerBytes + length, nil
}

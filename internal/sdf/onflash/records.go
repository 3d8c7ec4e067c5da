package onflash

import (
	"encoding/binary"
	"fmt"

	"github.com/flashmend/flashmend/internal/base"
)

// Journal record types. A record is
//
//	[0:4] body length n (little endian)   [4] type   [5:5+n] body   [5+n:9+n] CRC32C of type and body
//
// and bodies are sequences of uvarints and length-prefixed strings.
const (
	RecSuper          byte = 1 // version, geometry, created (unix ns)
	RecCreate         byte = 2 // id, name, hint, mtime
	RecRename         byte = 3 // id, new name (replaces a file of that name)
	RecDelete         byte = 4 // id
	RecExtents        byte = 5 // id, size, mtime, count, count x (filePage, zone, zonePage, n, seq)
	RecZoneReset      byte = 6 // zone, die mask: the zone was erased and stripes over these dies
	RecZoneState      byte = 7 // zone, state (read-only or offline)
	RecCheckpointDone byte = 8 // nextFileID, nextSeq: the checkpoint before it is complete
	RecFailedDie      byte = 9 // channel, die
	// RecZoneOpen: the zone takes appends; its pages may hold synced data
	// whose extents are not journaled yet, so replay reads their OOB.
	RecZoneOpen byte = 10 // zone
	// RecZoneSealed: every extent in the zone is in the journal before it.
	RecZoneSealed byte = 11 // zone
	// RecCheckpointBody: the checkpoint's records (everything but the
	// superblock and RecCheckpointDone) are not inline but in data zones
	// lent to the journal, MetaCopies copies (CheckpointBody). Replay reads
	// them and applies them in this record's place.
	RecCheckpointBody byte = 12
)

// FormatVersion is the on-flash format this build writes. Version 2 added
// RecCheckpointBody; a version 1 device (never holding one) is read as is.
// A build that reads only version 1 refuses a version 2 device instead of
// skipping the body record and mounting an empty file table.
const FormatVersion = 2

// MinFormatVersion is the oldest format this build reads.
const MinFormatVersion = 1

const recOverhead = 9

// RecWriter builds a record body.
type RecWriter struct{ b []byte }

func (w *RecWriter) Uvarint(v uint64) { w.b = binary.AppendUvarint(w.b, v) }
func (w *RecWriter) Varint(v int64)   { w.b = binary.AppendVarint(w.b, v) }
func (w *RecWriter) Str(v string)     { w.Uvarint(uint64(len(v))); w.b = append(w.b, v...) }
func (w *RecWriter) Frame(typ byte) []byte {
	out := make([]byte, 0, len(w.b)+recOverhead)
	out = binary.LittleEndian.AppendUint32(out, uint32(len(w.b)))
	out = append(out, typ)
	out = append(out, w.b...)
	c := base.CRC32C(out[4:])
	return binary.LittleEndian.AppendUint32(out, c)
}

// RecReader decodes a record body; the first decoding error sticks.
type RecReader struct {
	b   []byte
	Err error
}

// NewRecReader decodes body.
func NewRecReader(body []byte) *RecReader { return &RecReader{b: body} }

func (r *RecReader) Uvarint() uint64 {
	if r.Err != nil {
		return 0
	}
	v, n := binary.Uvarint(r.b)
	if n <= 0 {
		r.Err = fmt.Errorf("bad uvarint")
		return 0
	}
	r.b = r.b[n:]
	return v
}

func (r *RecReader) Varint() int64 {
	if r.Err != nil {
		return 0
	}
	v, n := binary.Varint(r.b)
	if n <= 0 {
		r.Err = fmt.Errorf("bad varint")
		return 0
	}
	r.b = r.b[n:]
	return v
}

func (r *RecReader) Str() string {
	n := r.Uvarint()
	if r.Err != nil {
		return ""
	}
	if n > uint64(len(r.b)) {
		r.Err = fmt.Errorf("string of %d bytes past the end", n)
		return ""
	}
	v := string(r.b[:n])
	r.b = r.b[n:]
	return v
}

// NextRecord splits the first record off stream. ok is false when the stream
// ends (or holds a torn or corrupt record, which ends replay).
func NextRecord(stream []byte) (typ byte, body, rest []byte, ok bool) {
	if len(stream) < recOverhead {
		return 0, nil, stream, false
	}
	n := int(binary.LittleEndian.Uint32(stream))
	if n < 0 || n > len(stream)-recOverhead {
		return 0, nil, stream, false
	}
	c := binary.LittleEndian.Uint32(stream[5+n:])
	if base.CRC32C(stream[4:5+n]) != c {
		return 0, nil, stream, false
	}
	return stream[4], stream[5 : 5+n], stream[recOverhead+n:], true
}

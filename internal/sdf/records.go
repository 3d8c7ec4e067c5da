package sdf

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
	recSuper          byte = 1 // version, geometry, created (unix ns)
	recCreate         byte = 2 // id, name, hint, mtime
	recRename         byte = 3 // id, new name (replaces a file of that name)
	recDelete         byte = 4 // id
	recExtents        byte = 5 // id, size, mtime, count, count x (filePage, zone, zonePage, n, seq)
	recZoneReset      byte = 6 // zone, die mask: the zone was erased and stripes over these dies
	recZoneState      byte = 7 // zone, state (read-only or offline)
	recCheckpointDone byte = 8 // nextFileID, nextSeq: the checkpoint before it is complete
	recFailedDie      byte = 9 // channel, die
	// recZoneOpen: the zone takes appends; its pages may hold synced data
	// whose extents are not journaled yet, so replay reads their OOB.
	recZoneOpen byte = 10 // zone
	// recZoneSealed: every extent in the zone is in the journal before it.
	recZoneSealed byte = 11 // zone
)

const formatVersion = 1

const recOverhead = 9

// recWriter builds a record body.
type recWriter struct{ b []byte }

func (w *recWriter) u(v uint64) { w.b = binary.AppendUvarint(w.b, v) }
func (w *recWriter) i(v int64)  { w.b = binary.AppendVarint(w.b, v) }
func (w *recWriter) s(v string) { w.u(uint64(len(v))); w.b = append(w.b, v...) }
func (w *recWriter) frame(typ byte) []byte {
	out := make([]byte, 0, len(w.b)+recOverhead)
	out = binary.LittleEndian.AppendUint32(out, uint32(len(w.b)))
	out = append(out, typ)
	out = append(out, w.b...)
	c := base.CRC32C(out[4:])
	return binary.LittleEndian.AppendUint32(out, c)
}

// recReader decodes a record body; the first decoding error sticks.
type recReader struct {
	b   []byte
	err error
}

func (r *recReader) u() uint64 {
	if r.err != nil {
		return 0
	}
	v, n := binary.Uvarint(r.b)
	if n <= 0 {
		r.err = fmt.Errorf("bad uvarint")
		return 0
	}
	r.b = r.b[n:]
	return v
}

func (r *recReader) i() int64 {
	if r.err != nil {
		return 0
	}
	v, n := binary.Varint(r.b)
	if n <= 0 {
		r.err = fmt.Errorf("bad varint")
		return 0
	}
	r.b = r.b[n:]
	return v
}

func (r *recReader) s() string {
	n := r.u()
	if r.err != nil {
		return ""
	}
	if n > uint64(len(r.b)) {
		r.err = fmt.Errorf("string of %d bytes past the end", n)
		return ""
	}
	v := string(r.b[:n])
	r.b = r.b[n:]
	return v
}

// nextRecord splits the first record off stream. ok is false when the stream
// ends (or holds a torn or corrupt record, which ends replay).
func nextRecord(stream []byte) (typ byte, body, rest []byte, ok bool) {
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

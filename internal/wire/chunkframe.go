package wire

import (
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"unicode/utf8"

	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/encoding/protowire"

	"github.com/flashmend/flashmend/internal/gen/nodepb"
)

// The streamed chunk read (Node.ReadChunks) moves nearly every byte a GET
// reads, one 64 KiB chunk per message. Two of the copies protobuf makes of
// a chunk on its way are avoided here, by hand-coding that one message
// (field numbers from node.proto; TestChunkFrameMatchesProto checks every
// field of both messages against protobuf's own coding):
//
//   - Sending (ChunkFrame): the node reads the chunk into a buffer of the
//     pool and hands it to gRPC as it is, after a small header with the
//     other fields; gRPC returns the buffer to the pool once the transport
//     has written it. Protobuf's marshal would copy it into a new buffer
//     first.
//   - Receiving (ChunkCodec.Unmarshal of a ReadChunksResponse): the
//     chunk's data is copied once out of gRPC's 16 KiB frames, alone, to
//     the start of a buffer of the pool, and the other fields are decoded
//     from the message's first bytes (unmarshalChunksFrom); protobuf's
//     unmarshal would gather the message and copy the data out again. The
//     receiver hands the buffer back (RecycleChunkData) once it has
//     delivered a chunk that nothing else refers to: without that, every
//     chunk read was 64 KiB of zeroed garbage.

// ChunkFrame is a ReadChunksResponse to send whose chunk data is held in
// Buf, a buffer of ChunkBufferPool (Resp.Chunk.Data is (*Buf)[:n]): sent
// with ServerStream.SendMsg, the codec hands the data to gRPC without
// copying it, and gRPC puts Buf back into the pool when it is done with it.
// The sender must not touch Resp or Buf after SendMsg.
type ChunkFrame struct {
	Resp *nodepb.ReadChunksResponse
	Buf  *[]byte
}

// Field numbers of node.proto's ReadChunksResponse and ReadChunkResponse.
const (
	fieldChunksIndex   = 1
	fieldChunksChunk   = 2
	fieldChunksMissing = 3
	fieldChunksError   = 4

	fieldChunkData      = 1
	fieldChunkSums      = 2
	fieldChunkSumsValid = 3
	fieldChunkCorrupt   = 4
	fieldChunkTransient = 5
)

// appendChunkHeader appends the encoding of c without its data field,
// followed by the data field's tag and length (the data follows).
func appendChunkHeader(b []byte, c *nodepb.ReadChunkResponse) []byte {
	b = slices.Grow(b, chunkHeaderSize(c))
	if len(c.Sums) > 0 {
		b = protowire.AppendTag(b, fieldChunkSums, protowire.BytesType)
		b = protowire.AppendVarint(b, uint64(4*len(c.Sums)))
		for _, s := range c.Sums {
			b = protowire.AppendFixed32(b, s)
		}
	}
	b = appendBool(b, fieldChunkSumsValid, c.SumsValid)
	b = appendBool(b, fieldChunkCorrupt, c.Corrupt)
	b = appendBool(b, fieldChunkTransient, c.Transient)
	if len(c.Data) > 0 {
		b = protowire.AppendTag(b, fieldChunkData, protowire.BytesType)
		b = protowire.AppendVarint(b, uint64(len(c.Data)))
	}
	return b
}

// chunkHeaderSize is the length of appendChunkHeader's encoding of c.
func chunkHeaderSize(c *nodepb.ReadChunkResponse) int {
	n := 0
	if len(c.Sums) > 0 {
		n += protowire.SizeTag(fieldChunkSums) + protowire.SizeBytes(4*len(c.Sums))
	}
	for _, v := range []bool{c.SumsValid, c.Corrupt, c.Transient} {
		if v {
			n += 2 // the fields are below 16: one byte of tag, one of value
		}
	}
	if len(c.Data) > 0 {
		n += protowire.SizeTag(fieldChunkData) + protowire.SizeVarint(uint64(len(c.Data)))
	}
	return n
}

func appendBool(b []byte, field protowire.Number, v bool) []byte {
	if !v {
		return b
	}
	b = protowire.AppendTag(b, field, protowire.VarintType)
	return protowire.AppendVarint(b, 1)
}

// marshalChunkFrame encodes f as header and data buffers.
func marshalChunkFrame(f *ChunkFrame) (mem.BufferSlice, error) {
	r := f.Resp
	if r == nil {
		return nil, errors.New("wire: chunk frame without a response")
	}
	// The header (index, missing, error, the chunk's fields) in one
	// allocation: appended to a nil slice, the 128 sums of a chunk grew
	// it seven times.
	hdrMax := 3*(1+binary.MaxVarintLen64) + 2 + len(r.Error)
	if r.Chunk != nil {
		hdrMax += chunkHeaderSize(r.Chunk)
	}
	hdr := make([]byte, 0, hdrMax)
	if r.Index != 0 {
		hdr = protowire.AppendTag(hdr, fieldChunksIndex, protowire.VarintType)
		hdr = protowire.AppendVarint(hdr, uint64(r.Index))
	}
	hdr = appendBool(hdr, fieldChunksMissing, r.Missing)
	if r.Error != "" {
		hdr = protowire.AppendTag(hdr, fieldChunksError, protowire.BytesType)
		hdr = protowire.AppendString(hdr, r.Error)
	}
	var data []byte
	if c := r.Chunk; c != nil {
		data = c.Data
		hdr = protowire.AppendTag(hdr, fieldChunksChunk, protowire.BytesType)
		hdr = protowire.AppendVarint(hdr, uint64(chunkHeaderSize(c)+len(data)))
		hdr = appendChunkHeader(hdr, c)
	}
	out := mem.BufferSlice{mem.SliceBuffer(hdr)}
	switch {
	case len(data) == 0:
		if f.Buf != nil {
			ChunkBufferPool.Put(f.Buf)
		}
	case f.Buf != nil && len(*f.Buf) > 0 && &(*f.Buf)[0] == &data[0] && len(data) <= cap(*f.Buf):
		*f.Buf = (*f.Buf)[:len(data)]
		out = append(out, mem.NewBuffer(f.Buf, ChunkBufferPool))
	default:
		// The data is not the pooled buffer's (a re-read): sent as it is,
		// left to the collector; the buffer goes back to the pool.
		if f.Buf != nil {
			ChunkBufferPool.Put(f.Buf)
		}
		out = append(out, mem.SliceBuffer(data))
	}
	return out, nil
}

// unmarshalChunks decodes a ReadChunksResponse from b into m; the chunk's
// data aliases b.
func unmarshalChunks(b []byte, m *nodepb.ReadChunksResponse) error {
	m.Reset()
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return protowire.ParseError(n)
		}
		if !num.IsValid() {
			// ConsumeTag refuses 0 but not numbers past MaxValidNumber;
			// protobuf refuses both (found by FuzzUnmarshalChunks).
			return fmt.Errorf("wire: field number %d out of range", num)
		}
		b = b[n:]
		switch {
		case num == fieldChunksIndex && typ == protowire.VarintType:
			v, n := protowire.ConsumeVarint(b)
			if n < 0 {
				return protowire.ParseError(n)
			}
			m.Index, b = uint32(v), b[n:]
		case num == fieldChunksMissing && typ == protowire.VarintType:
			v, n := protowire.ConsumeVarint(b)
			if n < 0 {
				return protowire.ParseError(n)
			}
			m.Missing, b = v != 0, b[n:]
		case num == fieldChunksError && typ == protowire.BytesType:
			v, n := protowire.ConsumeBytes(b)
			if n < 0 {
				return protowire.ParseError(n)
			}
			if !utf8.Valid(v) {
				return errors.New("wire: error field is not valid UTF-8")
			}
			m.Error, b = string(v), b[n:]
		case num == fieldChunksChunk && typ == protowire.BytesType:
			v, n := protowire.ConsumeBytes(b)
			if n < 0 {
				return protowire.ParseError(n)
			}
			if m.Chunk == nil {
				m.Chunk = &nodepb.ReadChunkResponse{}
			}
			if err := unmarshalChunk(v, m.Chunk); err != nil {
				return err
			}
			b = b[n:]
		default:
			n := protowire.ConsumeFieldValue(num, typ, b)
			if n < 0 {
				return protowire.ParseError(n)
			}
			b = b[n:]
		}
	}
	return nil
}

// unmarshalChunk merges a ReadChunkResponse's encoding into c (a message
// field that occurs twice is merged, as protobuf does).
func unmarshalChunk(b []byte, c *nodepb.ReadChunkResponse) error {
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return protowire.ParseError(n)
		}
		if !num.IsValid() {
			// ConsumeTag refuses 0 but not numbers past MaxValidNumber;
			// protobuf refuses both (found by FuzzUnmarshalChunks).
			return fmt.Errorf("wire: field number %d out of range", num)
		}
		b = b[n:]
		switch {
		case num == fieldChunkData && typ == protowire.BytesType:
			v, n := protowire.ConsumeBytes(b)
			if n < 0 {
				return protowire.ParseError(n)
			}
			c.Data, b = v, b[n:]
		case num == fieldChunkSums && typ == protowire.BytesType: // packed
			v, n := protowire.ConsumeBytes(b)
			if n < 0 {
				return protowire.ParseError(n)
			}
			if len(v)%4 != 0 {
				return fmt.Errorf("wire: packed sums of %d bytes", len(v))
			}
			c.Sums = slices.Grow(c.Sums, len(v)/4)
			for len(v) > 0 {
				s, k := protowire.ConsumeFixed32(v)
				if k < 0 {
					return protowire.ParseError(k)
				}
				c.Sums, v = append(c.Sums, s), v[k:]
			}
			b = b[n:]
		case num == fieldChunkSums && typ == protowire.Fixed32Type: // unpacked
			s, n := protowire.ConsumeFixed32(b)
			if n < 0 {
				return protowire.ParseError(n)
			}
			c.Sums, b = append(c.Sums, s), b[n:]
		case (num == fieldChunkSumsValid || num == fieldChunkCorrupt || num == fieldChunkTransient) && typ == protowire.VarintType:
			v, n := protowire.ConsumeVarint(b)
			if n < 0 {
				return protowire.ParseError(n)
			}
			switch num {
			case fieldChunkSumsValid:
				c.SumsValid = v != 0
			case fieldChunkCorrupt:
				c.Corrupt = v != 0
			default:
				c.Transient = v != 0
			}
			b = b[n:]
		default:
			n := protowire.ConsumeFieldValue(num, typ, b)
			if n < 0 {
				return protowire.ParseError(n)
			}
			b = b[n:]
		}
	}
	return nil
}

// pooledChunkMin is the smallest ReadChunksResponse whose chunk data is
// received into a buffer of ChunkBufferPool (smaller ones are gathered
// into a new buffer: the garbage is small).
const pooledChunkMin = 16 << 10

// chunkHeadMax bounds the bytes of a ReadChunksResponse before its chunk's
// data that unmarshalChunksFrom looks at: the node's frames carry at most
// 128 sums (514 bytes) and a few small fields there.
const chunkHeadMax = 1024

// unmarshalChunksFrom decodes a ReadChunksResponse from data into m. When
// the chunk's data is the message's last bytes (as ChunkFrame sends it)
// and large, the data is copied alone to the start of a buffer of
// ChunkBufferPool, where the receiver may hand it back (RecycleChunkData)
// once it is done with it; any other message is gathered into a new buffer
// and decoded by unmarshalChunks. Either way the data is the message's own
// memory, referenced by nothing else.
func unmarshalChunksFrom(data mem.BufferSlice, m *nodepb.ReadChunksResponse) error {
	return unmarshalChunksAbove(data, m, pooledChunkMin)
}

// unmarshalChunksAbove is unmarshalChunksFrom with the smallest message
// received into a pooled buffer as an argument (the fuzz test's 0).
func unmarshalChunksAbove(data mem.BufferSlice, m *nodepb.ReadChunksResponse, minPooled int) error {
	n := data.Len()
	if n < minPooled {
		return unmarshalChunks(data.Materialize(), m)
	}
	var head [chunkHeadMax]byte
	h := head[:copyRange(data, 0, head[:])]
	small, off, ok := splitChunkData(h, n)
	if !ok {
		return unmarshalChunks(data.Materialize(), m)
	}
	if err := unmarshalChunks(small, m); err != nil {
		return err
	}
	buf := ChunkBufferPool.Get(n - off)
	copyRange(data, off, *buf)
	m.Chunk.Data = *buf
	return nil
}

// splitChunkData finds, in h (the first bytes of a message of n bytes), a
// chunk field (2) that ends the message and whose data field (1) ends it
// too, every field before that data being whole in h. It returns the
// message without that data (the chunk field re-encoded around the chunk's
// other fields) and the data's offset; false when the message is not so.
func splitChunkData(h []byte, n int) (small []byte, dataOff int, ok bool) {
	for b := h; len(b) > 0; {
		num, typ, k := protowire.ConsumeTag(b)
		if k < 0 || !num.IsValid() {
			return nil, 0, false
		}
		tagOff := len(h) - len(b)
		if num == fieldChunksChunk && typ == protowire.BytesType {
			l, lk := protowire.ConsumeVarint(b[k:])
			if lk < 0 {
				return nil, 0, false
			}
			valOff := tagOff + k + lk
			if uint64(n-valOff) == l {
				// The message's last field: find its data.
				inner, off, ok := splitData(h[valOff:], n-valOff)
				if !ok {
					return nil, 0, false
				}
				small = append([]byte(nil), h[:tagOff]...)
				small = protowire.AppendTag(small, fieldChunksChunk, protowire.BytesType)
				small = protowire.AppendBytes(small, inner)
				return small, valOff + off, true
			}
		}
		fk := protowire.ConsumeFieldValue(num, typ, b[k:])
		if fk < 0 {
			return nil, 0, false // cut short by h, or malformed
		}
		b = b[k+fk:]
	}
	return nil, 0, false
}

// splitData finds, in h (the first bytes of a ReadChunkResponse of n
// bytes), a data field ending the message whose preceding fields are whole
// in h: it returns those fields and the data's offset.
func splitData(h []byte, n int) (fields []byte, dataOff int, ok bool) {
	for b := h; len(b) > 0; {
		num, typ, k := protowire.ConsumeTag(b)
		if k < 0 || !num.IsValid() {
			return nil, 0, false
		}
		tagOff := len(h) - len(b)
		if num == fieldChunkData && typ == protowire.BytesType {
			l, lk := protowire.ConsumeVarint(b[k:])
			if lk < 0 {
				return nil, 0, false
			}
			valOff := tagOff + k + lk
			if uint64(n-valOff) == l {
				return h[:tagOff], valOff, true
			}
		}
		fk := protowire.ConsumeFieldValue(num, typ, b[k:])
		if fk < 0 {
			return nil, 0, false
		}
		b = b[k+fk:]
	}
	return nil, 0, false
}

// copyRange copies data's bytes from offset off into dst and returns how
// many it copied.
func copyRange(data mem.BufferSlice, off int, dst []byte) int {
	n := 0
	for _, b := range data {
		d := b.ReadOnlyData()
		if off >= len(d) {
			off -= len(d)
			continue
		}
		n += copy(dst[n:], d[off:])
		off = 0
		if n == len(dst) {
			break
		}
	}
	return n
}

// RecycleChunkData hands the data of a chunk received in a
// ReadChunksResponse back to ChunkBufferPool (data that did not come from
// it is left to the collector). The caller must own data exclusively:
// nothing may refer to it afterwards.
func RecycleChunkData(data []byte) {
	b := data[:0]
	ChunkBufferPool.Put(&b)
}
